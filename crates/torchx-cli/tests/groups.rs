//! Arrays and sweeps on local_cwd, through the CLI: one group handle, per-task arguments and
//! variables, the concurrency cap, the aggregate status, list as one row, cancel, bad input.

mod support;

use std::time::Duration;

use support::{stderr, stdout, Env};

fn group_status(env: &Env, handle: &str) -> serde_json::Value {
    let out = env.run(&["status", "--json", handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn an_array_is_one_group_with_a_task_per_index() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--wait",
        "--array",
        "1-5:2",
        "utils.sh",
        "sh",
        "-c",
        "echo task ${array_index} of $TORCHX_ARRAY_SIZE is $TORCHX_ARRAY_INDEX",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(handle.starts_with("local_cwd://torchx/~sh-"), "{handle}");
    let status = group_status(&env, &handle);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    assert_eq!(status["counts"]["SUCCEEDED"], 3, "{status}");
    let tasks = status["tasks"].as_array().unwrap();
    let indexes: Vec<i64> = tasks.iter().map(|t| t["index"].as_i64().unwrap()).collect();
    assert_eq!(indexes, [1, 3, 5]);
    for t in tasks {
        let log = stdout(&env.run(&["log", t["handle"].as_str().unwrap()]));
        let i = t["index"].as_i64().unwrap();
        assert_eq!(log.trim(), format!("sh/0 task {i} of 3 is {i}"), "{t}");
    }
    // `list` shows the group as one row, not its tasks.
    let out = env.run(&["list", "--json"]);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["app_handle"], handle.as_str());
    assert_eq!(listed[0]["state"], "SUCCEEDED");
    let text = stdout(&env.run(&["status", &handle]));
    assert!(text.contains("Tasks: 3 (SUCCEEDED 3)"), "{text}");
    // `log` of the group: every task's lines, labelled with its index.
    let log = stdout(&env.run(&["log", &handle]));
    assert_eq!(
        log,
        "1:sh/0 task 1 of 3 is 1\n3:sh/0 task 3 of 3 is 3\n5:sh/0 task 5 of 3 is 5\n"
    );
    // `delete` removes the tasks and the group.
    assert_eq!(env.run(&["delete", &handle]).status.code(), Some(0));
    assert_eq!(env.run(&["status", &handle]).status.code(), Some(4));
    assert_eq!(env.apps(), 0);
}

#[test]
fn a_sweep_substitutes_its_points_caps_concurrency_and_counts_failures() {
    let env = Env::new();
    let runs = env.cwd.join("runs");
    std::fs::create_dir(&runs).unwrap();
    // Each task notes how many tasks run with it, and fails for lr=0.3.
    let script = format!(
        "d={}; touch $d/run.$TORCHX_ARRAY_INDEX; ls $d | grep -c '^run' > $d/seen.$TORCHX_ARRAY_INDEX; \
         sleep 0.3; rm $d/run.$TORCHX_ARRAY_INDEX; echo lr=${{sweep.lr}} bs=$TORCHX_SWEEP_BS; \
         [ ${{sweep.lr}} != 0.3 ]",
        runs.display()
    );
    let out = env.run(&[
        "run",
        "--wait",
        "--sweep",
        "lr=0.1,0.2,0.3",
        "--sweep",
        "bs=8,16",
        "--max_concurrent",
        "2",
        "utils.sh",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed point fails the group: {}",
        stderr(&out)
    );
    let handle = stdout(&out).trim().to_string();
    let status = group_status(&env, &handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(status["counts"]["FAILED"], 2, "{status}");
    assert_eq!(status["counts"]["SUCCEEDED"], 4, "{status}");
    for t in status["tasks"].as_array().unwrap() {
        let (lr, bs) = (
            t["params"]["lr"].as_str().unwrap(),
            t["params"]["bs"].as_str().unwrap(),
        );
        let log = stdout(&env.run(&["log", t["handle"].as_str().unwrap()]));
        assert!(log.contains(&format!("lr={lr} bs={bs}")), "{t}: {log}");
        assert_eq!(t["state"] == "FAILED", lr == "0.3", "{t}");
    }
    let most = (0..6)
        .map(|i| {
            std::fs::read_to_string(runs.join(format!("seen.{i}")))
                .unwrap()
                .trim()
                .parse::<u32>()
                .unwrap()
        })
        .max()
        .unwrap();
    assert!(
        most <= 2,
        "{most} tasks ran at once with --max_concurrent 2"
    );
}

#[test]
fn cancelling_a_group_cancels_its_tasks() {
    let env = Env::new();
    let out = env.run(&[
        "run", "--detach", "--array", "2", "utils.sh", "sleep", "300",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert_eq!(group_status(&env, &handle)["state"], "RUNNING");
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = group_status(&env, &handle);
        if status["state"] == "CANCELLED" {
            assert_eq!(status["counts"]["CANCELLED"], 2, "{status}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bad_group_input_is_refused_before_anything_runs() {
    let env = Env::new();
    for (args, code, message) in [
        (&["--array", "0"][..], 2, "an array of 0 tasks"),
        (&["--array", "3-1"][..], 2, "after the last"),
        (
            &["--array", "3", "--max_concurrent", "2"][..],
            2,
            "cap an --array with %K",
        ),
        (&["--sweep", "lr"][..], 2, "expected KEY=V1,V2"),
        (
            &["--sweep", "lr=1", "--max_concurrent", "0"][..],
            2,
            "would run nothing",
        ),
        (
            &["--sweep_file", "nope.csv"][..],
            2,
            "--sweep_file nope.csv",
        ),
    ] {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        full.extend(["utils.echo"]);
        let out = env.run(&full);
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(env.apps(), 0);
    let out = env.run(&["status", "local_cwd://torchx/~never-was"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}

/// A rerun task sees what it saw the first time: its index and the group's size (not the
/// rerun's), so a trainer that shards by index and size reads the same shard.
#[test]
fn a_rerun_task_sees_the_first_runs_index_and_size() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--array",
        "0-4%2",
        "--wait",
        "utils.sh",
        "--",
        "sh",
        "-c",
        "echo \"task $TORCHX_ARRAY_INDEX of $TORCHX_ARRAY_SIZE\"; [ $TORCHX_ARRAY_INDEX != 3 ] || [ -e fixed ]",
    ]);
    let first = stdout(&out).lines().next().unwrap().to_string();
    let log = stdout(&env.run(&["log", &first]));
    assert!(log.contains("task 3 of 5"), "{log}");
    std::fs::write(env.cwd.join("fixed"), "").unwrap();
    let out = env.run(&["rerun", "--failed", "--wait", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = stdout(&out).lines().next().unwrap().to_string();
    let log = stdout(&env.run(&["log", &second]));
    assert_eq!(log.trim_end(), "3:sh/0 task 3 of 5", "{log}");
    let status = env.status(&second);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
}

/// `rerun --failed` submits exactly the failed tasks again, with their indexes and points, as
/// a new group linked to the first.
#[test]
fn rerun_failed_runs_exactly_the_failed_tasks_again() {
    let env = Env::new();
    let marks = env.cwd.join("marks");
    std::fs::create_dir(&marks).unwrap();
    // Points with lr=0.3 fail the first time only.
    let script = format!(
        "m={}/$TORCHX_ARRAY_INDEX; if [ ${{sweep.lr}} = 0.3 ] && [ ! -e $m ]; then touch $m; exit 1; fi; \
         echo ran ${{array_index}} lr=${{sweep.lr}}",
        marks.display()
    );
    let out = env.run(&[
        "run",
        "--wait",
        "--sweep",
        "lr=0.1,0.3",
        "--sweep",
        "bs=1,2",
        "utils.sh",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let first = stdout(&out).trim().to_string();
    assert_eq!(group_status(&env, &first)["counts"]["FAILED"], 2);
    let out = env.run(&["rerun", "--failed", "--wait", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = stdout(&out).trim().to_string();
    assert_ne!(second, first);
    let status = group_status(&env, &second);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let rerun: Vec<(i64, String)> = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let lr = t["params"]["lr"].as_str().unwrap().to_string();
            (t["index"].as_i64().unwrap(), lr)
        })
        .collect();
    assert_eq!(rerun, [(2, "0.3".to_string()), (3, "0.3".to_string())]);
    assert!(stdout(&env.run(&["status", &second])).contains(&format!("rerun of {first}")));
    // Nothing failed in the second group: nothing to rerun.
    let out = env.run(&["rerun", "--failed", &second]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let out = env.run(&["rerun", "--failed", "local_cwd://torchx/app-1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A capped group without --wait: `run` returns with the handle while a background submitter
/// holds the cap (its tasks not yet submitted read PENDING); cancel stops it, and what it never
/// submitted ends CANCELLED.
#[test]
fn a_capped_group_is_submitted_in_the_background_and_cancel_stops_it() {
    let env = Env::new();
    let runs = env.cwd.join("runs");
    std::fs::create_dir(&runs).unwrap();
    let script = format!(
        "d={}; touch $d/run.${{array_index}}; ls $d | grep -c '^run' > $d/seen.${{array_index}}; \
         sleep 0.5; rm $d/run.${{array_index}}",
        runs.display()
    );
    let out = env.run(&[
        "run", "--detach", "--array", "0-5%2", "utils.sh", "sh", "-c", &script,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = group_status(&env, &handle);
    assert!(
        status["counts"]["PENDING"].as_i64().unwrap_or(0) >= 1,
        "the cap holds some back: {status}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = group_status(&env, &handle);
        if s["state"] == "SUCCEEDED" {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["counts"]["SUCCEEDED"], 6, "{status}");
    for i in 0..6 {
        let seen: u32 = std::fs::read_to_string(runs.join(format!("seen.{i}")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(seen <= 2, "task {i} saw {seen} running under %2");
    }
    // Cancel while the submitter still holds tasks back.
    let out = env.run(&[
        "run", "--detach", "--array", "0-4%1", "utils.sh", "sleep", "30",
    ]);
    let handle = stdout(&out).trim().to_string();
    assert_eq!(env.run(&["cancel", &handle]).status.code(), Some(0));
    let status = group_status(&env, &handle);
    assert_eq!(status["state"], "CANCELLED", "{status}");
    assert_eq!(status["counts"]["CANCELLED"], 5, "{status}");
    let unsubmitted = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["handle"].is_null())
        .count();
    assert!(unsubmitted >= 3, "never submitted: {status}");
    // `rerun --failed` takes them all again (cancelled, submitted or not).
    let out = env.run(&["rerun", &handle, "--failed"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rerun = stdout(&out).trim().to_string();
    assert_eq!(
        group_status(&env, &rerun)["tasks"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(env.run(&["delete", &rerun]).status.code(), Some(0));
}

/// A group on local_cwd waits, as one local job does: on a pipe a progress line whenever the
/// counts change, then a summary naming each failed task, why, and the rerun command.
#[test]
fn a_local_group_waits_with_its_progress_and_a_summary() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--array",
        "0-3%2",
        "utils.sh",
        "sh",
        "-c",
        "echo task $TORCHX_ARRAY_INDEX of $TORCHX_ARRAY_SIZE; sleep 0.3; [ ${array_index} != 2 ]",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let err = stderr(&out);
    // Each task's lines as they come, labelled as `torchx log <group>` labels them, before the
    // summary.
    for i in 0..4 {
        assert!(err.contains(&format!("{i}:sh/0 task {i} of 4\n")), "{err}");
    }
    assert!(
        err.find("3:sh/0 task 3").unwrap() < err.find("FAILED after").unwrap(),
        "{err}"
    );
    assert!(err.contains(&format!("{handle}: 0/4 tasks done")), "{err}");
    assert!(
        err.contains("4/4 tasks done (1 FAILED, 3 SUCCEEDED)"),
        "{err}"
    );
    assert!(
        err.contains("about"),
        "an estimate once tasks finished: {err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("tasks done")).collect();
    let mut changes = lines.clone();
    changes.dedup_by_key(|l| l.split(" | ").next().unwrap_or(l).to_string());
    assert_eq!(changes.len(), lines.len(), "a line per change only: {err}");
    assert!(!err.contains('\r'), "no live line on a pipe: {err:?}");
    assert!(err.contains("FAILED after"), "{err}");
    let failed = group_status(&env, &handle)["tasks"][2]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        err.contains(&format!(
            "task 2 FAILED: {failed} (sh/0 exited with code 1)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("run them again: torchx rerun {handle} --failed")),
        "{err}"
    );
    // --json: one summary object on stdout instead of the handle.
    let out = env.run(&["run", "--json", "--array", "2", "utils.sh", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(summary["state"], "SUCCEEDED", "{summary}");
    assert_eq!(summary["counts"]["SUCCEEDED"], 2, "{summary}");
}

/// On a terminal (a pseudo-terminal from `script`) the progress is one live line, redrawn.
#[test]
fn a_group_shows_a_live_line_on_a_terminal() {
    let env = Env::new();
    let torchx = env!("CARGO_BIN_EXE_torchx");
    let out = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{torchx} run --array 0-2%1 utils.sh sh -c 'sleep 0.3; echo slept'"),
            "/dev/null",
        ])
        .current_dir(&env.cwd)
        .env("HOME", &env.home)
        .env("TORCHX_STATE_DIR", &env.state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let screen = stdout(&out);
    assert!(screen.contains("\r\x1b[2K"), "{screen:?}");
    assert!(
        screen.contains("3/3 tasks done (3 SUCCEEDED)"),
        "{screen:?}"
    );
    assert!(screen.contains("SUCCEEDED after"), "{screen:?}");
    // A task's line clears the live line first, and the next update draws it again.
    assert!(screen.contains("\r\x1b[2K2:sh/0 slept"), "{screen:?}");
}

/// `cancel` of a capped group returns within 5 s whatever its submitter is doing: while tasks
/// run and the submitter waits for room, before the first task started, and during the last
/// task. Every task ends terminal, nothing runs afterwards, and nothing is submitted later.
#[test]
fn cancelling_a_capped_group_is_prompt_at_any_moment() {
    let env = Env::new();
    let cancel = |handle: &str| {
        let started = std::time::Instant::now();
        let out = env.run(&["cancel", handle]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "cancel took {took:?}");
        let status = group_status(&env, handle);
        assert_eq!(status["state"], "CANCELLED", "{status}");
        for t in status["tasks"].as_array().unwrap() {
            assert!(
                ["CANCELLED", "SUCCEEDED"].contains(&t["state"].as_str().unwrap()),
                "{t}"
            );
            if let Some(h) = t["handle"].as_str() {
                support::assert_no_processes(h);
            }
        }
        status
    };
    let running = |handle: &str, n: i64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let status = group_status(&env, handle);
            if status["counts"]["RUNNING"].as_i64() == Some(n) {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "{status}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // While two tasks run and the submitter waits for room.
    let handle = env.detach(&["--array", "0-7%2", "utils.sh", "sleep", "60"]);
    running(&handle, 2);
    let status = cancel(&handle);
    assert_eq!(status["counts"]["CANCELLED"], 8, "{status}");
    std::thread::sleep(Duration::from_millis(500));
    let later = group_status(&env, &handle);
    let submitted = |s: &serde_json::Value| {
        s["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["handle"].is_string())
            .count()
    };
    assert_eq!(
        submitted(&later),
        submitted(&status),
        "submitted after: {later}"
    );
    // Before the first task started.
    let handle = env.detach(&["--array", "0-3%1", "utils.sh", "sleep", "60"]);
    cancel(&handle);
    // During the last task: the first ones were quick.
    let handle = env.detach(&[
        "--array",
        "0-2%1",
        "utils.sh",
        "sh",
        "-c",
        "[ ${array_index} != 2 ] || sleep 60",
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while group_status(&env, &handle)["counts"]["SUCCEEDED"].as_i64() != Some(2) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    running(&handle, 1);
    let status = cancel(&handle);
    assert_eq!(status["counts"]["SUCCEEDED"], 2, "{status}");
    assert_eq!(status["counts"]["CANCELLED"], 1, "{status}");
}
