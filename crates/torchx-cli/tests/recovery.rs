//! The recovery contract on local_cwd, with real processes: a job that checkpoints when
//! signalled before its time limit and asks for a requeue reaches its goal over attempts;
//! preemptions and requeues do not spend the retry budget; failures do; both budgets end a job
//! that never stops asking; a time limit without a requeue is a failure; bad input is refused.

mod support;

use std::time::{Duration, Instant};

use support::{assert_no_processes, attempts, stderr, stdout, Env};

/// Counts to `$GOAL`, 0.1 s a step, resuming from `$TORCHX_CHECKPOINT_DIR/n`; on SIGUSR1 saves
/// the count and exits 75 (a requeue). `exec sleep` keeps the counter in this shell only.
const COUNTER: &str = r#"#!/bin/bash
f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'echo $n > "$f"; echo "attempt $TORCHX_ATTEMPT saved $n"; exit 75' USR1
while [ "$n" -lt "$GOAL" ]; do n=$((n+1)); sleep 0.1 & wait $!; done
echo "reached $n in attempt $TORCHX_ATTEMPT of max_retries $TORCHX_MAX_RETRIES"
"#;

/// An AppDef file running `script` (written next to it) with bash, as role `trainer`.
fn app(env: &Env, name: &str, script: &str, extra_env: &str) -> String {
    std::fs::write(env.cwd.join(format!("{name}.sh")), script).unwrap();
    let file = format!("{name}.yaml");
    std::fs::write(
        env.cwd.join(&file),
        format!(
            "name: {name}\nroles:\n- name: trainer\n  image: .\n  entrypoint: bash\n  \
             args: [{name}.sh]\n  env: {{{extra_env}}}\n"
        ),
    )
    .unwrap();
    format!("./{file}")
}

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

/// A replica killed from outside (SIGTERM, then SIGKILL for one that ignores it) is
/// preempted: started again without spending `max_retries` (0 here).
#[test]
fn preemptions_do_not_spend_the_retry_budget() {
    let env = Env::new();
    // Ignores SIGTERM in its first attempt, so the second preemption needs SIGKILL.
    let script = r#"#!/bin/bash
if [ "$TORCHX_ATTEMPT" = 1 ]; then trap '' TERM; fi
if [ "$TORCHX_ATTEMPT" -ge 2 ]; then echo "survived to attempt $TORCHX_ATTEMPT"; exit 0; fi
echo "attempt $TORCHX_ATTEMPT pid $$"
sleep 300 & wait $!
"#;
    let file = app(&env, "preempt", script, "");
    let handle = env.detach(&[&file]);
    for (attempt, signal) in [(0, "-TERM"), (1, "-KILL")] {
        let pid = wait_for_attempt(&env, &handle, attempt);
        let ok = std::process::Command::new("kill")
            .args([signal, "--", &format!("-{pid}")])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {signal} -{pid}");
    }
    let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["preempted", "preempted", "succeeded"]);
    assert_eq!(status["num_restarts"], 2);
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
