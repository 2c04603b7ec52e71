//! Pure rendering of an AppDef into the processes to start (TorchX's `PopenRequest`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::opts::LocalCwdOpts;
use crate::scheduler::{DryRunContext, NativeRequest};
use crate::specs::{AppDef, MacroValues, Role};

/// The env var holding rank 0's host.
pub(super) const RANK0_ENV: &str = "TORCHX_RANK0_HOST";

/// One process to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaParam {
    /// The command line (entrypoint first).
    pub args: Vec<String>,
    /// Environment added to the submitter's.
    pub env: crate::specs::Env,
    /// stdout log file.
    pub stdout: PathBuf,
    /// stderr log file.
    pub stderr: PathBuf,
    /// Combined log file.
    pub combined: PathBuf,
    /// Working directory.
    pub cwd: PathBuf,
    /// The Docker container this process runs in the foreground (`docker run`, for
    /// local_docker's supervised apps): signals go to the container (`docker kill --signal`),
    /// and an exit status of 128+N is the container's death by signal N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Under the recovery contract, the file (as the supervisor sees it) whose existence when
    /// the replica ends asks for a requeue of the attempt: `TORCHX_REQUEUE_FILE` in its env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_file: Option<PathBuf>,
    /// With a hang timeout, the file (one per attempt, `.N` appended) whose modification counts
    /// as progress: `TORCHX_HEARTBEAT_FILE` in its env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_file: Option<PathBuf>,
}

/// The variable naming the file a replica's process creates to ask for a requeue.
pub(super) const REQUEUE_FILE_ENV: &str = "TORCHX_REQUEUE_FILE";

/// The processes of one role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleParams {
    /// The role name.
    pub role: String,
    /// GPUs per replica (for CUDA_VISIBLE_DEVICES assignment at launch).
    pub gpus_per_replica: i64,
    /// How many times failed replicas are restarted (requests recorded by earlier versions
    /// have neither field).
    #[serde(default)]
    pub max_retries: u32,
    /// What a restart restarts.
    #[serde(default)]
    pub retry_policy: crate::specs::RetryPolicy,
    /// Wall-clock seconds of one attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    /// The signal before the time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_signal: Option<crate::specs::CheckpointSignal>,
    /// The exit code that asks for a requeue.
    #[serde(default = "default_requeue_exit_code")]
    pub requeue_exit_code: i32,
    /// Requeues allowed (they do not spend `max_retries`).
    #[serde(default = "default_max_requeues")]
    pub max_requeues: u32,
    /// Whether the role opted into the recovery contract: without it, a replica ends as under
    /// TorchX (every kill and non-zero exit a failure) and gets TorchX's environment only.
    #[serde(default)]
    pub recovery: bool,
    /// Seconds a replica may go without progress before it is hung.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang_timeout: Option<u64>,
    /// One entry per replica.
    pub replicas: Vec<ReplicaParam>,
}

impl RoleParams {
    /// `role`'s retry and recovery settings, for these replicas.
    pub(crate) fn new(role: &Role, gpus_per_replica: i64, replicas: Vec<ReplicaParam>) -> Self {
        let recovery = role.recovery();
        RoleParams {
            role: role.name.clone(),
            gpus_per_replica,
            max_retries: role.max_retries,
            retry_policy: role.retry_policy,
            time_limit: recovery.time_limit,
            checkpoint_signal: recovery.checkpoint_signal,
            requeue_exit_code: recovery.requeue_exit_code,
            max_requeues: recovery.max_requeues,
            recovery: role.uses_recovery(),
            hang_timeout: role.hang_timeout,
            replicas,
        }
    }
}

fn default_requeue_exit_code() -> i32 {
    crate::specs::DEFAULT_REQUEUE_EXIT_CODE
}

fn default_max_requeues() -> u32 {
    crate::specs::DEFAULT_MAX_REQUEUES
}

/// The directory `TORCHX_CHECKPOINT_DIR` names in every attempt of an app's replicas.
fn checkpoint_dir(log_dir: &Path) -> PathBuf {
    log_dir.join("checkpoint")
}

/// The processes of an app, by role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PopenRequest {
    /// The app id.
    pub app_id: String,
    /// The app's log directory.
    pub log_dir: PathBuf,
    /// Whether to assign CUDA_VISIBLE_DEVICES at launch.
    pub auto_set_cuda_visible_devices: bool,
    /// The roles, in order.
    pub roles: Vec<RoleParams>,
    /// The jobs it waits for before any replica starts (`--after`): its supervisor waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<crate::specs::Dependency>,
}

impl NativeRequest for PopenRequest {
    fn render(&self) -> String {
        // JSON rather than YAML: ~10x faster for thousands of replicas and just as readable.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Joins PATH fragments, skipping empty ones.
pub(super) fn join_path<'a>(parts: impl IntoIterator<Item = Option<&'a str>>) -> String {
    parts
        .into_iter()
        .flatten()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(":")
}

/// The log directory of an app: `{base}/{session}/{app_id}`.
pub(super) fn app_log_dir(base: &Path, session: &str, app_id: &str) -> PathBuf {
    base.join(session).join(app_id)
}

/// Renders the processes for `app`. `default_log_base` is used when `log_dir` is unset.
pub fn render(
    app: &AppDef,
    opts: &LocalCwdOpts,
    ctx: &DryRunContext,
    default_log_base: &Path,
) -> PopenRequest {
    let app_id = ctx.make_unique(&app.name);
    let base = opts
        .log_dir
        .as_ref()
        .map(PathBuf::from)
        .unwrap_or_else(|| default_log_base.to_path_buf());
    let log_dir = app_log_dir(&base, &ctx.session_name, &app_id);
    let cwd = ctx.cwd.display().to_string();
    let mut roles = Vec::new();
    for role in &app.roles {
        let mut role = role.clone();
        let role_path = role.env.get("PATH").map(String::as_str);
        let path = if opts.prepend_cwd {
            join_path([Some(cwd.as_str()), role_path])
        } else {
            join_path([role_path, Some(cwd.as_str())])
        };
        role.env.insert("PATH".into(), path);
        if role.uses_recovery() {
            role.env
                .insert("TORCHX_MAX_RETRIES".into(), role.max_retries.to_string());
            // The role's own directory (relative to the job's), else one next to its logs.
            let checkpoints = match &role.checkpoint_dir {
                Some(dir) => ctx.cwd.join(dir),
                None => checkpoint_dir(&log_dir),
            };
            role.env.insert(
                "TORCHX_CHECKPOINT_DIR".into(),
                checkpoints.display().to_string(),
            );
        }
        let replicas = (0..role.num_replicas)
            .map(|i| replica(&role, i, &app_id, &cwd, &log_dir, ctx))
            .collect();
        roles.push(RoleParams::new(&role, role.resource.gpu.max(0), replicas));
    }
    PopenRequest {
        app_id,
        log_dir,
        auto_set_cuda_visible_devices: opts.auto_set_cuda_visible_devices,
        roles,
        after: ctx.after.clone(),
    }
}

fn replica(
    role: &Role,
    i: u32,
    app_id: &str,
    cwd: &str,
    log_dir: &Path,
    ctx: &DryRunContext,
) -> ReplicaParam {
    let values = MacroValues {
        img_root: cwd.to_string(),
        app_id: app_id.to_string(),
        replica_id: i.to_string(),
        rank0_env: RANK0_ENV.to_string(),
    };
    let r = values.apply(role);
    let dir = log_dir.join(&role.name).join(i.to_string());
    let mut env = r.env;
    env.insert(RANK0_ENV.into(), "localhost".into());
    env.entry("TORCHELASTIC_ERROR_FILE".into())
        .or_insert_with(|| dir.join("error.json").display().to_string());
    env.entry("PET_LOG_DIR".into()).or_insert_with(|| {
        log_dir
            .join("torchelastic")
            .join(&role.name)
            .display()
            .to_string()
    });
    let requeue_file = role.uses_recovery().then(|| dir.join("requeue"));
    if let Some(file) = &requeue_file {
        env.insert(REQUEUE_FILE_ENV.into(), file.display().to_string());
    }
    let heartbeat_file = role.hang_timeout.map(|_| dir.join("heartbeat"));
    if let Some(file) = &heartbeat_file {
        env.insert(
            super::watchdog::HEARTBEAT_FILE_ENV.into(),
            file.display().to_string(),
        );
        env.entry(super::watchdog::FAULTHANDLER_ENV.into())
            .or_insert_with(|| "1".into());
    }
    let mut args = vec![r.entrypoint];
    args.extend(r.args);
    ReplicaParam {
        args,
        env,
        stdout: dir.join("stdout.log"),
        stderr: dir.join("stderr.log"),
        combined: dir.join("combined.log"),
        cwd: ctx.cwd.clone(),
        container: None,
        requeue_file,
        heartbeat_file,
    }
}

/// Contiguous GPU ranges per replica in role order (`0,1`, `2,3`, ...), or `None` when more GPUs
/// are requested than `device_count`.
pub(super) fn cuda_assignments(req: &PopenRequest, device_count: i64) -> Option<Vec<Vec<String>>> {
    let total: i64 = req
        .roles
        .iter()
        .map(|r| r.replicas.len() as i64 * r.gpus_per_replica)
        .sum();
    if total == 0 || total > device_count {
        return None;
    }
    let mut next = 0i64;
    let mut out = Vec::new();
    for role in &req.roles {
        let mut role_out = Vec::new();
        for _ in &role.replicas {
            let ids: Vec<String> = (next..next + role.gpus_per_replica)
                .map(|g| g.to_string())
                .collect();
            next += role.gpus_per_replica;
            role_out.push(ids.join(","));
        }
        out.push(role_out);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::Resource;

    fn ctx() -> DryRunContext {
        DryRunContext::new("torchx", "abc123", "/work/proj")
    }

    fn opts(log_dir: Option<&str>, prepend_cwd: bool) -> LocalCwdOpts {
        LocalCwdOpts {
            log_dir: log_dir.map(String::from),
            prepend_cwd,
            auto_set_cuda_visible_devices: false,
        }
    }

    fn app() -> AppDef {
        let mut r = Role::new("trainer", "img")
            .with_entrypoint("python")
            .with_args([
                "${img_root}/t.py",
                "--id",
                "${app_id}",
                "--rank",
                "${replica_id}",
                "--rdzv",
                "$${${rank0_env}:=x}",
            ]);
        r.num_replicas = 2;
        r.env.insert("PATH".into(), "/opt/bin".into());
        r.env.insert("FOO".into(), "${app_id}".into());
        AppDef::new("app", vec![r])
    }

    #[test]
    fn snapshot_and_macros() {
        let req = render(
            &app(),
            &opts(Some("/logs"), false),
            &ctx(),
            Path::new("/state"),
        );
        assert_eq!(req.app_id, "app-abc123");
        let r1 = &req.roles[0].replicas[1];
        assert_eq!(
            r1.args,
            [
                "python",
                "/work/proj/t.py",
                "--id",
                "app-abc123",
                "--rank",
                "1",
                "--rdzv",
                "${TORCHX_RANK0_HOST:=x}"
            ]
        );
        assert_eq!(r1.env["PATH"], "/opt/bin:/work/proj");
        assert_eq!(r1.env["FOO"], "app-abc123");
        assert_eq!(r1.env["TORCHX_RANK0_HOST"], "localhost");
        assert_eq!(
            r1.stdout,
            Path::new("/logs/torchx/app-abc123/trainer/1/stdout.log")
        );
        insta::assert_snapshot!(req.render());
    }

    #[test]
    fn recovery_snapshot() {
        let mut a = app();
        a.roles[0].time_limit = Some(7200);
        a.roles[0].max_requeues = Some(5);
        a.roles[0].checkpoint_dir = Some("ckpt".into());
        let req = render(&a, &opts(None, false), &ctx(), Path::new("/state"));
        let role = &req.roles[0];
        assert_eq!(
            (role.time_limit, role.max_requeues, role.requeue_exit_code),
            (Some(7200), 5, 75)
        );
        assert_eq!(
            role.replicas[0].env["TORCHX_CHECKPOINT_DIR"],
            "/work/proj/ckpt"
        );
        insta::assert_snapshot!(req.render());
    }

    #[test]
    fn prepend_cwd_orders_path() {
        let req = render(&app(), &opts(None, true), &ctx(), Path::new("/state"));
        assert_eq!(req.roles[0].replicas[0].env["PATH"], "/work/proj:/opt/bin");
        assert_eq!(req.log_dir, Path::new("/state/torchx/app-abc123"));
    }

    #[test]
    fn cuda() {
        let mut a = app();
        a.roles[0].resource = Resource::new(1, 2, 10);
        let req = render(&a, &opts(None, false), &ctx(), Path::new("/s"));
        assert_eq!(
            cuda_assignments(&req, 4),
            Some(vec![vec!["0,1".to_string(), "2,3".to_string()]])
        );
        assert_eq!(cuda_assignments(&req, 3), None);
    }
}
