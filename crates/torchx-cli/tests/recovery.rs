//! The recovery contract on local_cwd, with real processes: a job that checkpoints when
//! signalled before its time limit and asks for a requeue reaches its goal over attempts;
//! preemptions and requeues do not spend the retry budget; failures do; both budgets end a job
//! that never stops asking; a time limit without a requeue is a failure; bad input is refused.

mod support;

use std::time::{Duration, Instant};

use support::{assert_no_processes, attempts, bash_app as app, stderr, stdout, Env};

/// Counts to `$GOAL`, 0.1 s a step, resuming from `$TORCHX_CHECKPOINT_DIR/n`; on SIGUSR1 saves
/// the count and exits 75 (a requeue). `exec sleep` keeps the counter in this shell only.
const COUNTER: &str = r#"#!/bin/bash
f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'echo $n > "$f"; echo "attempt $TORCHX_ATTEMPT saved $n"; exit 75' USR1
while [ "$n" -lt "$GOAL" ]; do n=$((n+1)); sleep 0.1 & wait $!; done
echo "reached $n in attempt $TORCHX_ATTEMPT of max_retries $TORCHX_MAX_RETRIES"
"#;

/// Asks for a requeue in its first attempt, then sleeps in the next: the job is mid-requeue.
const REQUEUES_ONCE_THEN_SLEEPS: &str = r#"#!/bin/bash
echo "attempt $TORCHX_ATTEMPT pid $$"
if [ "$TORCHX_ATTEMPT" = 0 ]; then exit 75; fi
sleep 300 & wait $!
"#;

/// The counter needs about three attempts of 1.5 s (signalled 0.5 s before the limit).
#[test]
fn a_checkpointing_job_reaches_its_goal_over_attempts() {
    let env = Env::new();
    let file = app(&env, "count", COUNTER, "GOAL: '25'");
    let out = env.run(&[
        "run",
        "--time_limit",
        "2s",
        "--checkpoint_signal",
        "USR1@1",
        "--max_retries",
        "0",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(
        stderr(&out).contains("reached 25 in attempt"),
        "{}",
        stderr(&out)
    );
    let status = env.status(&handle);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = attempts(&status);
    assert!(seen.len() >= 2, "{seen:?}");
    let (last, earlier) = seen.split_last().unwrap();
    assert_eq!(last, &("succeeded".to_string(), Some(0)));
    assert!(
        earlier
            .iter()
            .all(|a| a == &("requeued".to_string(), Some(75))),
        "{seen:?}"
    );
    // The text shows them too, and `log` has every attempt's lines.
    let text = stdout(&env.run(&["status", &handle]));
    assert!(
        text.contains("attempt 0: requeued (exit code 75)"),
        "{text}"
    );
    let log = stdout(&env.run(&["log", &handle]));
    assert!(log.contains("attempt 0 saved"), "{log}");
    assert!(log.contains("reached 25"), "{log}");
}

/// Under the recovery contract a replica killed from outside by SIGTERM (a preemption notice)
/// is started again without spending `max_retries`; a bare SIGKILL (what the out-of-memory
/// killer sends) is a failure, which spends it.
#[test]
fn preemptions_do_not_spend_the_retry_budget_and_a_bare_sigkill_does() {
    let env = Env::new();
    let script = r#"#!/bin/bash
if [ "$TORCHX_ATTEMPT" -ge 2 ]; then echo "survived to attempt $TORCHX_ATTEMPT"; exit 0; fi
echo "attempt $TORCHX_ATTEMPT pid $$"
sleep 300 & wait $!
"#;
    let file = app(&env, "preempt", script, "");
    let handle = env.detach(&["--max_requeues", "5", "--max_retries", "1", &file]);
    for (attempt, signal) in [(0, "-TERM"), (1, "-KILL")] {
        let pid = wait_for_attempt(&env, &handle, attempt);
        kill(signal, &format!("-{pid}"));
    }
    let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["preempted", "failed", "succeeded"]);
    assert_eq!(status["num_restarts"], 2);
    assert_no_processes(&handle);
}

fn kill(signal: &str, target: &str) {
    let ok = std::process::Command::new("kill")
        .args([signal, "--", target])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal} {target}");
}

/// A job with no recovery option ends as TorchX's: a replica killed from outside (SIGKILL as
/// the out-of-memory killer sends, or SIGTERM) and the requeue code are failures that spend
/// `max_retries`, and its replicas get TorchX's environment, none of the contract's variables.
#[test]
fn without_recovery_options_a_killed_replica_is_a_failure() {
    let env = Env::new();
    let script = r#"#!/bin/bash
env | grep -E '^TORCHX_(ATTEMPT|MAX_RETRIES|CHECKPOINT_DIR|REQUEUE_FILE)=' && exit 9
echo "attempt pid $$"
sleep 300 & wait $!
"#;
    let file = app(&env, "plain", script, "");
    for (signal, retries) in [("-KILL", 0), ("-TERM", 0), ("-KILL", 1)] {
        let handle = env.detach(&["--max_retries", &retries.to_string(), &file]);
        for attempt in 0..=retries {
            let pid = wait_for_pid_line(&env, &handle, attempt + 1);
            kill(signal, &format!("-{pid}"));
        }
        let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
        assert_eq!(status["state"], "FAILED", "{signal} {retries}: {status}");
        let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
        assert_eq!(
            reasons,
            vec!["failed"; retries as usize + 1],
            "{signal} {retries}"
        );
        assert_no_processes(&handle);
    }
    let requeue = app(&env, "asks", "#!/bin/bash\nexit 75\n", "");
    let out = env.run(&["run", &requeue]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = env.status(stdout(&out).trim());
    assert_eq!(attempts(&status), vec![("failed".to_string(), Some(75))]);
}

/// The pid of the `n`th `attempt pid N` line of the job's log (1 first), once it is there.
fn wait_for_pid_line(env: &Env, handle: &str, n: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = stdout(&env.run(&["log", handle]));
        let pids: Vec<u32> = log
            .lines()
            .filter_map(|l| l.split_once("attempt pid ")?.1.trim().parse().ok())
            .collect();
        if let Some(pid) = pids.get(n as usize - 1) {
            return *pid;
        }
        assert!(Instant::now() < deadline, "no pid line {n}: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A bash trainer under TorchX's own shell wrapper (`utils.sh`: `sh -c`, whose `sh` dies of
/// the checkpoint signal it does not trap) saves, asks for a requeue through
/// `TORCHX_REQUEUE_FILE` and exits 0; the wrapper's death does not fail the attempt, the
/// trainer is not killed while it saves, and the job reaches its goal over attempts.
#[test]
fn a_trainer_under_a_shell_wrapper_requeues_through_the_requeue_file() {
    let env = Env::new();
    let trainer = r#"f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'sleep 0.3; echo $n > "$f"; echo "attempt $TORCHX_ATTEMPT saved $n"; touch "$TORCHX_REQUEUE_FILE"; exit 0' USR1
while [ "$n" -lt 25 ]; do n=$((n+1)); sleep 0.1 & wait $!; done
echo "reached $n in attempt $TORCHX_ATTEMPT"
"#;
    std::fs::write(env.cwd.join("work.sh"), trainer).unwrap();
    let out = env.run(&[
        "run",
        "--time_limit",
        "2s",
        "--checkpoint_signal",
        "USR1@1",
        "utils.sh",
        "bash",
        "work.sh",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("reached 25"), "{}", stderr(&out));
    support::assert_requeued_then_succeeded(&env.status(stdout(&out).trim()));
}

/// As torchrun that does not forward the checkpoint signal (an older torch, whether or not it
/// was told to through `PET_SIGNALS_TO_HANDLE`): the wrapper dies of the signal at once, its
/// worker (in a session of its own) gets it once, saves and asks for a requeue a second later.
/// The request belongs to attempt 0: attempt 1 finishes once and succeeds; nothing runs a
/// third time.
#[test]
fn a_requeue_request_belongs_to_the_attempt_that_made_it() {
    let wrapper = r#"#!/bin/bash
if [ "$TORCHX_ATTEMPT" = 0 ]; then
  setsid bash -c 'trap "echo worker got USR1; sleep 1; touch \"\$TORCHX_REQUEUE_FILE\"; exit 75" USR1; sleep 300 & wait $!' </dev/null &
  sleep 300 & wait $!
fi
echo "final step in attempt $TORCHX_ATTEMPT"
"#;
    for told in [
        "",
        "PET_SIGNALS_TO_HANDLE: 'SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1'",
    ] {
        let env = Env::new();
        let file = app(&env, "late", wrapper, told);
        let out = env.run(&[
            "run",
            "--time_limit",
            "4s",
            "--checkpoint_signal",
            "USR1@3",
            "--max_retries",
            "0",
            &file,
        ]);
        assert_eq!(out.status.code(), Some(0), "{told}: {}", stderr(&out));
        let handle = stdout(&out).trim().to_string();
        let log = stdout(&env.run(&["log", &handle]));
        assert_eq!(log.matches("worker got USR1").count(), 1, "{told}: {log}");
        assert_eq!(log.matches("final step in attempt").count(), 1, "{log}");
        assert!(log.contains("final step in attempt 1"), "{log}");
        let status = env.status(&handle);
        assert_eq!(status["state"], "SUCCEEDED", "{status}");
        let seen = attempts(&status);
        assert_eq!(seen.len(), 2, "{told}: {seen:?}");
        assert_eq!(seen[0].0, "requeued", "{seen:?}");
        assert_eq!(seen[1], ("succeeded".to_string(), Some(0)), "{seen:?}");
        assert_no_processes(&handle);
    }
}

/// A torchrun (told to pass the signal on) whose workers all finished is shutting down when the
/// checkpoint signal comes: it is not sent (torchrun would turn their success into its
/// failure), and the attempt ends as the workers did, once.
#[test]
fn a_torchrun_whose_workers_finished_is_not_signalled() {
    let torchrun = r#"#!/bin/bash
trap 'echo "torchrun got USR1"; exit 1' USR1
setsid bash -c 'sleep 1.5; echo "worker finished"' </dev/null & wait $!
# Its exit barrier, with no process of its own (a read on a pipe nobody writes).
exec 9<> <(:)
read -t 2.5 -u 9
echo "torchrun shut down"
"#;
    let env = Env::new();
    let told = "PET_SIGNALS_TO_HANDLE: 'SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1'";
    let file = app(&env, "finishing", torchrun, told);
    let out = env.run(&[
        "run",
        "--time_limit",
        "7s",
        "--checkpoint_signal",
        "USR1@4",
        "--max_retries",
        "0",
        &file,
    ]);
    let handle = stdout(&out).trim().to_string();
    let log = stdout(&env.run(&["log", &handle]));
    assert_eq!(out.status.code(), Some(0), "{}\n{log}", stderr(&out));
    assert!(log.contains("worker finished"), "{log}");
    assert!(!log.contains("torchrun got USR1"), "{log}");
    assert!(log.contains("torchrun shut down"), "{log}");
    let status = env.status(&handle);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    assert_eq!(attempts(&status).len(), 1, "{status}");
}

/// `--time_limit 20s` alone, the first thing a user tries: the default USR1@90 would come before
/// the job even started (it was sent at once and killed the job before its trap); fitted to a
/// quarter of the limit, it never reaches a job that ends in 2 s, and the run says so.
#[test]
fn a_short_time_limit_alone_does_not_signal_the_job_at_start() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--time_limit",
        "20s",
        "utils.sh",
        "--",
        "sh",
        "-c",
        "sleep 1; trap 'echo signalled; exit 75' USR1; sleep 1; echo finished",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("USR1@5"), "{}", stderr(&out));
    assert!(stderr(&out).contains("finished"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("signalled"), "{}", stderr(&out));
    let status = env.status(stdout(&out).trim());
    assert_eq!(attempts(&status), [("succeeded".to_string(), Some(0))]);
}

/// A replica owns what it starts in other sessions (as torchrun does its workers): killing
/// its main process, or cancelling the job, leaves nothing behind.
#[test]
fn processes_in_other_sessions_go_with_their_replica() {
    let env = Env::new();
    let script = "#!/bin/bash\nsetsid sleep 300 &\nsetsid bash -c 'sleep 301 & wait' &\n\
                  echo \"attempt pid $$\"\nsleep 300 & wait $!\n";
    let file = app(&env, "sessions", script, "");
    let handle = env.detach(&[&file]);
    let pid = wait_for_pid_line(&env, &handle, 1);
    support::wait_processes(&handle, 5);
    // Long enough for the supervisor to have seen them (it looks every second).
    std::thread::sleep(Duration::from_millis(1500));
    kill("-KILL", &pid.to_string());
    let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_no_processes(&handle);
    let handle = env.detach(&[&file]);
    wait_for_pid_line(&env, &handle, 1);
    support::wait_processes(&handle, 5);
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_processes(&handle);
}

/// A supervisor killed between attempts (its replica asked for a requeue and runs again)
/// loses nothing: the job ends FAILED saying why, `status` lists every attempt, the one that
/// was running included, once, and no process is left.
#[test]
fn a_supervisor_killed_mid_requeue_loses_no_attempt() {
    let env = Env::new();
    let file = app(&env, "killed", REQUEUES_ONCE_THEN_SLEEPS, "");
    let handle = env.detach(&["--max_requeues", "5", &file]);
    wait_for_attempt(&env, &handle, 1);
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    kill("-KILL", &supervisor.to_string());
    // The guard kills the replicas, then the outcome is recorded (a reader may show the app
    // FAILED a moment before that record, with no message yet).
    assert_no_processes(&handle);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = env.status(&handle);
        if status["msg"].as_str().unwrap_or("").contains("died") {
            break status;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status["state"], "FAILED", "{status}");
    let numbers: Vec<u64> = status["roles"][0]["replicas"][0]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [0, 1], "{status}");
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["requeued", "failed"], "{status}");
    assert_no_processes(&handle);
}

/// Ctrl-C of a foreground `torchx run` while its job is in a requeued attempt: the job ends
/// CANCELLED, `status` lists both attempts (the requeued one and the cancelled one), once
/// each, and nothing is left running.
#[test]
fn ctrl_c_mid_requeue_cancels_and_keeps_every_attempt() {
    let env = Env::new();
    let file = app(&env, "ctrlc", REQUEUES_ONCE_THEN_SLEEPS, "");
    let (mut child, handle) = env.spawn_run(&["--max_requeues", "5", &file]);
    wait_for_attempt(&env, &handle, 1);
    kill("-INT", &child.id().to_string());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
    assert_eq!(status["state"], "CANCELLED", "{status}");
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["requeued", "cancelled"], "{status}");
    assert_no_processes(&handle);
}

/// The pid (= process group) of the replica's attempt `n`, once it runs.
fn wait_for_attempt(env: &Env, handle: &str, n: u64) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = stdout(&env.run(&["log", handle]));
        if let Some(pid) = log
            .lines()
            .filter_map(|l| {
                l.split_once(&format!("attempt {n} pid "))?
                    .1
                    .trim()
                    .parse()
                    .ok()
            })
            .next()
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "attempt {n} never started: {log}\n{}",
            stdout(&env.run(&["status", handle]))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn budgets_end_a_job_that_always_fails_or_always_asks_to_be_requeued() {
    let env = Env::new();
    let fails = app(&env, "fails", "#!/bin/bash\nexit 3\n", "");
    let out = env.run(&["run", "--max_retries", "2", &fails]);
    assert_ne!(out.status.code(), Some(0));
    let status = env.status(stdout(&out).trim());
    assert_eq!(status["state"], "FAILED");
    assert_eq!(
        attempts(&status),
        vec![("failed".to_string(), Some(3)); 3],
        "max_retries 2: three attempts"
    );
    let requeues = app(&env, "requeues", "#!/bin/bash\nexit 75\n", "");
    let out = env.run(&[
        "run",
        "--max_retries",
        "5",
        "--max_requeues",
        "3",
        &requeues,
    ]);
    assert_ne!(out.status.code(), Some(0));
    let status = env.status(stdout(&out).trim());
    assert_eq!(status["state"], "FAILED");
    assert_eq!(
        attempts(&status),
        vec![("requeued".to_string(), Some(75)); 4]
    );
    assert!(
        status["msg"]
            .as_str()
            .unwrap()
            .contains("no requeues left (max_requeues=3)"),
        "{status}"
    );
    // Another requeue code: 75 is then a plain failure.
    let out = env.run(&["run", "--requeue_exit_code", "99", &requeues]);
    let status = env.status(stdout(&out).trim());
    assert_eq!(attempts(&status), vec![("failed".to_string(), Some(75))]);
}

/// A job that ignores the checkpoint signal and outlives its limit is stopped (SIGTERM) and
/// fails with a timeout.
#[test]
fn a_time_limit_without_a_requeue_is_a_failure() {
    let env = Env::new();
    let file = app(
        &env,
        "slow",
        "#!/bin/bash\ntrap '' USR1\nsleep 300 & wait $!\n",
        "",
    );
    let begun = Instant::now();
    let out = env.run(&[
        "run",
        "--time_limit",
        "2",
        "--checkpoint_signal",
        "USR1@1",
        &file,
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        begun.elapsed() < Duration::from_secs(20),
        "{:?}",
        begun.elapsed()
    );
    let status = env.status(stdout(&out).trim());
    assert_eq!(status["state"], "FAILED");
    assert_eq!(attempts(&status)[0].0, "timeout");
    assert!(
        status["msg"]
            .as_str()
            .unwrap()
            .contains("exceeded its time limit of 2s"),
        "{status}"
    );
}

#[test]
fn bad_recovery_input_is_refused_before_anything_runs() {
    let env = Env::new();
    // Exit codes: 2 for bad input, 6 for what the scheduler cannot do.
    for (args, code, message) in [
        (&["--time_limit", "4x"][..], 2, "`4x` is not a duration"),
        (
            &["--checkpoint_signal", "KILL@10"][..],
            2,
            "`KILL` is not a signal",
        ),
        (
            &["--checkpoint_signal", "USR1"][..],
            2,
            "is not SIG@SECONDS",
        ),
        (
            &["--max_retries", "-1"][..],
            2,
            "--max_retries must be 0 or more",
        ),
        (
            &["--requeue_exit_code", "0"][..],
            2,
            "is not an exit code (1-255)",
        ),
        (
            &["--time_limit", "60", "--checkpoint_signal", "USR1@90"][..],
            2,
            "checkpoint_signal USR1@90 comes 1m30s before the end of an attempt of 1m",
        ),
        (
            &[
                "-s",
                "kubernetes_mcad",
                "--workspace",
                "",
                "--requeue_exit_code",
                "3",
            ][..],
            6,
            "the AppWrapper's pods are never restarted",
        ),
        (
            &[
                "-s",
                "kubernetes",
                "-cfg",
                "queue=q",
                "--workspace",
                "",
                "--time_limit",
                "1h",
            ][..],
            2,
            "give --checkpoint_dir PATH on one of the role's mounts",
        ),
    ] {
        let mut full = vec!["run", "--dryrun"];
        full.extend_from_slice(args);
        full.push("utils.echo");
        let out = env.run(&full);
        let err = stderr(&out);
        assert!(err.contains(message), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    }
    assert_eq!(env.apps(), 0);
}

/// Replicas start with no signal blocked (the supervisor blocks the ones it reads): SIGTERM,
/// the checkpoint signal and Ctrl-C reach them, and a cancel stops them without waiting for
/// the SIGKILL of the grace period.
#[test]
fn replicas_start_with_no_signal_blocked() {
    let env = Env::new();
    let file = app(
        &env,
        "mask",
        "#!/bin/bash\ngrep SigBlk /proc/self/status\n",
        "",
    );
    let out = env.run(&["run", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("SigBlk:\t0000000000000000"),
        "{}",
        stderr(&out)
    );
    let file = app(
        &env,
        "waits",
        "#!/bin/bash\necho up\nsleep 300 & wait $!\n",
        "",
    );
    let handle = env.detach(&[&file]);
    env.wait_state(&handle, "RUNNING", Duration::from_secs(30));
    let begun = Instant::now();
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    env.wait_state(&handle, "CANCELLED", Duration::from_secs(30));
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "the replica ignored SIGTERM: stopped after {:?}",
        begun.elapsed()
    );
    assert_no_processes(&handle);
}

/// `--checkpoint_dir` names TORCHX_CHECKPOINT_DIR (relative to the job's directory), created
/// before the first attempt and the same in every attempt.
#[test]
fn checkpoint_dir_is_the_users_own() {
    let env = Env::new();
    let script = "#!/bin/bash\necho $TORCHX_ATTEMPT >> \"$TORCHX_CHECKPOINT_DIR/seen\"\n\
                  [ \"$TORCHX_ATTEMPT\" -ge 1 ] || exit 75\n";
    let file = app(&env, "mine", script, "");
    let out = env.run(&[
        "run",
        "--checkpoint_dir",
        "ckpt/run",
        "--max_requeues",
        "2",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = std::fs::read_to_string(env.cwd.join("ckpt/run/seen")).unwrap();
    assert_eq!(seen, "0\n1\n");
}
