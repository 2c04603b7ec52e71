//! Integration tests against a real Slurm cluster (`scripts/slurm/up.sh --nodes 4`, started by
//! .ci/run). Without one, every test says loudly that it was skipped.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use support::{attempts, slurm_up, stderr, stdout, Env};
use torchx::config::TorchxConfig;
use torchx::scheduler::{Registry, Scheduler};
use torchx::schedulers::slurm::SlurmScheduler;
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

/// `torchx run -s slurm --wait ...`: (handle, exit code, stderr).
fn run_wait(env: &Env, args: &[&str]) -> (String, i32, String) {
    let mut full = vec!["run", "-s", "slurm", "--wait"];
    full.extend_from_slice(args);
    let out = env.run(&full);
    (
        stdout(&out).trim().to_string(),
        out.status.code().unwrap_or(-1),
        stderr(&out),
    )
}

#[test]
fn echo_succeeds_and_its_log_is_readable_from_anywhere() {
    if !slurm_up("slurm echo") {
        return;
    }
    let env = Env::new();
    let (handle, code, err) = run_wait(&env, &["utils.echo", "--msg", "hello slurm"]);
    assert_eq!(code, 0, "{err}");
    assert!(handle.starts_with("slurm://torchx/"), "{handle}");
    let s = env.status(&handle);
    assert_eq!(s["state"], "SUCCEEDED");
    // From another directory: the job dir was remembered.
    let out = env
        .cmd(&["log", &handle, "--streams", "stdout"])
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "echo/0 hello slurm\n", "{}", stderr(&out));
    let list = env.run(&["list", "-s", "slurm", "--json"]);
    assert!(stdout(&list).contains(&handle), "{}", stdout(&list));
}

#[test]
fn failing_job_reports_failed_with_its_exit_code() {
    if !slurm_up("slurm failure") {
        return;
    }
    let env = Env::new();
    let (handle, code, _) = run_wait(
        &env,
        &["utils.sh", "--", "sh", "-c", "echo bad >&2; exit 7"],
    );
    assert_eq!(code, 1);
    let s = env.status(&handle);
    assert_eq!(s["state"], "FAILED");
    assert!(s["msg"].as_str().unwrap().contains("exit code 7"), "{s}");
    let out = env.run(&["log", &handle, "--streams", "stderr"]);
    assert_eq!(stdout(&out), "sh/0 bad\n");
}

#[test]
fn two_roles_three_replicas_run_as_one_hetjob_with_env_and_hosts() {
    if !slurm_up("slurm hetjob") {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: het\nroles:\n\
         - name: a\n  image: /tmp\n  entrypoint: sh\n  num_replicas: 2\n  env: {WHO: 'role a'}\n  \
           args: ['-c', 'echo \"$WHO ${replica_id} on $SLURMD_NODENAME rank0=${SLURM_JOB_NODELIST_HET_GROUP_0}\"']\n\
         - name: b\n  image: /tmp\n  entrypoint: sh\n  env: {WHO: 'role b'}\n  \
           args: ['-c', 'echo \"$WHO ${replica_id} on $SLURMD_NODENAME\"']\n",
    )
    .unwrap();
    let (handle, code, err) = run_wait(&env, &["./app.yaml"]);
    assert_eq!(code, 0, "{err}");
    let s = env.status(&handle);
    let roles = s["roles"].as_array().unwrap();
    let hosts: Vec<&str> = roles
        .iter()
        .flat_map(|r| r["replicas"].as_array().unwrap())
        .map(|r| r["hostname"].as_str().unwrap())
        .collect();
    assert_eq!(hosts.len(), 3, "{s}");
    assert!(hosts.iter().all(|h| h.starts_with('n')), "{hosts:?}");
    for (role, k, who) in [
        ("a", 0, "role a 0"),
        ("a", 1, "role a 1"),
        ("b", 0, "role b 0"),
    ] {
        let out = env.run(&[
            "log",
            &format!("{handle}/{role}/{k}"),
            "--streams",
            "stdout",
        ]);
        let line = stdout(&out);
        assert!(line.contains(who), "{role}/{k}: {line}");
        let host = line
            .split(" on ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert!(hosts.contains(&host), "{line}");
    }
}

#[test]
fn cancel_of_a_sleep_job_reports_cancelled() {
    if !slurm_up("slurm cancel") {
        return;
    }
    let env = Env::new();
    let out = env.run(&["run", "-s", "slurm", "utils.sh", "--", "sleep", "300"]);
    let handle = stdout(&out).trim().to_string();
    env.wait_state(&handle, "RUNNING", Duration::from_secs(30));
    assert_eq!(env.run(&["cancel", &handle]).status.code(), Some(0));
    env.wait_state(&handle, "CANCELLED", Duration::from_secs(30));
}

#[test]
fn max_retries_requeues_a_failing_job() {
    if !slurm_up("slurm retries") {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: retry\nroles:\n- name: r\n  image: /tmp\n  entrypoint: sh\n  max_retries: 2\n  \
         args: ['-c', 'echo attempt ${SLURM_RESTART_COUNT:-0} >> attempts; exit 5']\n",
    )
    .unwrap();
    let (handle, code, _) = run_wait(&env, &["./app.yaml"]);
    assert_eq!(code, 1);
    let s = env.status(&handle);
    assert_eq!(
        (s["state"].as_str(), s["num_restarts"].as_i64()),
        (Some("FAILED"), Some(2))
    );
    let attempts = std::fs::read_to_string(env.cwd.join("attempts")).unwrap();
    assert_eq!(attempts, "attempt 0\nattempt 1\nattempt 2\n");
}

#[test]
fn workspace_is_copied_into_job_dir_and_the_job_sees_it() {
    if !slurm_up("slurm workspace") {
        return;
    }
    let env = Env::new();
    let ws = env.cwd.join("project");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("data.txt"), "from the workspace\n").unwrap();
    std::fs::write(ws.join("secret.log"), "ignored\n").unwrap();
    std::fs::write(ws.join(".torchxignore"), "*.log\n").unwrap();
    let job_dir = env.cwd.join("job");
    let cfg = format!("job_dir={}", job_dir.display());
    let (handle, code, err) = run_wait(
        &env,
        &[
            "--workspace",
            ws.to_str().unwrap(),
            "-cfg",
            &cfg,
            "utils.sh",
            "--",
            "sh",
            "-c",
            "cat data.txt; ls",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // The script carries the job's environment: its owner's alone.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(job_dir.join("torchx-sbatch.sh"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let out = env
        .cmd(&["log", &handle, "--streams", "stdout"])
        .current_dir("/")
        .output()
        .unwrap();
    let log = stdout(&out);
    assert!(log.contains("sh/0 from the workspace"), "{log}");
    assert!(!log.contains("secret.log"), "{log}");
    // TorchX's index of job dirs, next to where it was submitted.
    let index = std::fs::read_to_string(env.cwd.join(".torchxslurmjobdirs")).unwrap();
    assert!(
        index.contains(&format!("= {}", job_dir.display())),
        "{index}"
    );
}

#[tokio::test]
async fn slurm_conforms() {
    if !slurm_up("slurm conformance") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state: PathBuf = tmp.path().to_path_buf();
    let mut registry = Registry::empty();
    registry
        .register("slurm", "slurm", move || {
            let s: Arc<dyn Scheduler> = Arc::new(SlurmScheduler::new(state.clone()));
            Ok(s)
        })
        .unwrap();
    let runner = Runner::new(registry, TorchxConfig::default());
    let mut opts = Conformance::new("/tmp");
    opts.poll = Duration::from_millis(250);
    // Logs land in the submitting directory: use a scratch one.
    std::env::set_current_dir(tmp.path()).unwrap();
    conformance(&runner, "slurm", &opts).await;
}

/// TorchX's defaults on slurm: a `[cli:run] workspace` (here the current directory, as TorchX's
/// own default) with no job_dir runs in place; a workspace elsewhere needs job_dir.
#[test]
fn workspace_without_job_dir_runs_in_place() {
    if !slurm_up("slurm workspace in place") {
        return;
    }
    let env = Env::new();
    std::fs::write(env.cwd.join("data.txt"), "in place\n").unwrap();
    let config = format!("[cli:run]\nworkspace = file://{}\n", env.cwd.display());
    std::fs::write(env.cwd.join(".torchxconfig"), config).unwrap();
    let (handle, code, err) = run_wait(&env, &["utils.sh", "cat", "data.txt"]);
    assert_eq!(code, 0, "{err}");
    let log = stdout(&env.run(&["log", &handle, "--streams", "stdout"]));
    assert!(log.contains("sh/0 in place"), "{log}");
    let elsewhere = env.home.to_str().unwrap();
    let (_, code, err) = run_wait(&env, &["--workspace", elsewhere, "utils.sh", "true"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("set the run option job_dir"), "{err}");
}

/// Counts to `$GOAL`, one a second, resuming from `$TORCHX_CHECKPOINT_DIR/n`; on SIGUSR1 saves
/// the count and exits 75 (a requeue).
const COUNTER: &str = r#"#!/bin/bash
f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'echo $n > "$f"; echo "attempt $TORCHX_ATTEMPT saved $n"; exit 75' USR1
while [ "$TORCHX_ATTEMPT" = 0 ] || [ "$n" -lt "$GOAL" ]; do n=$((n+1)); sleep 1 & wait $!; done
echo "reached $n in attempt $TORCHX_ATTEMPT"
"#;

/// Slurm sends `--signal` "up to 60 seconds earlier than specified" (sbatch(1)): with a
/// two-minute limit and the signal 40 s before it, never in a trainer's first 20 s, before its
/// handler is set. The trainers above count until it in attempt 0 (at least 20), and a later
/// attempt goes on from what attempt 0 saved to a goal of 10: it ends at once.
const LIMIT: &str = "2m";
const SIGNAL: &str = "USR1@40";

/// The log of a job whose attempt 0 saved `n` and whose attempt 1 went on from it.
fn assert_went_on_from_its_save(log: &str) {
    let saved = log
        .lines()
        .find_map(|l| l.split_once("attempt 0 saved ").map(|(_, n)| n.trim()))
        .unwrap_or_else(|| panic!("attempt 0 did not save: {log}"));
    assert!(
        log.contains(&format!("reached {saved} in attempt 1")),
        "{log}"
    );
}

/// An AppDef file running `script` (written next to it) with bash as role `trainer`.
fn recovery_app(env: &Env, name: &str, script: &str, goal: u32, max_retries: u32) -> String {
    std::fs::write(env.cwd.join(format!("{name}.sh")), script).unwrap();
    std::fs::write(
        env.cwd.join(format!("{name}.yaml")),
        format!(
            "name: {name}\nroles:\n- name: trainer\n  image: .\n  entrypoint: bash\n  \
             args: [{name}.sh]\n  env: {{GOAL: '{goal}'}}\n  max_retries: {max_retries}\n"
        ),
    )
    .unwrap();
    format!("./{name}.yaml")
}

/// The hang watch on the real cluster (the batch script runs each replica under it): a quiet
/// job is hung, its processes' stacks are written next to its attempts file and shown by
/// `log --stacks`, the attempt ends `hung` and, as a failure, spends `max_retries`; jobs that
/// touch their heartbeat file or print run to their end. They run side by side.
#[test]
fn a_quiet_job_is_hung_and_one_that_beats_or_prints_is_not() {
    if !slurm_up("slurm hang watch") {
        return;
    }
    let env = Env::new();
    let submit = |name: &str, script: &str, retries: &str| {
        std::fs::write(env.cwd.join(format!("{name}.sh")), script).unwrap();
        let out = env.run(&[
            "run",
            "-s",
            "slurm",
            "--hang_timeout",
            "6s",
            "--max_retries",
            retries,
            "utils.sh",
            "bash",
            &format!("{name}.sh"),
        ]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let quiet = submit("quiet", "echo started\nsleep 300\n", "1");
    let beats = submit(
        "beats",
        "for i in 1 2 3 4 5; do touch \"$TORCHX_HEARTBEAT_FILE\"; sleep 3; done\n",
        "0",
    );
    let prints = submit(
        "prints",
        "for i in 1 2 3 4 5; do echo $i; sleep 3; done\n",
        "0",
    );
    let status = env.wait_state_terminal(&quiet, Duration::from_secs(300));
    assert_eq!(status["state"], "FAILED", "{status}");
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["hung", "hung"], "{status}");
    let msg = status["msg"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("sh/0 hung: no progress (output or heartbeat) for 6s"),
        "{msg}"
    );
    let stacks = stdout(&env.run(&["log", "--stacks", &quiet]));
    assert!(
        stacks.starts_with("--- sh/0 attempt 1 ---\n=== sh/0 pid "),
        "{stacks}"
    );
    assert!(stacks.contains("sleep 300"), "{stacks}");
    let first = stdout(&env.run(&["log", "--stacks", "--attempt", "0", &quiet]));
    assert!(first.starts_with("--- sh/0 attempt 0 ---\n"), "{first}");
    for handle in [&beats, &prints] {
        let status = env.wait_state_terminal(handle, Duration::from_secs(300));
        assert_eq!(status["state"], "SUCCEEDED", "{handle}: {status}");
    }
}

/// The recovery contract on the real cluster (`--time`, `--signal=B:USR1@40`, the script's
/// trap and `scontrol requeue`): the counter is signalled before its two-minute limit, saves,
/// asks for a requeue, and goes on from its save in the next attempt.
#[test]
fn recovery_a_checkpointing_job_outlives_its_time_limits() {
    if !slurm_up("slurm recovery time limit") {
        return;
    }
    let env = Env::new();
    let file = recovery_app(&env, "count", COUNTER, 10, 0);
    let handle = stdout(&env.run(&[
        "run",
        "-s",
        "slurm",
        "--time_limit",
        LIMIT,
        "--checkpoint_signal",
        SIGNAL,
        &file,
    ]))
    .trim()
    .to_string();
    let status = env.wait_state_terminal(&handle, Duration::from_secs(400));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = attempts(&status);
    let (last, earlier) = seen.split_last().unwrap();
    assert_eq!(last, &("succeeded".to_string(), Some(0)), "{seen:?}");
    assert!(!earlier.is_empty(), "one attempt was enough: {seen:?}");
    assert!(
        earlier
            .iter()
            .all(|a| a == &("requeued".to_string(), Some(75))),
        "{seen:?}"
    );
    let log = stdout(&env.run(&["log", &handle, "--streams", "stdout"]));
    assert_went_on_from_its_save(&log);
}

/// A bash trainer under TorchX's shell wrapper (`utils.sh`: `sh -c`, whose `sh` dies of the
/// checkpoint signal) saves, asks for a requeue through TORCHX_REQUEUE_FILE and exits 0: the
/// task waits for it to save, the attempt is a requeue, and the job reaches its goal.
#[test]
fn recovery_a_trainer_under_a_shell_wrapper_requeues_through_the_requeue_file() {
    if !slurm_up("slurm recovery wrapper") {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.cwd.join("work.sh"),
        r#"f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'sleep 1; echo $n > "$f"; echo "attempt $TORCHX_ATTEMPT saved $n"; touch "$TORCHX_REQUEUE_FILE"; exit 0' USR1
while [ "$TORCHX_ATTEMPT" = 0 ] || [ "$n" -lt 10 ]; do n=$((n+1)); sleep 1 & wait $!; done
echo "reached $n in attempt $TORCHX_ATTEMPT"
"#,
    )
    .unwrap();
    let handle = stdout(&env.run(&[
        "run",
        "-s",
        "slurm",
        "--time_limit",
        LIMIT,
        "--checkpoint_signal",
        SIGNAL,
        "utils.sh",
        "bash",
        "work.sh",
    ]))
    .trim()
    .to_string();
    let status = env.wait_state_terminal(&handle, Duration::from_secs(400));
    support::assert_requeued_then_succeeded(&status);
    let log = stdout(&env.run(&["log", &handle, "--streams", "stdout"]));
    assert_went_on_from_its_save(&log);
}

/// Without recovery options a step killed from outside (`scancel --signal=KILL`, as the
/// out-of-memory killer would) fails the job with `max_retries` 0, and spends one retry with
/// `max_retries` 1, as TorchX's script does.
#[test]
fn a_killed_step_is_a_failure_that_spends_a_retry() {
    if !slurm_up("slurm killed step") {
        return;
    }
    let env = Env::new();
    // Kills the step of attempt `attempt` until the job moves on (ends, or is requeued): a
    // step listed just after a requeue may still be the old attempt's.
    let kill_step = |handle: &str, attempt: u32| {
        let id = handle.rsplit('/').next().unwrap().to_string();
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let status = env.status(handle);
            let restarts = status["num_restarts"].as_u64().unwrap_or(0);
            let terminal = ["FAILED", "SUCCEEDED", "CANCELLED"]
                .contains(&status["state"].as_str().unwrap_or(""));
            if terminal || restarts > u64::from(attempt) {
                return;
            }
            let steps = std::process::Command::new("squeue")
                .args(["-h", "-s", "-j", &id, "-o", "%i"])
                .output()
                .unwrap();
            let steps = String::from_utf8_lossy(&steps.stdout).to_string();
            let running = steps.lines().any(|l| l.trim() == format!("{id}.0"));
            if running && restarts == u64::from(attempt) {
                let _ = std::process::Command::new("scancel")
                    .args(["--signal=KILL", &format!("{id}.0")])
                    .status();
                std::thread::sleep(Duration::from_secs(2));
            }
            assert!(
                std::time::Instant::now() < deadline,
                "attempt {attempt} of {id} never moved on: {steps} {status}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    for retries in [0u32, 1] {
        let out = env.run(&[
            "run",
            "-s",
            "slurm",
            "--max_retries",
            &retries.to_string(),
            "utils.sh",
            "sleep",
            "300",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let handle = stdout(&out).trim().to_string();
        for attempt in 0..=retries {
            kill_step(&handle, attempt);
        }
        let status = env.wait_state_terminal(&handle, Duration::from_secs(120));
        assert_eq!(status["state"], "FAILED", "{status}");
        assert_eq!(status["num_restarts"], retries, "{status}");
    }
}

/// A Python trainer: on SIGUSR1 it saves its step and asks for a requeue through
/// TORCHX_REQUEUE_FILE (then exits 0, which alone would be a success).
const PY_TRAINER: &str = r#"import os, pathlib, signal, sys, time
f = pathlib.Path(os.environ["TORCHX_CHECKPOINT_DIR"]) / "n"
n = int(f.read_text()) if f.exists() else 0
def save(*_):
    f.write_text(str(n))
    print(f"attempt {os.environ['TORCHX_ATTEMPT']} saved {n}", flush=True)
    pathlib.Path(os.environ["TORCHX_REQUEUE_FILE"]).touch()
    sys.exit(0)
signal.signal(signal.SIGUSR1, save)
while os.environ["TORCHX_ATTEMPT"] == "0" or n < 10:
    n += 1
    time.sleep(1)
print(f"reached {n} in attempt {os.environ['TORCHX_ATTEMPT']}", flush=True)
"#;

/// `utils.python` with a Python signal handler, on the real cluster: the trainer saves before
/// its two-minute limit, asks for a requeue, and goes on from its save in the next attempt.
#[test]
fn recovery_utils_python_requeues_through_the_requeue_file() {
    if !slurm_up("slurm recovery utils.python") {
        return;
    }
    let env = Env::new();
    std::fs::write(env.cwd.join("train.py"), PY_TRAINER).unwrap();
    let handle = stdout(&env.run(&[
        "run",
        "-s",
        "slurm",
        "--time_limit",
        LIMIT,
        "--checkpoint_signal",
        SIGNAL,
        "utils.python",
        "--script",
        "train.py",
    ]))
    .trim()
    .to_string();
    let status = env.wait_state_terminal(&handle, Duration::from_secs(400));
    support::assert_requeued_then_succeeded(&status);
    let log = stdout(&env.run(&["log", &handle, "--streams", "stdout"]));
    assert_went_on_from_its_save(&log);
}

/// `dist.ddp -j 1x2` with real PyTorch on the real cluster under a three-minute limit: the
/// checkpoint signal reaches the workers (through torchrun where it passes it on, from Slurm
/// otherwise), they save, ask for a requeue through TORCHX_REQUEUE_FILE, and the job reaches
/// its final step in the second attempt, once per rank, and is not run a third time.
#[test]
fn recovery_ddp_with_real_torchrun_requeues() {
    if !slurm_up("slurm recovery dist.ddp") {
        return;
    }
    let Some(path) = support::torch_path("slurm recovery dist.ddp") else {
        return;
    };
    let env = Env::new();
    std::fs::write(
        env.cwd.join("train.py"),
        r#"import os, pathlib, signal, time
# The handler first: the signal may come while torch imports on a loaded machine.
stop = False
def on_signal(*_):
    global stop
    stop = True
signal.signal(signal.SIGUSR1, on_signal)
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
ckpt = pathlib.Path(os.environ["TORCHX_CHECKPOINT_DIR"]) / "step"
step = int(ckpt.read_text()) if ckpt.exists() else 0
while step < 150:
    flag = torch.tensor([1.0 if stop else 0.0])
    dist.all_reduce(flag)
    if flag.item() > 0:
        if rank == 0:
            ckpt.write_text(str(step))
            pathlib.Path(os.environ["TORCHX_REQUEUE_FILE"]).touch()
        dist.barrier()
        dist.destroy_process_group()
        raise SystemExit(0)
    step += 1
    time.sleep(1)
with open("reached", "a") as f:
    f.write(f"rank {rank} step {step} attempt {os.environ['TORCHX_ATTEMPT']}\n")
dist.destroy_process_group()
"#,
    )
    .unwrap();
    let out = env
        .cmd(&[
            "run",
            "-s",
            "slurm",
            // Slurm may signal up to a minute early, and a signal that comes before the
            // workers joined torchrun's store fails the attempt (torchrun, which hosts the
            // store, dies of it): the earliest signal comes a minute after the start, long
            // after torch started even on a loaded machine.
            "--time_limit",
            "3m",
            "--checkpoint_signal",
            "USR1@60",
            "dist.ddp",
            "-j",
            "1x2",
            "--script",
            "train.py",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.wait_state_terminal(&handle, Duration::from_secs(900));
    support::assert_requeued_then_succeeded(&status);
    // Exactly two attempts: the final one is never run again, even though the checkpoint
    // signal may reach torchrun as it shuts down.
    assert_eq!(support::attempts(&status).len(), 2, "{status}");
    let reached = std::fs::read_to_string(env.cwd.join("reached")).unwrap();
    let mut lines: Vec<&str> = reached.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["rank 0 step 150 attempt 1", "rank 1 step 150 attempt 1"],
        "each rank's final step once"
    );
}

/// `--after` on Slurm is Slurm's own `--dependency` (with `--kill-on-invalid-dep=yes`): the
/// controller holds the job, `status` says what it waits for, a dependent of a failed job ends
/// CANCELLED without running, and a `notok` one runs.
#[test]
fn after_is_a_native_dependency() {
    if !slurm_up("slurm --after") {
        return;
    }
    let env = Env::new();
    let run = |args: &[&str]| {
        let mut full = vec!["run", "-s", "slurm"];
        full.extend_from_slice(args);
        let out = env.run(&full);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let failing = run(&["utils.sh", "sh", "-c", "sleep 5; exit 3"]);
    let ok = run(&["--after", &failing, "utils.sh", "echo", "ok"]);
    let notok = run(&[
        "--after",
        &format!("{failing}:notok"),
        "utils.sh",
        "echo",
        "notok",
    ]);
    let job = |h: &str| h.rsplit('/').next().unwrap().to_string();
    let shown = std::process::Command::new("scontrol")
        .args(["show", "job", &job(&ok)])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!("Dependency=afterok:{}", job(&failing))),
        "{shown}"
    );
    let waiting = env.status(&ok);
    assert_eq!(waiting["state"], "PENDING", "{waiting}");
    assert!(
        waiting["msg"]
            .as_str()
            .unwrap()
            .contains("waiting for its dependencies"),
        "{waiting}"
    );
    let status = env.wait_state_terminal(&ok, Duration::from_secs(120));
    assert_eq!(status["state"], "CANCELLED", "{status}");
    assert!(
        status["msg"]
            .as_str()
            .unwrap()
            .contains("can never be satisfied"),
        "{status}"
    );
    let status = env.wait_state_terminal(&notok, Duration::from_secs(120));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
}

/// Pre-flight on the real cluster: a job whose script is not there is refused before
/// anything is queued (nothing in squeue), not after its wait in the queue.
#[test]
fn a_missing_script_is_refused_before_it_is_queued() {
    if !slurm_up("slurm pre-flight") {
        return;
    }
    let env = Env::new();
    // The job would be named after its script's role: `tain-0`.
    let queued = || {
        let out = std::process::Command::new("squeue")
            .args(["-h", "--me", "-n", "tain-0", "-o", "%i"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let out = env.run(&[
        "run", "-s", "slurm", "dist.ddp", "-j", "1x2", "--script", "tain.py",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("script `tain.py` does not exist"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("on slurm"), "{}", stderr(&out));
    assert_eq!(queued(), 0, "nothing was queued");
}

/// `scontrol requeue` of a running job is a preemption: the job starts again although its
/// retry budget is 0, and ends SUCCEEDED.
#[test]
fn recovery_scontrol_requeue_is_a_preemption_not_a_failure() {
    if !slurm_up("slurm recovery preemption") {
        return;
    }
    let env = Env::new();
    let script = "#!/bin/bash\nif [ \"$TORCHX_ATTEMPT\" -ge 1 ]; then echo back; exit 0; fi\n\
                  sleep 300 & wait $!\n";
    let file = recovery_app(&env, "preempt", script, 0, 0);
    let handle = stdout(&env.run(&["run", "-s", "slurm", "--max_requeues", "3", &file]))
        .trim()
        .to_string();
    env.wait_state(&handle, "RUNNING", Duration::from_secs(60));
    let attempts_file = env
        .cwd
        .join(format!("torchx-{}/attempts", support::app_id(&handle)));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&attempts_file).is_ok_and(|t| t.starts_with("start 0")) {
        assert!(
            std::time::Instant::now() < deadline,
            "attempt 0 never started"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let ok = Command::new("scontrol")
        .args(["requeue", support::app_id(&handle)])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let status = env.wait_state_terminal(&handle, Duration::from_secs(120));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = attempts(&status);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "preempted", "{seen:?}");
    assert_eq!(seen[1], ("succeeded".to_string(), Some(0)), "{seen:?}");
}

/// Each budget ends a job that never stops: failures after `--max_retries`, requeue requests
/// after `--max_requeues`, and an attempt that ignores the signal times out (a failure).
#[test]
fn recovery_budgets_and_timeouts_end_jobs() {
    if !slurm_up("slurm recovery budgets") {
        return;
    }
    let env = Env::new();
    let fails = recovery_app(&env, "fails", "#!/bin/bash\nexit 3\n", 0, 1);
    let asks = recovery_app(&env, "asks", "#!/bin/bash\nexit 75\n", 0, 0);
    let ignores = recovery_app(
        &env,
        "ignores",
        "#!/bin/bash\ntrap '' USR1\nsleep 300 & wait $!\n",
        0,
        0,
    );
    let submit = |args: &[&str]| {
        let mut full = vec!["run", "-s", "slurm"];
        full.extend_from_slice(args);
        stdout(&env.run(&full)).trim().to_string()
    };
    let fails = submit(&["--max_requeues", "5", &fails]);
    let asks = submit(&["--max_requeues", "2", &asks]);
    let ignores = submit(&[
        "--time_limit",
        LIMIT,
        "--checkpoint_signal",
        "USR1@20",
        &ignores,
    ]);
    let failed = |handle: &str| {
        let status = env.wait_state_terminal(handle, Duration::from_secs(300));
        assert_eq!(status["state"], "FAILED", "{status}");
        attempts(&status)
    };
    let f = |reason: &str, code: Option<i64>| (reason.to_string(), code);
    assert_eq!(failed(&fails), [f("failed", Some(3)), f("failed", Some(3))]);
    assert_eq!(
        failed(&asks),
        [
            f("requeued", Some(75)),
            f("requeued", Some(75)),
            f("requeued", Some(75))
        ]
    );
    let seen = failed(&ignores);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, "timeout", "{seen:?}");
}

/// A heterogeneous job (two roles, three replicas) is requeued as one: every replica's
/// attempt 0 asks for it, attempt 1 succeeds, and all share the checkpoint directory. The
/// replicas of attempt 0 wait for each other, then exit together: srun stops the slower ones
/// and may return their signal, and the job is requeued all the same.
#[test]
fn recovery_a_heterogeneous_job_requeues_as_one() {
    if !slurm_up("slurm recovery hetjob") {
        return;
    }
    let env = Env::new();
    let role = |name: &str, replicas: u32| {
        format!(
            "- name: {name}\n  image: .\n  entrypoint: bash\n  num_replicas: {replicas}\n  \
             args: ['-c', 'd=$TORCHX_CHECKPOINT_DIR; echo {name} $TORCHX_ATTEMPT >> $d/seen; \
             [ $TORCHX_ATTEMPT -ge 1 ] && exit 0; \
             until [ $(grep -c \" 0$\" $d/seen) -ge 3 ]; do sleep 0.1; done; exit 75']\n"
        )
    };
    std::fs::write(
        env.cwd.join("het.yaml"),
        format!("name: het\nroles:\n{}{}", role("a", 2), role("b", 1)),
    )
    .unwrap();
    let handle = stdout(&env.run(&["run", "-s", "slurm", "--max_requeues", "2", "./het.yaml"]))
        .trim()
        .to_string();
    let status = env.wait_state_terminal(&handle, Duration::from_secs(180));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    for role in status["roles"].as_array().unwrap() {
        for replica in role["replicas"].as_array().unwrap() {
            let reasons: Vec<&str> = replica["attempts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["reason"].as_str().unwrap_or("running"))
                .collect();
            assert_eq!(reasons, ["requeued", "succeeded"], "{status}");
        }
    }
    let id = support::app_id(&handle);
    let seen =
        std::fs::read_to_string(env.cwd.join(format!("torchx-{id}/checkpoint/seen"))).unwrap();
    let mut lines: Vec<&str> = seen.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["a 0", "a 0", "a 1", "a 1", "b 0", "b 1"], "{seen}");
}

/// The array job id of a native group (its `native_array` handle's app id).
fn native_array_id(status: &serde_json::Value) -> String {
    let native = status["native_array"].as_str().expect("a native array");
    native.rsplit('/').next().unwrap().to_string()
}

#[test]
fn groups_an_array_is_one_sbatch_and_its_cap_holds_in_squeue() {
    if !slurm_up("slurm array") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "slurm",
        "--array",
        "0-5%2",
        "utils.sh",
        "sh",
        "-c",
        "sleep 3; echo task ${array_index} is $TORCHX_ARRAY_INDEX of $TORCHX_ARRAY_SIZE",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    let array = native_array_id(&status);
    let tasks = status["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 6);
    for (i, t) in tasks.iter().enumerate() {
        assert_eq!(t["handle"], format!("slurm://torchx/{array}_{i}"), "{t}");
    }
    // Sample squeue until the array is done: never more than 2 of its tasks running.
    let (mut most, mut samples) = (0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let out = Command::new("squeue")
            .args(["--me", "--array", "--noheader", "-o", "%i %T", "-j", &array])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let running = text.lines().filter(|l| l.ends_with(" RUNNING")).count();
        most = most.max(running);
        samples += 1;
        if text.trim().is_empty() || !out.status.success() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still queued: {text}");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(most <= 2, "{most} tasks ran at once under %2");
    assert!(
        most >= 1 && samples > 3,
        "sampled {samples} times, saw {most} running"
    );
    let status = env.wait_state_terminal(&handle, Duration::from_secs(60));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    assert_eq!(status["counts"]["SUCCEEDED"], 6, "{status}");
    // The group's status costs two Slurm calls (one squeue, one sacct), whatever its size.
    let shims = env.cwd.join("shims");
    std::fs::create_dir(&shims).unwrap();
    let calls = env.cwd.join("calls");
    for tool in ["squeue", "sacct", "scontrol", "sinfo", "sbatch"] {
        let real =
            String::from_utf8(Command::new("which").arg(tool).output().unwrap().stdout).unwrap();
        let shim = shims.join(tool);
        std::fs::write(
            &shim,
            format!(
                "#!/bin/sh\necho {tool} >> '{}'\nexec '{}' \"$@\"\n",
                calls.display(),
                real.trim()
            ),
        )
        .unwrap();
        let mut perms = std::fs::metadata(&shim).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&shim, perms).unwrap();
    }
    let path = format!("{}:{}", shims.display(), std::env::var("PATH").unwrap());
    let out = env
        .cmd(&["status", "--json", &handle])
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let made = std::fs::read_to_string(&calls).unwrap();
    assert!(made.lines().count() <= 2, "{made}");
    // Each task's log, by its own handle and in the group's log.
    let log = stdout(&env.run(&[
        "log",
        "--streams",
        "stdout",
        &format!("slurm://torchx/{array}_4"),
    ]));
    assert_eq!(log.trim(), "sh/0 task 4 is 4 of 6", "{log}");
    let log = stdout(&env.run(&["log", "--streams", "stdout", &handle]));
    assert!(log.contains("5:sh/0 task 5 is 5 of 6"), "{log}");
    // One row in list.
    let list = stdout(&env.run(&["list", "-s", "slurm", "--json"]));
    assert!(list.contains(&handle), "{list}");
    assert!(!list.contains(&format!("{array}_")), "{list}");
}

#[test]
fn groups_a_sweeps_failed_points_are_counted_and_rerun_exactly() {
    if !slurm_up("slurm sweep rerun") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "slurm",
        "--wait",
        "--sweep",
        "x=0,1,2,3",
        "utils.sh",
        "sh",
        "-c",
        "echo x=${sweep.x}; [ ${sweep.x} != 1 ] && [ ${sweep.x} != 3 ]",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(status["counts"]["FAILED"], 2, "{status}");
    assert_eq!(status["counts"]["SUCCEEDED"], 2, "{status}");
    native_array_id(&status);
    let out = env.run(&["rerun", &handle, "--failed", "--wait"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "they fail again: {}",
        stderr(&out)
    );
    let rerun = stdout(&out).trim().to_string();
    let status = env.status(&rerun);
    assert_eq!(status["parent"], handle.as_str(), "{status}");
    let array = native_array_id(&status);
    let tasks = status["tasks"].as_array().unwrap();
    let points: Vec<(i64, &str)> = tasks
        .iter()
        .map(|t| {
            (
                t["index"].as_i64().unwrap(),
                t["params"]["x"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(points, [(1, "1"), (3, "3")], "{status}");
    assert_eq!(tasks[1]["handle"], format!("slurm://torchx/{array}_3"));
    let log = stdout(&env.run(&["log", "--streams", "stdout", &rerun]));
    assert_eq!(log, "1:sh/0 x=1\n3:sh/0 x=3\n", "{log}");
}

/// `script` as a 2-task array on slurm under recovery (2 requeues, 120 s attempts), waited for;
/// the group's status, and each task's status with why each of its attempts ended.
fn recovering_array(
    env: &Env,
    script: &str,
) -> (serde_json::Value, Vec<(serde_json::Value, Vec<String>)>) {
    let out = env.run(&[
        "run",
        "-s",
        "slurm",
        "--wait",
        "--array",
        "2",
        "--max_requeues",
        "2",
        "--time_limit",
        "120",
        "utils.sh",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = env.status(stdout(&out).trim());
    let tasks = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = env.status(t["handle"].as_str().unwrap());
            let reasons = attempts(&s).into_iter().map(|(r, _)| r).collect();
            (s, reasons)
        })
        .collect();
    (status, tasks)
}

/// The array task that kept the array's job id asks for a requeue while its sibling runs:
/// only that task is requeued (a bare `scontrol requeue <array id>` would requeue, and so
/// SIGTERM, every task of the array).
#[test]
fn groups_a_requeued_array_task_leaves_its_siblings_alone() {
    if !slurm_up("slurm array task requeue") {
        return;
    }
    let env = Env::new();
    let script = "d=$TORCHX_CHECKPOINT_DIR; \
                  if [ \"$SLURM_JOB_ID\" = \"$SLURM_ARRAY_JOB_ID\" ] && [ ! -e $d/once ]; then \
                  touch $d/once; exit 75; fi; sleep 6; echo done ${array_index}";
    let (status, tasks) = recovering_array(&env, script);
    let mut seen: Vec<Vec<String>> = tasks
        .into_iter()
        .map(|(s, reasons)| {
            assert_eq!(s["state"], "SUCCEEDED", "{s}");
            reasons
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [vec!["requeued", "succeeded"], vec!["succeeded"]],
        "{status}"
    );
}

#[test]
fn groups_an_array_with_recovery_keeps_each_tasks_attempts() {
    if !slurm_up("slurm array recovery") {
        return;
    }
    let env = Env::new();
    // Each task asks to be requeued once (exit 75), then succeeds.
    let script = "d=$TORCHX_CHECKPOINT_DIR; if [ -e $d/once ]; then echo done ${array_index}; \
                  else touch $d/once; exit 75; fi";
    let (status, tasks) = recovering_array(&env, script);
    native_array_id(&status);
    for (s, reasons) in tasks {
        assert_eq!(reasons, ["requeued", "succeeded"], "{s}");
    }
}
