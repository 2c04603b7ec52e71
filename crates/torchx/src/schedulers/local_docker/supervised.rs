//! local_docker under the recovery contract: Docker's restart policy cannot tell a requeue from
//! a failure, signal before a limit or stop at one, so such an app's containers run in the
//! foreground (`docker run`, one per attempt) under local_cwd's supervisor, whose machine
//! enforces the contract. It signals a container with `docker kill --signal` and reads a
//! `docker run` exit status of 128+N as the container's death by signal N (a `docker kill`
//! from outside is then a preemption). Status, logs, cancel and delete of such an app are
//! local_cwd's, from its own ledger under local_docker's state directory.

use std::path::{Path, PathBuf};

use super::render::{Container, DockerJob, LABEL_APP_ID, LABEL_REPLICA, LABEL_ROLE};
use crate::error::{Error, Result};
use crate::schedulers::attempt_timer::timed_command;
use crate::schedulers::local_cwd::{
    PopenRequest, ReplicaParam, RoleParams, FAULTHANDLER_ENV, HEARTBEAT_FILE_ENV,
};
use crate::specs::{AppDef, Recovery};

/// Where a container finds its checkpoint directory when the role names none: the host side
/// is `{log_dir}/checkpoint`, bind-mounted here.
pub(super) const CHECKPOINT_MOUNT: &str = "/torchx/checkpoint";

/// The label that names a supervised container's app.
const LABEL_SUPERVISED_APP_ID: &str = "torchx.pytorch.org/supervised-app-id";

/// The host directory behind [`CHECKPOINT_MOUNT`].
pub(super) fn host_checkpoint_dir(log_dir: &Path) -> PathBuf {
    log_dir.join("checkpoint")
}

/// The supervised form of `job`: one local_cwd replica per container, whose command is
/// `docker run` of that container. Environment values reach the container by name
/// (`-e NAME`) from the `docker run` process's environment, so none is ever on a command line.
/// `after`: the jobs it waits for (`--after`), which the supervisor holds it until; a role
/// that sets no recovery option gets its plain command and TorchX's environment.
pub(super) fn supervised(
    job: &DockerJob,
    app: &AppDef,
    log_dir: PathBuf,
    after: &[crate::specs::Dependency],
) -> Result<PopenRequest> {
    let mut roles: Vec<RoleParams> = Vec::new();
    for role in &app.roles {
        let recovery = role.uses_recovery();
        // The role's own directory (on one of its mounts), else one next to the logs, mounted.
        let checkpoint = if role.checkpoint_dir.is_some() {
            (role.container_checkpoint_dir()?.unwrap_or_default(), None)
        } else {
            (
                CHECKPOINT_MOUNT.to_string(),
                Some(host_checkpoint_dir(&log_dir)),
            )
        };
        let mut replicas = Vec::new();
        for c in job
            .containers
            .iter()
            .filter(|c| c.labels.get(LABEL_ROLE) == Some(&role.name))
        {
            let i = c.labels.get(LABEL_REPLICA).cloned().unwrap_or_default();
            let dir = log_dir.join(&role.name).join(&i);
            let mut env = c.environment.clone();
            let mut mounts: Vec<(&Path, &str)> = Vec::new();
            if recovery {
                env.insert("TORCHX_MAX_RETRIES".into(), role.max_retries.to_string());
                env.insert("TORCHX_CHECKPOINT_DIR".into(), checkpoint.0.clone());
                mounts.extend(checkpoint.1.as_deref().map(|host| (host, CHECKPOINT_MOUNT)));
            }
            // The heartbeat files' directory is mounted at its own path, so the path the
            // supervisor gives each attempt (`heartbeat.N`) names the same file on both sides.
            let heartbeat = role.hang_timeout.map(|_| dir.join("heartbeat"));
            if let Some(hb_dir) = &heartbeat {
                // Output is progress: a Python process's (torchrun's, that passes its workers'
                // lines on) must not sit in a buffer, as local_cwd's and Slurm's do not.
                env.entry("PYTHONUNBUFFERED".into())
                    .or_insert_with(|| "1".into());
                env.entry(FAULTHANDLER_ENV.into())
                    .or_insert_with(|| "1".into());
                env.insert(
                    HEARTBEAT_FILE_ENV.into(),
                    hb_dir.join("heartbeat").display().to_string(),
                );
            }
            let heartbeat_target = heartbeat.as_ref().map(|d| d.display().to_string());
            if let (Some(hb_dir), Some(target)) = (&heartbeat, &heartbeat_target) {
                mounts.push((hb_dir.as_path(), target.as_str()));
            }
            // The contract's shell in the container, without a limit of its own (the
            // supervisor keeps time): it passes the signals `docker kill` sends on to every
            // process of the replica and turns a TORCHX_REQUEUE_FILE request into the requeue
            // code. TORCHX_ATTEMPT comes from the supervisor.
            // A hung attempt gets the checkpoint signal, USR1 unless the role names one: the
            // shell must pass it on, not die of it.
            let contract = role.recovery();
            let untimed = Recovery {
                time_limit: None,
                checkpoint_signal: contract.checkpoint_signal.or(role
                    .hang_timeout
                    .map(|_| crate::specs::DEFAULT_CHECKPOINT_SIGNAL)),
                ..contract
            };
            let command = match c.command.split_first() {
                Some((entrypoint, args)) if recovery => {
                    timed_command(&untimed, role.max_retries, Some(":"), entrypoint, args)
                }
                _ => c.command.clone(),
            };
            replicas.push(ReplicaParam {
                args: docker_run(c, &env, &mounts, &command)?,
                env,
                stdout: dir.join("stdout.log"),
                stderr: dir.join("stderr.log"),
                combined: dir.join("combined.log"),
                cwd: log_dir.clone(),
                container: Some(c.name.clone()),
                requeue_file: None,
                heartbeat_file: heartbeat.map(|d| d.join("heartbeat")),
            });
        }
        // The containers get their GPUs from Docker (`--gpus`), not CUDA_VISIBLE_DEVICES.
        roles.push(RoleParams::new(role, 0, replicas));
    }
    Ok(PopenRequest {
        app_id: job.app_id.clone(),
        log_dir,
        auto_set_cuda_visible_devices: false,
        roles,
        after: after.to_vec(),
    })
}

/// `docker run` of one container, in the foreground, removed when it ends.
fn docker_run(
    c: &Container,
    env: &crate::specs::Env,
    host_mounts: &[(&Path, &str)],
    command: &[String],
) -> Result<Vec<String>> {
    // `--init`: the command is not PID 1, so a signal it does not handle ends it as it would
    // outside a container (PID 1 ignores SIGTERM), and the init passes signals on.
    // No `--rm`: the supervisor asks the engine how the container ended (out of memory?)
    // before it removes it.
    let mut args: Vec<String> = ["docker", "run", "--init", "--name", &c.name]
        .map(String::from)
        .to_vec();
    args.extend(["--hostname".into(), c.hostname.clone()]);
    args.extend(["--network".into(), c.network.clone()]);
    if c.privileged {
        args.push("--privileged".into());
    }
    // Not the app id label: describe and list find such an app in the supervisor's ledger,
    // not by its containers.
    for (k, v) in &c.labels {
        let k = if k == LABEL_APP_ID {
            LABEL_SUPERVISED_APP_ID
        } else {
            k
        };
        args.extend(["--label".into(), format!("{k}={v}")]);
    }
    for k in env.keys().map(String::as_str).chain(["TORCHX_ATTEMPT"]) {
        args.extend(["-e".into(), k.to_string()]);
    }
    let mut mounts: Vec<(&str, String, &str, bool)> = c
        .mounts
        .iter()
        .map(|m| {
            (
                m.kind.as_str(),
                m.source.clone(),
                m.target.as_str(),
                m.read_only,
            )
        })
        .collect();
    for (host, target) in host_mounts {
        mounts.push(("bind", host.display().to_string(), target, false));
    }
    for (kind, source, target, read_only) in mounts {
        // `--mount` is comma-separated key=value: a value holding one cannot be said there.
        if let Some(bad) = [&source, target]
            .into_iter()
            .find(|v| v.contains([',', '"']))
        {
            return Err(Error::spec(format!(
                "mount path `{bad}` contains a comma or a quote, which local_docker cannot pass \
                 to `docker run --mount` under the recovery options"
            )));
        }
        let ro = if read_only { ",readonly" } else { "" };
        args.extend([
            "--mount".into(),
            format!("type={kind},source={source},target={target}{ro}"),
        ]);
    }
    for d in &c.devices {
        args.extend(["--device".into(), d.clone()]);
    }
    if let Some(mb) = c.mem_mb.filter(|mb| *mb > 0) {
        args.extend(["--memory".into(), format!("{mb}m")]);
        args.extend(["--shm-size".into(), format!("{mb}m")]);
    }
    if let Some(nano) = c.nano_cpus.filter(|n| *n > 0) {
        args.extend(["--cpus".into(), format!("{}", nano as f64 / 1e9)]);
    }
    if let Some(gpus) = c.gpus {
        args.extend(["--gpus".into(), gpus.to_string()]);
    }
    args.push(c.image.clone());
    args.extend(command.iter().cloned());
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opts::{Cfg, TypedOpts};
    use crate::scheduler::{DryRunContext, NativeRequest};
    use crate::specs::{Resource, Role};

    fn job(app: &AppDef) -> Result<DockerJob> {
        let opts = super::super::LocalDockerOpts::from_cfg(&Cfg::new()).unwrap();
        let ctx = DryRunContext::new("torchx", "abc123", "/work");
        let mut job = super::super::render(app, &opts, &ctx, None)?;
        job.supervised = Some(supervised(&job, app, PathBuf::from("/logs/torchx/x"), &[])?);
        Ok(job)
    }

    #[test]
    fn supervised_docker_runs_snapshot() {
        let mut r = Role::new("trainer", "img:1")
            .with_entrypoint("python")
            .with_args(["train.py", "--lr", "0.1,0.2"]);
        r.num_replicas = 2;
        r.resource = Resource::new(2, 1, 4096);
        r.time_limit = Some(3600);
        r.env
            .insert("SECRET".into(), "not on any command line".into());
        let rendered = job(&AppDef::new("train", vec![r])).unwrap().render();
        let runs: Vec<&str> = rendered
            .lines()
            .filter(|l| l.starts_with("docker run"))
            .collect();
        assert_eq!(runs.len(), 2, "{rendered}");
        assert!(
            runs.iter().all(|l| !l.contains("not on any command line")),
            "an env value on a command line: {rendered}"
        );
        insta::assert_snapshot!(rendered);
    }

    #[test]
    fn a_mount_path_docker_run_cannot_say_is_refused() {
        let mut r = Role::new("r", "img").with_entrypoint("x");
        r.max_requeues = Some(1);
        r.mounts = vec![crate::specs::Mount::Bind {
            src_path: "/data,x".into(),
            dst_path: "/data".into(),
            read_only: true,
        }];
        let err = job(&AppDef::new("a", vec![r])).unwrap_err();
        assert!(err.to_string().contains("`/data,x`"), "{err}");
    }
}
