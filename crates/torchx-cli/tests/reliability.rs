//! Reliability of the local scheduler under concurrency, faults and hostile names: each test
//! here reproduces a defect that once harmed jobs (readers killing live jobs, an unstoppable
//! foreground run, a cancel that gave up, role names escaping the log directory).

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{app_id, assert_no_processes, stderr, stdout, wait_processes, Env};

/// Readers (`list`, `status`) running beside many submissions must never settle a live app:
/// a stale snapshot (PENDING, no supervisor yet, submitter gone by the time it is checked) once
/// made them SIGKILL the replicas of healthy jobs.
#[test]
fn concurrent_readers_never_harm_live_jobs() {
    let env = Env::new();
    const JOBS: usize = 40;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // One `list` loop and two loops that `status` every listed app, as monitoring would.
    let readers: Vec<_> = (0..3)
        .map(|n| {
            let stop = stop.clone();
            let (home, state, cwd) = (env.home.clone(), env.state.clone(), env.cwd.clone());
            std::thread::spawn(move || {
                let torchx = |args: &[&str]| {
                    std::process::Command::new(env!("CARGO_BIN_EXE_torchx"))
                        .args(args)
                        .current_dir(&cwd)
                        .env("HOME", &home)
                        .env("TORCHX_STATE_DIR", &state)
                        .stderr(Stdio::null())
                        .output()
                        .unwrap()
                };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if n == 0 {
                        torchx(&["list"]);
                        continue;
                    }
                    let out = torchx(&["list", "--json"]);
                    let apps: Vec<serde_json::Value> =
                        serde_json::from_slice(&out.stdout).unwrap_or_default();
                    for a in apps.iter().take(10) {
                        torchx(&["status", a["app_handle"].as_str().unwrap_or_default()]);
                    }
                }
            })
        })
        .collect();
    let submitters: Vec<_> = (0..JOBS)
        .map(|_| {
            env.cmd(&["run", "--detach", "utils.sh", "sleep", "1"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let handles: Vec<String> = submitters
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            stdout(&out).trim().to_string()
        })
        .collect();
    // Keep reading while the jobs run, then let them finish.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let mut harmed = Vec::new();
    for h in &handles {
        let s = env.wait_state_terminal(h, Duration::from_secs(60));
        if s["state"] != "SUCCEEDED" {
            harmed.push(format!("{h}: {s}"));
        }
    }
    assert!(harmed.is_empty(), "jobs harmed by readers: {harmed:#?}");
}

/// Ctrl-C while a foreground run streams a large backlog of logs cancels the job and exits
/// 130: the log copy must give the signal handler its turn.
#[test]
fn ctrl_c_while_streaming_a_backlog_cancels_and_exits_130() {
    let env = Env::new();
    // ~100 MB of output at once, then a long sleep: the run is streaming when Ctrl-C comes.
    let script = "yes 0123456789012345678901234567890123456789012345678901234567890123456789 \
                  | head -n 1500000; sleep 60";
    let mut child = env
        .cmd(&["run", "utils.sh", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The handle (stdout), then the job's lines (stderr): Ctrl-C comes once a thousand of them arrived, while
    // this reader holds off (the pipe fills and the run is blocked writing the backlog).
    let mut handle = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut handle,
    )
    .unwrap();
    let mut out = std::io::BufReader::new(child.stderr.take().unwrap());
    let handle = handle.trim().to_string();
    let (started, interrupted) = (
        std::sync::mpsc::channel::<()>(),
        std::sync::mpsc::channel::<()>(),
    );
    let reader = std::thread::spawn(move || {
        let mut lines = 0usize;
        let mut line = Vec::new();
        while std::io::BufRead::read_until(&mut out, b'\n', &mut line).unwrap_or(0) > 0 {
            line.clear();
            lines += 1;
            if lines == 1000 {
                started.0.send(()).unwrap();
                interrupted.1.recv().unwrap();
            }
        }
        lines
    });
    started
        .1
        .recv_timeout(Duration::from_secs(30))
        .expect("the backlog never started streaming");
    let sent = Instant::now();
    signal(child.id(), libc_sigint());
    interrupted.0.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            Instant::now() < deadline,
            "torchx run ignored SIGINT while streaming logs"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(130));
    eprintln!("exited {:?} after SIGINT", sent.elapsed());
    let streamed = reader.join().unwrap();
    assert!(
        streamed < 1_500_000,
        "all {streamed} lines were streamed: the interrupt did not come mid-backlog"
    );
    let s = env.wait_state_terminal(&handle, Duration::from_secs(30));
    assert_eq!(s["state"], "CANCELLED", "{s}");
    assert_no_processes(&handle);
}

/// `cancel` of an app whose supervisor is stopped (SIGSTOP) stops the replicas itself and
/// records CANCELLED, instead of timing out with the replicas still running.
#[test]
fn cancel_with_a_stopped_supervisor_stops_the_replicas_itself() {
    let env = Env::new();
    let handle = env.detach(&["utils.sh", "sleep", "300"]);
    wait_processes(&handle, 1);
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    signal(supervisor, 19); // SIGSTOP
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = env.status(&handle);
    assert_eq!(s["state"], "CANCELLED", "{s}");
    assert!(
        s["msg"].as_str().unwrap().contains("did not respond"),
        "{s}"
    );
    assert_no_processes(&handle);
    // The stopped supervisor was killed too: it cannot wake up and rewrite the record.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !std::path::Path::new(&format!("/proc/{supervisor}/stat")).exists()
            || std::fs::read_to_string(format!("/proc/{supervisor}/stat"))
                .unwrap_or_default()
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
    );
    assert_eq!(env.status(&handle)["state"], "CANCELLED");
}

/// Role, app and session names become path components: anything that is not exactly one
/// component is refused before anything is recorded, naming the offender.
#[test]
fn names_that_are_not_one_path_component_are_refused_before_recording() {
    let env = Env::new();
    let victim = env.detach(&["utils.sh", "sleep", "30"]);
    let victim_id = app_id(&victim).to_string();
    let long = "x".repeat(5000);
    let cases: Vec<(String, &str)> = vec![
        (format!("../{victim_id}/sh"), "role name"),
        ("../../../../x".into(), "role name"),
        ("a/b".into(), "role name"),
        ("..".into(), "role name"),
        (long.clone(), "role name"),
    ];
    for (role, what) in &cases {
        let app = serde_json::json!({
            "name": "intruder",
            "roles": [{"name": role, "image": "x", "entrypoint": "echo", "args": ["intruder"]}]
        });
        std::fs::write(env.cwd.join("app.json"), app.to_string()).unwrap();
        let out = env.run(&["run", "./app.json"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{role:.40}: {err}");
        assert!(err.contains(what), "{err}");
        assert!(
            err.len() < 600,
            "the message must not echo a long name: {err}"
        );
    }
    let app = serde_json::json!({
        "name": long,
        "roles": [{"name": "r", "image": "x", "entrypoint": "echo"}]
    });
    std::fs::write(env.cwd.join("app.json"), app.to_string()).unwrap();
    let out = env.run(&["run", "./app.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("app name"), "{}", stderr(&out));
    // Nothing was recorded, and the victim's logs hold only its own output.
    assert_eq!(env.apps(), 1);
    let out = env.run(&["log", &victim]);
    assert!(!stdout(&out).contains("intruder"), "{}", stdout(&out));
    let _ = env.run(&["cancel", &victim]);
}

fn libc_sigint() -> i32 {
    2
}

fn signal(pid: u32, sig: i32) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}");
}

/// Runs the shell `script` with this build's `torchx` first on PATH and `vars` set, in a private
/// mount namespace (and pid namespace, with `/proc` remounted, when `pid_ns`): as root directly,
/// in a user namespace otherwise. None, with the test reported SKIPPED, where such namespaces or
/// tmpfs mounts are not allowed (the scripts exit 99 when their mount fails).
fn in_private_namespaces(
    env: &Env,
    test: &str,
    script: &str,
    pid_ns: bool,
    vars: &[(&str, &str)],
) -> Option<std::process::Output> {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_torchx"))
        .parent()
        .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // Root mounts in a private namespace; others need a user namespace too.
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let ns = match (root, pid_ns) {
        (true, false) => "-m",
        (false, false) => "-rm",
        (true, true) => "-mpf",
        (false, true) => "-rmpf",
    };
    let mut args = vec![ns];
    if pid_ns {
        args.push("--mount-proc");
    }
    args.extend(["sh", "-c", script]);
    let out = env
        .cmd_of("unshare".as_ref(), &args)
        .env("PATH", path)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    if out.status.code() == Some(99) || (!out.status.success() && stdout(&out).is_empty()) {
        // .ci/run, as root, promises the namespaces: there this is a failure, not a skip.
        support::skip_engine(
            "namespaces",
            test,
            &format!("cannot mount a tmpfs here (unshare {ns}): {}", stderr(&out)),
        );
        return None;
    }
    Some(out)
}

/// A full state filesystem (a 6 MB tmpfs in a private mount namespace): read-only commands still
/// answer, and the job that ran into it is recorded, once space is back, with its real exit code
/// and the cause, instead of "the supervisor died".
#[test]
fn a_full_state_disk_neither_breaks_readers_nor_loses_the_outcome() {
    let env = Env::new();
    std::fs::create_dir_all(&env.state).unwrap();
    let script = r#"
        set -u
        mount -t tmpfs -o size=6m tmpfs "$TORCHX_STATE_DIR" || exit 99
        ok=$(torchx run utils.echo --msg before 2>/dev/null)
        job=$(torchx run --detach utils.sh sh -c 'sleep 1.5; exit 3')
        dd if=/dev/zero of="$TORCHX_STATE_DIR/fill" bs=64k 2>/dev/null
        sleep 3
        torchx list >list.out 2>&1; echo "list exit $?"
        torchx status "$ok" >status.out 2>&1; echo "status exit $?"
        rm "$TORCHX_STATE_DIR/fill"
        i=0
        while [ $i -lt 100 ] && ! torchx status "$job" | grep -q 'State: FAILED'; do
            sleep 0.1; i=$((i+1))
        done
        torchx status "$job" --json
    "#;
    let Some(out) = in_private_namespaces(
        &env,
        "a_full_state_disk_neither_breaks_readers_nor_loses_the_outcome",
        script,
        false,
        &[],
    ) else {
        return;
    };
    let text = stdout(&out);
    let list = std::fs::read_to_string(env.cwd.join("list.out")).unwrap_or_default();
    assert!(
        text.contains("list exit 0"),
        "{text}\n{list}\n{}",
        stderr(&out)
    );
    assert!(
        list.contains("SUCCEEDED") && list.contains("echo"),
        "{list}"
    );
    assert!(text.contains("status exit 0"), "{text}");
    let json = &text[text.find('{').expect("final status JSON")..];
    let status: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(status["state"], "FAILED", "{status}");
    let msg = status["msg"].as_str().unwrap();
    assert!(msg.contains("exited with code 3"), "{msg}");
    assert!(
        msg.contains("disk is full") || msg.contains("No space left"),
        "{msg}"
    );
}

/// A ledger that stays unwritable when a job ends (here a full state disk that is not freed
/// in time; a read-only remount or a revoked permission alike): the supervisor gives up after
/// `TORCHX_SUPERVISOR_SAVE_TIMEOUT` and exits, readers show the job FAILED (never RUNNING with
/// every replica gone), and once the ledger is writable again the guard records the real
/// outcome, exit code and all. Runs in private mount and pid namespaces, so only this job's
/// processes are seen.
#[test]
fn an_unwritable_ledger_never_leaves_a_job_running_forever() {
    let env = Env::new();
    std::fs::create_dir_all(&env.state).unwrap();
    let script = r#"
        set -u
        mount -t tmpfs -o size=6m tmpfs "$TORCHX_STATE_DIR" || exit 99
        job=$(torchx run --detach utils.sh sh -c 'sleep 1.5; exit 3')
        dd if=/dev/zero of="$TORCHX_STATE_DIR/fill" bs=64k 2>/dev/null
        sleep 6
        if pgrep -f "__supervis[e]" >/dev/null; then echo "supervisor still alive"; fi
        pgrep -f "__guar[d]" >/dev/null && echo "guard waiting"
        torchx status "$job" --json >full.json 2>full.err; echo "full status exit $?"
        rm "$TORCHX_STATE_DIR/fill"
        i=0
        while [ $i -lt 100 ] && ! torchx status "$job" --json | grep -q 'exited with code 3'; do
            sleep 0.1; i=$((i+1))
        done
        torchx status "$job" --json
    "#;
    let Some(out) = in_private_namespaces(
        &env,
        "an_unwritable_ledger_never_leaves_a_job_running_forever",
        script,
        true,
        &[("TORCHX_SUPERVISOR_SAVE_TIMEOUT", "1")],
    ) else {
        return;
    };
    let text = stdout(&out);
    assert!(!text.contains("supervisor still alive"), "{text}");
    assert!(text.contains("guard waiting"), "{text}");
    assert!(
        text.contains("full status exit 0"),
        "{text}\n{}",
        stderr(&out)
    );
    let full: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.cwd.join("full.json")).unwrap()).unwrap();
    assert_eq!(full["state"], "FAILED", "while the ledger was full: {full}");
    let json = &text[text.find('{').expect("final status JSON")..];
    let status: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(status["state"], "FAILED", "{status}");
    let msg = status["msg"].as_str().unwrap();
    assert!(msg.contains("exited with code 3"), "{msg}");
}

/// Finished jobs reach the ledger's database file (not only its WAL), and a ledger that lost
/// its records while job logs exist is reported loudly rather than shown as an empty history.
#[test]
fn records_reach_the_ledger_file_and_a_lost_ledger_is_reported() {
    let env = Env::new();
    for _ in 0..3 {
        let out = env.run(&["run", "utils.echo"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let ledger = env.state.join("local_cwd/ledger.sqlite3");
    // The guards checkpoint after the supervisors' last writes; give the last one a moment.
    let copy = Env::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        std::fs::create_dir_all(copy.state.join("local_cwd")).unwrap();
        for ext in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(copy.state.join(format!("local_cwd/ledger.sqlite3{ext}")));
        }
        std::fs::copy(&ledger, copy.state.join("local_cwd/ledger.sqlite3")).unwrap();
        let done = copy
            .list()
            .iter()
            .filter(|a| a["state"] == "SUCCEEDED")
            .count();
        if done == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the database file alone holds {done} of 3 finished jobs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Truncate the database and drop its WAL: `list` must say so.
    std::fs::write(&ledger, b"").unwrap();
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(env.state.join(format!("local_cwd/ledger.sqlite3{ext}")));
    }
    let out = env.run(&["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lists no jobs, but") && stderr(&out).contains("3 app(s)"),
        "{}",
        stderr(&out)
    );
}

/// Backend errors keep their cause (shown with `-v`) and a kind users act on: a Slurm
/// controller that does not answer is "unavailable" (exit 5), never "app not found" (exit 4);
/// a damaged ledger names SQLite's error as the cause.
#[test]
fn backend_errors_keep_their_cause_and_kind() {
    let env = Env::new();
    let bin = env.cwd.join("fake-slurm");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["squeue", "sacct"] {
        let path = bin.join(tool);
        std::fs::write(
            &path,
            "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n",
        )
        .unwrap();
        let mut perm = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&path, perm).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = env
        .cmd(&["status", "slurm://torchx/12345", "-v"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("cannot reach the Slurm controller"), "{err}");
    assert!(err.contains("Unable to contact slurm controller"), "{err}");
    assert!(err.contains("kind: unavailable"), "{err}");

    // A ledger that is not a database: SQLite's own error is the cause.
    std::fs::create_dir_all(env.state.join("local_cwd")).unwrap();
    std::fs::write(
        env.state.join("local_cwd/ledger.sqlite3"),
        "this is not a database, it is text that is long enough to be read as a header..."
            .repeat(20),
    )
    .unwrap();
    let out = env.run(&["list", "-v"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("caused by: file is not a database"), "{err}");
}
