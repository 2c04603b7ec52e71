//! The hang watchdog on local_cwd, with real processes: a replica with no progress (no line on
//! stdout or stderr, no touch of `TORCHX_HEARTBEAT_FILE`) for `--hang_timeout` is hung: the
//! stacks of its processes are captured (`torchx log --stacks`), it is stopped and nothing of it
//! is left; the attempt ends `hung`, a failure that spends `max_retries`, or, under the recovery
//! options, a requeue after the checkpoint signal. A job that prints or touches its heartbeat
//! runs to its end. Schedulers that cannot watch refuse the option.

mod support;

use std::time::{Duration, Instant};

use support::{assert_no_processes, attempts, stderr, stdout, Env};

/// [`support::bash_app`] without extra environment.
fn app(env: &Env, name: &str, script: &str) -> String {
    support::bash_app(env, name, script, "")
}

/// Prints a line, then waits in a child forever: hung.
const HANGS: &str = "echo started\nsleep 300 & wait $!\n";

#[test]
fn a_hung_replica_is_stopped_with_its_stacks_and_fails() {
    let env = Env::new();
    let file = app(&env, "hang", HANGS);
    let started = Instant::now();
    let out = env.run(&["run", "--hang_timeout", "2s", &file]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(took < Duration::from_secs(15), "{took:?}");
    let handle = stdout(&out).trim().to_string();
    assert_no_processes(&handle);
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(attempts(&status)[0].0, "hung", "{status}");
    let msg = status["msg"].as_str().unwrap();
    assert!(
        msg.contains("trainer/0 hung: no progress (output or heartbeat) for 2s"),
        "{msg}"
    );
    // One block per process: the bash script and its sleep, headed by replica and pid.
    let stacks = stdout(&env.run(&["log", "--stacks", &handle]));
    assert!(
        stacks.starts_with("--- trainer/0 attempt 0 ---\n"),
        "{stacks}"
    );
    assert!(stacks.contains("=== trainer/0 pid "), "{stacks}");
    assert!(stacks.contains("sleep 300"), "{stacks}");
    assert!(stacks.contains("State:"), "{stacks}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&env.run(&["log", "--stacks", "--json", &handle]))).unwrap();
    assert_eq!(json[0]["role"], "trainer", "{json}");
    assert_eq!(json[0]["attempt"], 0, "{json}");
    // A hang spends max_retries like any failure.
    let out = env.run(&["run", "--hang_timeout", "1s", "--max_retries", "1", &file]);
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["hung", "hung"], "{status}");
}

/// Quiet jobs that show progress otherwise: a line every second, or a heartbeat touch every
/// second, under a 2 s timeout, run to their end.
#[test]
fn output_or_a_heartbeat_keeps_a_job_alive() {
    let env = Env::new();
    for (name, step) in [
        ("prints", "echo step $i"),
        ("beats", "touch \"$TORCHX_HEARTBEAT_FILE\""),
    ] {
        let script = format!("for i in 1 2 3 4 5; do {step}; sleep 1; done\necho done >&2\n");
        let file = app(&env, name, &script);
        let out = env.run(&["run", "--hang_timeout", "2s", &file]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let status = env.status(stdout(&out).trim());
        assert_eq!(status["state"], "SUCCEEDED", "{name}: {status}");
    }
}

/// Under the recovery options a hung attempt gets the checkpoint signal first, saves, and is
/// requeued (spending max_requeues): the next attempt resumes from the checkpoint.
#[test]
fn a_hung_attempt_is_requeued_from_its_checkpoint_under_recovery() {
    let env = Env::new();
    let script = r#"f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'echo $n > "$f"; echo "attempt $TORCHX_ATTEMPT saved $n"; exit 75' USR1
echo "attempt $TORCHX_ATTEMPT from $n"
if [ "$TORCHX_ATTEMPT" = 0 ]; then n=7; sleep 300 & wait $!; fi
echo "attempt $TORCHX_ATTEMPT resumed at $n"
"#;
    let file = app(&env, "resume", script);
    let out = env.run(&["run", "--hang_timeout", "2s", "--max_requeues", "1", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["hung", "succeeded"], "{status}");
    let log = stdout(&env.run(&["log", &handle]));
    assert!(log.contains("attempt 0 saved 7"), "{log}");
    assert!(log.contains("attempt 1 resumed at 7"), "{log}");
    // With no requeue left, the hang fails the job.
    let out = env.run(&["run", "--hang_timeout", "1s", "--max_requeues", "0", &file]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn bad_hang_timeouts_and_schedulers_that_cannot_watch_are_refused() {
    let env = Env::new();
    for (value, says) in [
        ("0", "a hang timeout must be more than 0"),
        ("soon", "`soon` is not a duration"),
    ] {
        let out = env.run(&["run", "--dryrun", "--hang_timeout", value, "utils.echo"]);
        assert_eq!(out.status.code(), Some(2), "{value}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{value}: {}", stderr(&out));
    }
    let out = env.run(&[
        "run",
        "--dryrun",
        "-s",
        "lsf",
        "--hang_timeout",
        "5m",
        "utils.echo",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("hang_timeout (set on role `echo`): it cannot watch its replicas"),
        "{}",
        stderr(&out)
    );
    // The dry run shows the heartbeat file each replica gets.
    let out = env.run(&["run", "--dryrun", "--hang_timeout", "5m", "utils.echo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("TORCHX_HEARTBEAT_FILE"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("\"hang_timeout\": 300"),
        "{}",
        stdout(&out)
    );
}

/// A stand-in for `py-spy` that records its pid in `pids` and then never answers: the
/// watchdog's dumper, to be killed mid-dump.
fn stuck_dumper(env: &Env) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let pids = env.cwd.join("dumper.pids");
    let dumper = env.cwd.join("py-spy");
    std::fs::write(
        &dumper,
        format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec sleep 20\n",
            pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&dumper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dumper, pids)
}

fn pids_in(file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// Faults in the watchdog: its stack dumper killed mid-dump leaves the hang handled (each
/// process then described from /proc); its supervisor killed mid-dump leaves nothing running,
/// and `status` says the job is no longer watched.
#[test]
fn the_watchdog_killed_mid_dump() {
    let env = Env::new();
    let file = app(&env, "hang", HANGS);
    let (dumper, pids) = stuck_dumper(&env);
    let mut run = env
        .cmd(&["run", "--hang_timeout", "1s", &file])
        .env("TORCHX_PY_SPY", &dumper)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut killed = Vec::new();
    while run.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the hang was never handled");
        for pid in pids_in(&pids) {
            if !killed.contains(&pid) {
                kill(pid);
                killed.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!killed.is_empty(), "the dumper never ran");
    let handle = stdout(&out).trim().to_string();
    assert_no_processes(&handle);
    assert_eq!(attempts(&env.status(&handle))[0].0, "hung");
    let stacks = stdout(&env.run(&["log", "--stacks", &handle]));
    assert!(
        stacks.contains("(proc)") && stacks.contains("sleep 300"),
        "{stacks}"
    );

    // The supervisor itself killed while it dumps: its guard kills the replica, and the
    // status says the supervisor died.
    let _ = std::fs::remove_file(&pids);
    let handle = {
        let out = env
            .cmd(&["run", "--detach", "--hang_timeout", "1s", &file])
            .env("TORCHX_PY_SPY", &dumper)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while pids_in(&pids).is_empty() {
        assert!(Instant::now() < deadline, "the dumper never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    kill(supervisor);
    for pid in pids_in(&pids) {
        kill(pid);
    }
    let status = env.wait_state(&handle, "FAILED", Duration::from_secs(60));
    let msg = status["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("supervisor (pid {supervisor}) died")),
        "{msg}"
    );
    assert_no_processes(&handle);
}

/// Without py-spy (`TORCHX_PY_SPY` names none), a hung Python replica's threads are dumped by
/// faulthandler, which the attempt arms (`PYTHONFAULTHANDLER`): the watchdog sends SIGABRT
/// when the hang is a failure, the stacks file says where the dump went, and the replica's
/// stderr holds it.
#[test]
fn without_py_spy_faulthandler_dumps_a_hung_python_replica() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join("stall.py"),
        "import time\ndef stall():\n    time.sleep(300)\nprint('started', flush=True)\nstall()\n",
    )
    .unwrap();
    let python = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
        .expect("a python3 on PATH");
    std::fs::write(
        env.cwd.join("stall.yaml"),
        format!(
            "name: stall\nroles:\n- name: trainer\n  image: .\n  entrypoint: {}\n  args: [stall.py]\n",
            python.display()
        ),
    )
    .unwrap();
    let out = env
        .cmd(&["run", "--hang_timeout", "2s", "./stall.yaml"])
        .env("TORCHX_PY_SPY", env.cwd.join("no-py-spy"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let stacks = stdout(&env.run(&["log", "--stacks", &handle]));
    assert!(stacks.contains("faulthandler"), "{stacks}");
    let log = stdout(&env.run(&["log", "--streams", "stderr", &handle]));
    assert!(log.contains("Fatal Python error: Aborted"), "{log}");
    assert!(log.contains("in stall"), "{log}");
    assert_no_processes(&handle);
}
