//! Pure rendering of an AppDef into TorchX's sbatch script: one heterogeneous group per
//! replica, every user string shell-quoted.

use serde::Serialize;

use super::opts::SlurmOpts;
use super::recovery::{job_recovery, recovery_script, slurm_limit_secs};
use crate::error::{Error, Result};
use crate::scheduler::{ArrayRequest, DryRunContext, NativeRequest};
use crate::specs::group::ArraySpec;
use crate::specs::{AppDef, MacroValues, Recovery, Role};
use crate::text::shell_quote;

/// The `${app_id}` macro, kept literal until the script turns it into `"$SLURM_JOB_ID"`.
const APP_ID: &str = "${app_id}";
/// The env var naming rank 0's host(s).
pub(super) const RANK0_ENV: &str = "SLURM_JOB_NODELIST_HET_GROUP_0";
/// What a dry run learns from the cluster (`Scheduler::dryrun_facts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmFacts {
    /// `sbatch --version`'s output.
    pub version: Option<String>,
    /// The memory (MB) of the nodes of the partition the job goes to.
    pub partition_mem_mb: Option<i64>,
}
/// TorchX's assumption when the version cannot be probed.
pub(super) const DEFAULT_VERSION: (u32, u32) = (24, 5);

/// One replica: one heterogeneous group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicaRequest {
    /// `{role}-{replica_id}`: the het group's job name.
    pub name: String,
    /// The role's entrypoint.
    pub entrypoint: String,
    /// Its arguments (macros applied).
    pub args: Vec<String>,
    /// `#SBATCH` options of its group, in order (`None` = a flag).
    pub sbatch_opts: Vec<(String, Option<String>)>,
    /// `srun` options of its group, in order.
    pub srun_opts: Vec<(String, String)>,
    /// Its environment.
    pub env: crate::specs::Env,
    /// Its role's hang timeout (seconds): the task runs under the hang watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang_timeout: Option<u64>,
}

/// An `sbatch` submission.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SbatchRequest {
    /// `sbatch --parsable` and its job-wide options (the script path is added at submission).
    pub cmd: Vec<String>,
    /// One het group per replica, in role order.
    pub replicas: Vec<ReplicaRequest>,
    /// Where the script, the code and the logs go (`--chdir`), if set.
    pub job_dir: Option<String>,
    /// How many times the script requeues the job after a failure (min over roles).
    pub max_retries: u32,
    /// The recovery contract, when a role asks for it (`--time_limit`, `--checkpoint_signal`,
    /// `--requeue_exit_code`, `--max_requeues`): the script then keeps an attempts file and
    /// requeues itself.
    pub recovery: Option<Recovery>,
    /// The roles' `checkpoint_dir`, if one sets it (else `torchx-$SLURM_JOB_ID/checkpoint`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<String>,
    /// A job array's tasks (`sbatch --array`): each task's one replica, of which only the
    /// command and environment differ; the script picks its own by `SLURM_ARRAY_TASK_ID`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub array_tasks: Vec<(u32, ReplicaRequest)>,
    /// Whether a hung attempt is requeued from its checkpoint (the roles ask for recovery)
    /// rather than a failure (a hang timeout alone also runs the script of `recovery`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub requeue_hung: bool,
}

impl NativeRequest for SbatchRequest {
    fn render(&self) -> String {
        format!(
            "{} $SBATCH_SCRIPT\n\n#----------------\n# SBATCH_SCRIPT\n#----------------\n{}",
            crate::text::shell_join(&self.cmd),
            self.materialize()
        )
    }
    fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["script"] = self.materialize().into();
        v
    }
}

/// What `${app_id}` is in the script of a job: its job id.
const JOB_APP_ID: &str = "$SLURM_JOB_ID";
/// ... and in the script of a job array: the task's own app id, `<array job id>_<task id>`
/// (set at the top of the script), which also names its logs and its torchx directory.
const TASK_APP_ID: &str = "$torchx_app_id";

/// Quotes an argument for bash, turning the literal `${app_id}` into `"$SLURM_JOB_ID"`.
pub fn quote_with_app_id(s: &str) -> String {
    quote_with(s, JOB_APP_ID)
}

/// Quotes an argument for bash, turning the literal `${app_id}` into `"<app_id>"` (a variable).
fn quote_with(s: &str, app_id: &str) -> String {
    s.split(APP_ID)
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(&format!("\"{app_id}\""))
}

fn opt_strs<'a>(opts: impl IntoIterator<Item = (&'a String, Option<&'a String>)>) -> Vec<String> {
    opts.into_iter()
        .map(|(k, v)| match v {
            Some(v) => format!("--{k}={v}"),
            None => format!("--{k}"),
        })
        .collect()
}

impl ReplicaRequest {
    /// The `#SBATCH` words and the (quoted) `srun` words of this group, `${app_id}` being the
    /// variable `app_id`; under the recovery contract (`record_exits`) each task runs inside
    /// `$torchx_task`, which records its exit code (see `RECOVERY_SCRIPT`).
    fn materialize(&self, app_id: &str, record_exits: bool) -> (Vec<String>, Vec<String>) {
        let mut sbatch = vec![format!("--job-name={}", self.name)];
        sbatch.extend(opt_strs(
            self.sbatch_opts.iter().map(|(k, v)| (k, v.as_ref())),
        ));
        let mut srun = opt_strs(self.srun_opts.iter().map(|(k, v)| (k, Some(v))));
        // Slurm splits --export on commas, so values holding one (or a newline) go through
        // `env` instead, where they arrive intact.
        let (exported, via_env): (Vec<_>, Vec<_>) =
            self.env.iter().partition(|(_, v)| !v.contains([',', '\n']));
        if !exported.is_empty() {
            let kvs: Vec<String> = exported.iter().map(|(k, v)| format!("{k}={v}")).collect();
            srun.push(format!("--export=ALL,{}", kvs.join(",")));
        }
        let mut command = Vec::new();
        if !via_env.is_empty() {
            command.push("env".into());
            command.extend(via_env.iter().map(|(k, v)| format!("{k}={v}")));
        }
        command.push(self.entrypoint.clone());
        command.extend(self.args.iter().cloned());
        let quote = |words: Vec<String>| words.into_iter().map(|a| quote_with(&a, app_id));
        let mut words: Vec<String> = quote(srun).collect();
        if record_exits {
            words.push("\"${torchx_task[@]}\"".into());
        }
        if let Some(timeout) = self.hang_timeout {
            let label = match self.name.rsplit_once('-') {
                Some((role, i)) => format!("{role}/{i}"),
                None => self.name.clone(),
            };
            words.push("\"${torchx_watch[@]}\"".into());
            words.push(timeout.to_string());
            words.push(shell_quote(&label));
        }
        words.extend(quote(command));
        (sbatch, words)
    }
}

impl SbatchRequest {
    /// The bash script passed to `sbatch`.
    pub fn materialize(&self) -> String {
        let app_id = if self.array_tasks.is_empty() {
            JOB_APP_ID
        } else {
            TASK_APP_ID
        };
        let mut groups = Vec::new();
        let mut srun = Vec::new();
        for (i, r) in self.replicas.iter().enumerate() {
            if i > 0 {
                srun.push(":\\\n    ".to_string());
            }
            let (g, s) = r.materialize(app_id, self.recovery.is_some());
            groups.push(format!("#SBATCH {}\n", g.join(" ")));
            srun.extend(s);
        }
        let mut groups = groups.join("#SBATCH hetjob\n");
        if !self.array_tasks.is_empty() {
            // Each task runs its own srun words, chosen by its index.
            let mut pick = String::from(
                "\n# A job array: this task's app id, then its own command.\n\
                 torchx_app_id=\"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"\n\
                 case \"$SLURM_ARRAY_TASK_ID\" in\n",
            );
            for (index, r) in &self.array_tasks {
                let (_, words) = r.materialize(app_id, self.recovery.is_some());
                pick.push_str(&format!(
                    "    {index}) torchx_srun=({}) ;;\n",
                    words.join(" ")
                ));
            }
            pick.push_str(
                "    *) echo \"torchx: task $SLURM_ARRAY_TASK_ID is not in this array\" >&2; exit 2 ;;\n\
                 esac\n",
            );
            groups.push_str(&pick);
            srun = vec!["\"${torchx_srun[@]}\"".to_string()];
        }
        let cmd: Vec<String> = self.cmd.iter().map(|a| shell_quote(a)).collect();
        if let Some(recovery) = &self.recovery {
            return format!(
                "#!/bin/bash\n#\n# Generated by torchx (Rust) {version}\n# Run with: {cmd}\n#\n\
                 {groups}\n{PRIVATE_OUTPUT}\n{script}",
                version = crate::VERSION,
                cmd = cmd.join(" "),
                groups = groups,
                script = recovery_script(
                    recovery,
                    self.max_retries,
                    self.checkpoint_dir.as_deref(),
                    app_id,
                    &srun.join(" "),
                    (
                        self.replicas
                            .iter()
                            .chain(self.array_tasks.iter().map(|(_, r)| r))
                            .any(|r| r.hang_timeout.is_some()),
                        self.requeue_hung
                    ),
                ),
            );
        }
        format!(
            r#"#!/bin/bash
#
# Generated by torchx (Rust) {version}
# Run with: {cmd}
#
{groups}
{PRIVATE_OUTPUT}
set -evx

export PYTHONUNBUFFERED=1
export SLURM_UNBUFFEREDIO=1
export TORCHX_MAX_RETRIES={retries}

set +e
srun {srun}
exitcode=$?
set -e

echo "job exited with code $exitcode"
if [ $exitcode -ne 0 ]; then
    if [ "$TORCHX_MAX_RETRIES" -gt "${{SLURM_RESTART_COUNT:-0}}" ]; then
        scontrol requeue "$SLURM_JOB_ID"
    fi
    exit $exitcode
fi
"#,
            version = crate::VERSION,
            cmd = cmd.join(" "),
            groups = groups,
            retries = self.max_retries,
            srun = srun.join(" "),
        )
    }
}

/// The batch script's first command: its output (a trace of the job's environment, as
/// TorchX's `set -evx` shows it) becomes its owner's alone before anything is written to it.
/// Only regular files: never a terminal or `/dev/null`.
const PRIVATE_OUTPUT: &str =
    "for f in /proc/self/fd/1 /proc/self/fd/2; do [ -f \"$f\" ] && chmod go= \"$f\"; done 2>/dev/null";

/// Parses `slurm 24.11.1`, `slurm-wlm 22.05.8` (Debian) or `22.05` into (major, minor).
pub fn parse_version(s: &str) -> Option<(u32, u32)> {
    let v = s.split_whitespace().last()?;
    let mut parts = v.split(['.', '-']);
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts
        .next()
        .and_then(|m| m.trim().parse().ok())
        .unwrap_or(0);
    Some((major, minor))
}

/// Rejects what would break out of an `#SBATCH` line or the script's comment header.
fn check_option(key: &str, value: &str, allow_spaces: bool) -> Result<()> {
    let bad = value
        .chars()
        .find(|c| c.is_control() || (!allow_spaces && c.is_whitespace()));
    match bad {
        Some(c) => Err(Error::config(format!(
            "slurm run option `{key}` = {value:?} contains {c:?}; {} are not allowed",
            if allow_spaces {
                "control characters"
            } else {
                "whitespace and control characters"
            }
        ))),
        None => Ok(()),
    }
}

/// Partition, QOS and account names: letters, digits, `_`, `-`, `.` (and `,` between the
/// partitions of a list), as Slurm accepts them; anything else is a typo caught before sbatch.
fn check_slurm_name(key: &str, value: &str, list: bool) -> Result<()> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c) || (list && c == ',');
    if value.is_empty() || value.split(',').any(str::is_empty) || !value.chars().all(ok) {
        return Err(Error::config(format!(
            "slurm run option `{key}` = `{value}` is not a Slurm {key} name: use letters, digits, \
             `_`, `-` and `.`{}",
            if list {
                " (several partitions: a,b)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

/// `time` in one of sbatch's formats: `minutes`, `minutes:seconds`, `hours:minutes:seconds`,
/// `days-hours`, `days-hours:minutes`, `days-hours:minutes:seconds`, or `UNLIMITED`.
fn check_time(value: &str) -> Result<()> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let clock = |s: &str, max_parts: usize| {
        let parts: Vec<&str> = s.split(':').collect();
        parts.len() <= max_parts && parts.iter().all(|p| digits(p))
    };
    let ok = match value.split_once('-') {
        _ if value.eq_ignore_ascii_case("unlimited") || value.eq_ignore_ascii_case("infinite") => {
            true
        }
        Some((days, rest)) => digits(days) && clock(rest, 3),
        None => clock(value, 3),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::config(format!(
            "slurm run option `time` = `{value}` is not a Slurm time limit; formats: minutes, \
             minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, \
             days-hours:minutes:seconds, UNLIMITED"
        )))
    }
}

fn check_name(what: &str, name: &str, allowed: impl Fn(char) -> bool) -> Result<()> {
    match name.chars().find(|c| !allowed(*c)) {
        Some(c) => Err(Error::spec(format!(
            "{what} `{name}` contains {c:?}; on slurm it may only contain letters, digits, `_`, `-` and `.`"
        ))),
        None if name.is_empty() => Err(Error::spec(format!("{what} is empty"))),
        None => Ok(()),
    }
}

fn group_opts(
    role: &Role,
    opts: &SlurmOpts,
    recovery: Option<&Recovery>,
    nomem: bool,
    version: (u32, u32),
) -> Vec<(String, Option<String>)> {
    let mut o: Vec<(String, Option<String>)> = vec![("requeue".into(), None)];
    let time = recovery
        .filter(|r| r.time_limit.is_some())
        .map(|r| (slurm_limit_secs(r) / 60).to_string())
        .or_else(|| opts.time.clone());
    if let Some(sig) = recovery.and_then(|r| r.checkpoint_signal) {
        // B: the batch shell gets it and passes it on (it also learns the limit is near).
        o.push((
            "signal".into(),
            Some(format!("B:{}@{}", sig.signal.name(), sig.seconds)),
        ));
    }
    for (k, v) in [
        ("partition", &opts.partition),
        ("time", &time),
        ("constraint", &opts.constraint),
        ("qos", &opts.qos),
        ("account", &opts.account),
    ] {
        if let Some(v) = v {
            o.push((k.into(), Some(v.clone())));
        }
    }
    if opts.exclusive {
        o.push(("exclusive".into(), None));
    }
    o.push(("ntasks-per-node".into(), Some("1".into())));
    let r = &role.resource;
    if r.cpu > 0 {
        o.push(("cpus-per-task".into(), Some(r.cpu.to_string())));
    }
    if !nomem && r.mem_mb > 0 {
        o.push(("mem".into(), Some(r.mem_mb.to_string())));
    }
    if r.gpu > 0 {
        if version >= (24, 11) {
            o.push(("gpus-per-node".into(), Some(r.gpu.to_string())));
        } else {
            o.push(("gpus-per-task".into(), Some(r.gpu.to_string())));
            o.push(("ntasks".into(), Some("1".into())));
        }
    }
    o
}

/// Renders the sbatch request. `facts` may carry the probed Slurm version and the partition's
/// memory; `opts.slurm_version` overrides the probe.
pub fn render(
    app: &AppDef,
    opts: &SlurmOpts,
    ctx: &DryRunContext,
    facts: Option<&SlurmFacts>,
) -> Result<SbatchRequest> {
    for (key, value, spaces) in [
        ("partition", &opts.partition, false),
        ("time", &opts.time, false),
        ("constraint", &opts.constraint, false),
        ("qos", &opts.qos, false),
        ("account", &opts.account, false),
        ("comment", &opts.comment, true),
        ("mail-user", &opts.mail_user, false),
        ("mail-type", &opts.mail_type, false),
        ("job_dir", &opts.job_dir, true),
    ] {
        if let Some(v) = value {
            check_option(key, v, spaces)?;
        }
    }
    for (key, value, lists) in [
        ("partition", &opts.partition, true),
        ("qos", &opts.qos, false),
        ("account", &opts.account, false),
    ] {
        if let Some(v) = value {
            check_slurm_name(key, v, lists)?;
        }
    }
    if let Some(t) = &opts.time {
        check_time(t)?;
    }
    let version = match &opts.slurm_version {
        Some(v) => parse_version(v).ok_or_else(|| {
            Error::config(format!(
                "slurm run option `slurm_version` = `{v}` is not a version like 24.11"
            ))
        })?,
        None => facts
            .and_then(|f| f.version.as_deref())
            .and_then(parse_version)
            .unwrap_or(DEFAULT_VERSION),
    };
    let nomem = facts
        .and_then(|f| f.partition_mem_mb)
        .is_some_and(|m| m <= 1000);
    // A hang timeout needs the recovery script (its attempts file, the watch, the requeue
    // budget); without a recovery option a hung attempt is a failure, as TorchX counts them.
    let recovering = job_recovery(app, opts)?;
    let requeue_hung = recovering.is_some();
    let recovery = recovering.or_else(|| {
        app.roles
            .iter()
            .any(|r| r.hang_timeout.is_some())
            .then_some(Recovery {
                time_limit: None,
                checkpoint_signal: None,
                requeue_exit_code: crate::specs::DEFAULT_REQUEUE_EXIT_CODE,
                max_requeues: 0,
            })
    });
    let containerized = containerized(opts)?;
    let mut replicas = Vec::new();
    for role in &app.roles {
        check_name("role name", &role.name, |c| {
            c.is_ascii_alphanumeric() || "_-.".contains(c)
        })?;
        for k in role.env.keys() {
            if !k
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(Error::spec(format!(
                    "env var name `{k}` of role `{}` is not a valid shell variable name",
                    role.name
                )));
            }
        }
        for i in 0..role.num_replicas {
            let values = MacroValues {
                // In a container the image is not a directory here.
                img_root: if containerized {
                    String::new()
                } else {
                    role.image.clone()
                },
                app_id: APP_ID.to_string(),
                replica_id: i.to_string(),
                rank0_env: RANK0_ENV.to_string(),
            };
            let r = values.apply(role);
            let name = format!("{}-{i}", role.name);
            let mut srun = srun_opts(&name, recovery.is_some());
            if containerized {
                srun.push(("container-image".into(), r.image.clone()));
            }
            replicas.push(ReplicaRequest {
                sbatch_opts: group_opts(&r, opts, recovery.as_ref(), nomem, version),
                srun_opts: srun,
                name,
                entrypoint: r.entrypoint,
                args: r.args,
                env: r.env,
                hang_timeout: role.hang_timeout,
            });
        }
    }
    let mut cmd = vec!["sbatch".to_string(), "--parsable".to_string()];
    for (k, v) in [
        ("comment", &opts.comment),
        ("mail-user", &opts.mail_user),
        ("mail-type", &opts.mail_type),
    ] {
        if let Some(v) = v {
            cmd.push(format!("--{k}={v}"));
        }
    }
    if let Some(d) = &opts.job_dir {
        cmd.push(format!("--chdir={d}"));
    }
    cmd.extend(dependency_opts(&ctx.after)?);
    Ok(SbatchRequest {
        cmd,
        replicas,
        job_dir: opts.job_dir.clone(),
        max_retries: app.roles.iter().map(|r| r.max_retries).min().unwrap_or(0),
        checkpoint_dir: app.roles.iter().find_map(|r| r.checkpoint_dir.clone()),
        recovery,
        array_tasks: Vec::new(),
        requeue_hung,
    })
}

/// `--dependency=afterok:A:B,afternotok:C` and `--kill-on-invalid-dep=yes` (a dependency
/// that can no longer be satisfied cancels the job instead of leaving it pending forever) for
/// `--after`: Slurm holds the job itself. Only Slurm jobs can be waited for natively.
fn dependency_opts(after: &[crate::specs::Dependency]) -> Result<Vec<String>> {
    use crate::specs::Condition;
    if after.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_kind: Vec<(&str, Vec<String>)> = Vec::new();
    for dep in after {
        let handle = crate::specs::parse_app_handle(&dep.handle)?;
        let job = handle.app_id();
        let native =
            handle.scheduler() == super::NAME && job.parse::<super::state::JobRef>().is_ok();
        if !native {
            return Err(Error::unsupported(
                super::NAME,
                format!(
                    "--after {dep}: a Slurm job waits natively only for Slurm jobs (a job id or \
                     an array task), not for {}",
                    if handle.scheduler() == super::NAME {
                        "a group of separately submitted tasks"
                    } else {
                        "a job of another scheduler"
                    }
                ),
            ));
        }
        let kind = match dep.condition {
            Condition::Ok => "afterok",
            Condition::NotOk => "afternotok",
            Condition::Any => "afterany",
        };
        match by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, jobs)) => jobs.push(job.to_string()),
            None => by_kind.push((kind, vec![job.to_string()])),
        }
    }
    let clauses: Vec<String> = by_kind
        .iter()
        .map(|(kind, jobs)| format!("{kind}:{}", jobs.join(":")))
        .collect();
    Ok(vec![
        format!("--dependency={}", clauses.join(",")),
        "--kill-on-invalid-dep=yes".to_string(),
    ])
}

/// One `sbatch --array` of the tasks' requests (each rendered on its own, in index order), or
/// why they cannot be one: Slurm's arrays are of one-component jobs whose options are the
/// same, so a heterogeneous job (several roles or replicas) or tasks whose jobs differ beyond
/// their command and environment go one `sbatch` per task.
pub(super) fn array(
    tasks: Vec<(u32, SbatchRequest)>,
    max_concurrent: Option<u32>,
) -> ArrayRequest<SbatchRequest> {
    let Some((_, first)) = tasks.first() else {
        return ArrayRequest::PerTask("a group of no tasks".into());
    };
    if first.replicas.len() != 1 {
        return ArrayRequest::PerTask(format!(
            "the app is a heterogeneous job of {} replicas, and Slurm's job arrays are of \
             single jobs",
            first.replicas.len()
        ));
    }
    let same_job = |r: &SbatchRequest| {
        let (a, b) = (&r.replicas[0], &first.replicas[0]);
        r.cmd == first.cmd
            && r.job_dir == first.job_dir
            && r.max_retries == first.max_retries
            && r.recovery == first.recovery
            && r.checkpoint_dir == first.checkpoint_dir
            && r.replicas.len() == 1
            && (&a.name, &a.sbatch_opts, &a.srun_opts) == (&b.name, &b.sbatch_opts, &b.srun_opts)
    };
    if let Some((index, _)) = tasks.iter().find(|(_, r)| !same_job(r)) {
        return ArrayRequest::PerTask(format!(
            "task {index}'s job differs from task {}'s in more than its command and \
             environment (its options or resources), and a Slurm job array's tasks share them",
            tasks[0].0
        ));
    }
    let spec = ArraySpec {
        indexes: tasks.iter().map(|(i, _)| *i).collect(),
        max_concurrent,
    };
    let mut request = first.clone();
    request.cmd.push(format!("--array={spec}"));
    request.array_tasks = tasks
        .into_iter()
        .map(|(i, mut r)| (i, r.replicas.remove(0)))
        .collect();
    let size = request.materialize().len();
    if size > MAX_SCRIPT_BYTES {
        return ArrayRequest::PerTask(format!(
            "the tasks' commands make a batch script of {size} bytes, over Slurm's default \
             max_script_size ({MAX_SCRIPT_BYTES})"
        ));
    }
    ArrayRequest::Native(request)
}

/// Whether the replicas run in container images (`workspace_type=docker`: through the
/// cluster's container plugin, `srun --container-image`); `dir` (the default) runs them in
/// place. Any other builder is an error naming both.
pub(crate) fn containerized(opts: &SlurmOpts) -> Result<bool> {
    match opts.workspace_type.as_deref() {
        None | Some("dir") => Ok(false),
        Some("docker") => Ok(true),
        Some(other) => Err(Error::config(format!(
            "run option workspace_type: `{other}` is not a workspace builder of slurm; use \
             `dir` (copied into job_dir) or `docker` (an image run by srun --container-image)"
        ))),
    }
}

/// Slurm's default `max_script_size` (slurm.conf `SchedulerParameters`).
const MAX_SCRIPT_BYTES: usize = 4 * 1024 * 1024;

fn srun_opts(name: &str, recovery: bool) -> Vec<(String, String)> {
    let mut o = vec![
        ("output".into(), format!("slurm-{APP_ID}-{name}.out")),
        ("error".into(), format!("slurm-{APP_ID}-{name}.err")),
    ];
    if recovery {
        // Every attempt of a requeued job writes to the same files: keep the earlier ones.
        o.push(("open-mode".into(), "append".into()));
    }
    o.push(("wait".into(), "60".into()));
    o.push(("kill-on-bad-exit".into(), "1".into()));
    o
}
