//! Acceptance tests of the persistent `local_cwd` scheduler with real processes: detached runs
//! seen from other processes, retry policies, no orphans on SIGINT / cancel / SIGKILL of the
//! supervisor (checked by scanning /proc), concurrency and crashes of the ledger, and dist.ddp.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{app_id, assert_no_processes, processes_of, stderr, stdout, wait_processes, Env};

const WITHIN: Duration = Duration::from_secs(30);

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn write_exe(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn detached_app_is_visible_tailable_and_cancellable_from_other_processes() {
    let env = Env::new();
    let handle = env.detach(&[
        "utils.sh",
        "--",
        "sh",
        "-c",
        "echo first; sleep 0.2; echo second; exec sleep 300",
    ]);
    env.wait_state(&handle, "RUNNING", WITHIN);
    // A follower started while the app runs stops by itself once the app ends.
    let tail = env
        .cmd(&["log", &handle, "--tail"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WITHIN;
    while !stdout(&env.run(&["log", &handle])).contains("second") {
        assert!(Instant::now() < deadline, "no output");
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = env.list();
    assert_eq!(list[0]["app_handle"], handle.as_str());
    assert_eq!(list[0]["state"], "RUNNING");

    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(env.status(&handle)["state"], "CANCELLED");
    assert_no_processes(&handle);

    let tail = tail.wait_with_output().unwrap();
    assert_eq!(tail.status.code(), Some(0), "{}", stderr(&tail));
    assert_eq!(stdout(&tail), "sh/0 first\nsh/0 second\n");

    let list = env.list();
    assert_eq!(list[0]["state"], "CANCELLED");
    assert!(list[0]["end_time"].as_f64().unwrap() >= list[0]["start_time"].as_f64().unwrap());
    let cancelled = env.run(&["list", "--state", "cancelled", "--json"]);
    assert!(stdout(&cancelled).contains(&handle));
    let succeeded = env.run(&["list", "--state", "SUCCEEDED", "--json"]);
    assert_eq!(stdout(&succeeded).trim(), "[]");
    // Cancelling a finished app is a no-op.
    assert_eq!(env.run(&["cancel", &handle]).status.code(), Some(0));
}

#[test]
fn list_is_newest_first_with_name_state_start_and_duration() {
    let env = Env::new();
    let first = env.detach(&["utils.echo", "--msg", "one"]);
    env.wait_state(&first, "SUCCEEDED", WITHIN);
    let second = env.detach(&["utils.sh", "--", "sh", "-c", "exit 2"]);
    env.wait_state(&second, "FAILED", WITHIN);
    let out = env.run(&["list"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("APP NAME") && lines[0].contains("DURATION"),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&second) && lines[1].contains(" sh ") && lines[1].contains("FAILED"),
        "{text}"
    );
    assert!(
        lines[2].starts_with(&first) && lines[2].contains("SUCCEEDED"),
        "{text}"
    );
    // Pruning.
    assert_eq!(env.run(&["delete", &first]).status.code(), Some(0));
    assert_eq!(env.apps(), 1);
}

fn retry_app(env: &Env, max_retries: u32, fail_times: u32) -> std::process::Output {
    write_exe(
        &env.cwd.join("flaky.sh"),
        &format!(
            "#!/bin/sh\nn=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count\n\
             echo \"attempt $n\"\n[ $n -gt {fail_times} ]\n"
        ),
    );
    std::fs::write(
        env.cwd.join("app.yaml"),
        format!(
            "name: flaky\nroles:\n- name: w\n  image: x\n  entrypoint: ./flaky.sh\n  \
             max_retries: {max_retries}\n  retry_policy: REPLICA\n"
        ),
    )
    .unwrap();
    env.run(&["run", "./app.yaml"])
}

#[test]
fn replica_failing_twice_then_succeeding_under_max_retries_2() {
    let env = Env::new();
    let out = retry_app(&env, 2, 2);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let s = env.status(&handle);
    assert_eq!(s["state"], "SUCCEEDED");
    assert_eq!(s["num_restarts"], 2);
    // Every attempt appends to the same logs.
    assert_eq!(
        stdout(&env.run(&["log", &handle])),
        "w/0 attempt 1\nw/0 attempt 2\nw/0 attempt 3\n"
    );
}

#[test]
fn exhausted_retries_fail_the_app() {
    let env = Env::new();
    let out = retry_app(&env, 1, 5);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let s = env.status(&handle);
    assert_eq!(s["state"], "FAILED");
    assert_eq!(s["num_restarts"], 1);
    assert_eq!(s["msg"], "w/0 exited with code 1");
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("count")).unwrap(),
        "2\n"
    );
}

/// Runs an app of roles a (2 replicas) and b (1 replica) where a/0 fails once, and returns how
/// many times each replica ran.
fn runs_under(policy: &str) -> (Vec<usize>, serde_json::Value) {
    let env = Env::new();
    // Each run appends to runs-<role>-<id>; a/0 fails its first run once the others have
    // started (and are still running).
    write_exe(
        &env.cwd.join("w.sh"),
        "#!/bin/sh\necho x >> runs-$1\nif [ $1 = a-0 ] && [ ! -e failed ]; then\n\
         while [ ! -e runs-a-1 ] || [ ! -e runs-b-0 ]; do sleep 0.01; done\n\
         touch failed; exit 1\nfi\nsleep 0.5\n",
    );
    let role = |name: &str, replicas: u32| {
        format!(
            "- name: {name}\n  image: x\n  entrypoint: ./w.sh\n  args: ['{name}-${{replica_id}}']\n  \
             num_replicas: {replicas}\n  max_retries: 1\n  retry_policy: {policy}\n"
        )
    };
    std::fs::write(
        env.cwd.join("app.yaml"),
        format!("name: policy\nroles:\n{}{}", role("a", 2), role("b", 1)),
    )
    .unwrap();
    let out = env.run(&["run", "./app.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{policy}: {}", stderr(&out));
    let runs = ["a-0", "a-1", "b-0"]
        .iter()
        .map(|r| {
            std::fs::read_to_string(env.cwd.join(format!("runs-{r}")))
                .unwrap()
                .lines()
                .count()
        })
        .collect();
    (runs, env.status(stdout(&out).trim()))
}

#[test]
fn retry_policies_restart_replica_role_or_application() {
    let (runs, status) = runs_under("REPLICA");
    assert_eq!(runs, [2, 1, 1], "REPLICA restarts only the failed replica");
    assert_eq!(status["num_restarts"], 1);
    let (runs, _) = runs_under("ROLE");
    assert_eq!(runs, [2, 2, 1], "ROLE restarts the failed replica's role");
    let (runs, status) = runs_under("APPLICATION");
    assert_eq!(runs, [2, 2, 2], "APPLICATION restarts every replica");
    assert_eq!(status["state"], "SUCCEEDED");
    assert_eq!(status["num_restarts"], 1);
}

#[test]
fn sigint_to_foreground_run_cancels_and_leaves_no_process() {
    let env = Env::new();
    let (mut child, handle) =
        env.spawn_run(&["utils.sh", "--", "sh", "-c", "sleep 300 & sleep 301"]);
    wait_processes(&handle, 2);
    signal(child.id(), "-INT");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(env.status(&handle)["state"], "CANCELLED");
    assert_no_processes(&handle);
}

#[test]
fn sigterm_to_foreground_run_cancels_too() {
    let env = Env::new();
    let (mut child, handle) = env.spawn_run(&["utils.sh", "--", "sleep", "300"]);
    wait_processes(&handle, 1);
    signal(child.id(), "-TERM");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(env.status(&handle)["state"], "CANCELLED");
    assert_no_processes(&handle);
}

#[test]
fn cancel_escalates_to_sigkill_for_processes_ignoring_sigterm() {
    let env = Env::new();
    // The replica (a shell) and both sleeps ignore SIGTERM; only the KILL after the grace
    // period stops them.
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: stubborn\nroles:\n- name: sh\n  image: x\n  entrypoint: sh\n  \
         args: ['-c', \"trap '' TERM; sleep 300 & sleep 301; wait\"]\n",
    )
    .unwrap();
    let handle = env.detach(&["./app.yaml"]);
    wait_processes(&handle, 3);
    let started = Instant::now();
    let out = env.run(&["cancel", &handle]);
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "SIGTERM was not ignored?"
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = env.status(&handle);
    assert_eq!(s["state"], "CANCELLED");
    assert_eq!(s["roles"][0]["replicas"][0]["state"], 6);
    assert_no_processes(&handle);
}

#[test]
fn sigkill_of_the_supervisor_kills_the_replicas_and_fails_the_app() {
    let env = Env::new();
    let handle = env.detach(&["utils.sh", "--", "sh", "-c", "sleep 300 & sleep 301"]);
    wait_processes(&handle, 2);
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    signal(supervisor, "-KILL");
    // Nobody asked for the status yet: the guard alone must clean up.
    assert_no_processes(&handle);
    let s = env.wait_state(&handle, "FAILED", WITHIN);
    let msg = s["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("supervisor (pid {supervisor}) died")),
        "{msg}"
    );
}

/// The pid of app `app_id`'s guard (`torchx __guard <app_id>`).
fn guard_of(app_id: &str) -> Option<u32> {
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|p| {
        let pid: u32 = p.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(p.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        (args.get(1) == Some(&&b"__guard"[..]) && args.get(2) == Some(&app_id.as_bytes()))
            .then_some(pid)
    })
}

/// A replica whose worker double-forks into a session of its own (as torchrun's workers and
/// daemons do): out of its process group, re-parented away from the replica.
const ESCAPING_REPLICA: &[&str] = &[
    "utils.sh",
    "--",
    "sh",
    "-c",
    "setsid sh -c 'sleep 300 >/dev/null 2>&1 &' </dev/null; sleep 301",
];
/// Its processes: utils.sh's shell, the `sh -c`, `sleep 301` and the daemon's `sleep 300`.
const ESCAPING_PROCESSES: usize = 4;

/// The app's cgroup (describe's metadata), which the escape tests need: where the machine gives
/// none they are skipped, loudly, and fail where CI promised one.
fn cgroup_or_skip(env: &Env, handle: &str, test: &str) -> Option<String> {
    let cgroup = env.metadata(handle, "cgroup");
    if cgroup.is_empty() {
        support::skip_engine("cgroup", test, "no writable cgroup v2 on this machine");
        env.run(&["cancel", handle]);
        return None;
    }
    assert!(Path::new(&cgroup).is_dir(), "{cgroup}");
    Some(cgroup)
}

#[test]
fn sigkill_of_the_supervisor_kills_workers_in_their_own_sessions_too() {
    let env = Env::new();
    let handle = env.detach(ESCAPING_REPLICA);
    wait_processes(&handle, ESCAPING_PROCESSES);
    let Some(cgroup) = cgroup_or_skip(&env, &handle, "sigkill_of_the_supervisor_kills_workers")
    else {
        return;
    };
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    signal(supervisor, "-KILL");
    // The guard alone, within 5 s, nobody asking.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_of(&handle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left: {:?}",
            processes_of(&handle)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = env.wait_state(&handle, "FAILED", WITHIN);
    let msg = s["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "supervisor (pid {supervisor}) died unexpectedly; its replicas were killed"
        )),
        "{msg}"
    );
    assert!(!msg.contains("could not be killed"), "{msg}");
    assert!(!Path::new(&cgroup).exists(), "{cgroup} was not removed");
}

/// A state directory shared by two hosts (an NFS home): a job of this host, read from another
/// (UTS and pid namespaces: named `torchx-host-b`, none of this host's pids visible), is shown
/// as recorded and never settled there by pids that mean nothing on that host; a cancel there
/// says where to cancel it.
#[test]
fn another_host_never_judges_this_hosts_jobs_by_pid() {
    let env = Env::new();
    let handle = env.detach(&["utils.sh", "sleep", "30"]);
    env.wait_state(&handle, "RUNNING", WITHIN);
    let from_b = |args: &str| {
        let exe = env!("CARGO_BIN_EXE_torchx");
        let script = format!("hostname torchx-host-b && exec {exe} {args}");
        // Its own pids too: this host's processes are not visible there at all.
        let argv = ["-u", "-p", "-f", "-m", "--mount-proc", "sh", "-c", &script];
        env.cmd_of(Path::new("unshare"), &argv).output().unwrap()
    };
    let probe = from_b("--help");
    if !probe.status.success() {
        support::skip_engine("namespaces", "another host", "unshare -u is refused");
        env.run(&["cancel", &handle]);
        return;
    }
    let status = from_b(&format!("status {handle} --json"));
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let s: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(s["state"], "RUNNING", "{s}");
    let cancel = from_b(&format!("cancel {handle}"));
    assert_ne!(cancel.status.code(), Some(0));
    assert!(
        stderr(&cancel).contains("runs on another host"),
        "{}",
        stderr(&cancel)
    );
    // Still running here, untouched.
    assert_eq!(env.status(&handle)["state"], "RUNNING");
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s: serde_json::Value =
        serde_json::from_slice(&from_b(&format!("status {handle} --json")).stdout).unwrap();
    assert_eq!(s["state"], "CANCELLED", "{s}");
}

/// `torchx run --detach ARGS` where no cgroup v2 is writable: in a private mount namespace
/// whose cgroup2 mount is read-only (the supervisor stays in it). `None` (said loudly, a
/// failure where the run promised namespaces) where `unshare -m` is refused.
fn detach_without_cgroups(env: &Env, args: &[&str]) -> Option<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let cgroup2: Vec<String> = mountinfo
        .lines()
        .filter(|l| {
            l.split(" - ")
                .nth(1)
                .is_some_and(|t| t.starts_with("cgroup2 "))
        })
        .filter_map(|l| l.split(' ').nth(4).map(String::from))
        .collect();
    let mut script = String::from("set -e\n");
    for m in &cgroup2 {
        script.push_str(&format!(
            "mount --bind {m} {m}\nmount -o remount,bind,ro {m}\n"
        ));
    }
    script.push_str("exec \"$@\"\n");
    let exe = env!("CARGO_BIN_EXE_torchx");
    let mut argv = vec![
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
        exe,
    ];
    argv.extend(["run", "--detach"]);
    argv.extend_from_slice(args);
    let out = env.cmd_of(Path::new("unshare"), &argv).output().unwrap();
    if !out.status.success() {
        support::skip_engine(
            "namespaces",
            "local_cwd without a cgroup",
            &format!(
                "unshare -m with a read-only cgroup2 fails: {}",
                stderr(&out)
            ),
        );
        return None;
    }
    Some(stdout(&out).trim().to_string())
}

/// Where no cgroup is writable, the supervisor keeps every process it tracks in a file: once it
/// is killed, its guard (or, with the guard dead too, `cancel`) kills them all, the daemon in a
/// session of its own included, and says so only when none is left.
#[test]
fn without_a_cgroup_a_dead_supervisors_processes_are_killed_from_its_record() {
    let env = Env::new();
    let Some(handle) = detach_without_cgroups(&env, ESCAPING_REPLICA) else {
        return;
    };
    wait_processes(&handle, ESCAPING_PROCESSES);
    assert_eq!(
        env.metadata(&handle, "cgroup"),
        "",
        "no cgroup was writable"
    );
    // The supervisor's tree walk (every second) has recorded the daemon.
    std::thread::sleep(Duration::from_millis(1500));
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    signal(supervisor, "-KILL");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_of(&handle).is_empty() {
        let left = processes_of(&handle);
        assert!(Instant::now() < deadline, "left: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = env.wait_state(&handle, "FAILED", WITHIN);
    let msg = s["msg"].as_str().unwrap();
    assert!(msg.contains("its replicas were killed"), "{msg}");
    assert!(!msg.contains("could not be killed"), "{msg}");

    // Supervisor and guard dead: `cancel` stops what is left.
    let handle = detach_without_cgroups(&env, ESCAPING_REPLICA).unwrap();
    wait_processes(&handle, ESCAPING_PROCESSES);
    std::thread::sleep(Duration::from_millis(1500));
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    signal(guard_of(app_id(&handle)).unwrap(), "-KILL");
    signal(supervisor, "-KILL");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        processes_of(&handle).len(),
        ESCAPING_PROCESSES,
        "nobody stopped them yet"
    );
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_processes(&handle);
}

/// With the guard killed too, the next reader (`status`, or `cancel`) stops everything.
#[test]
fn with_supervisor_and_guard_dead_status_and_cancel_stop_what_is_left() {
    let env = Env::new();
    let handle = env.detach(ESCAPING_REPLICA);
    wait_processes(&handle, ESCAPING_PROCESSES);
    let Some(cgroup) = cgroup_or_skip(&env, &handle, "with_supervisor_and_guard_dead") else {
        return;
    };
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    let guard = guard_of(app_id(&handle)).expect("the app's guard");
    signal(guard, "-KILL");
    signal(supervisor, "-KILL");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        processes_of(&handle).len(),
        ESCAPING_PROCESSES,
        "nobody stopped them yet"
    );
    let s = env.status(&handle);
    assert_eq!(s["state"], "FAILED");
    assert!(
        s["msg"]
            .as_str()
            .unwrap()
            .contains("its replicas were killed"),
        "{s}"
    );
    assert_no_processes(&handle);
    assert!(!Path::new(&cgroup).exists());

    // `cancel` as the first to look stops them just as well.
    let handle = env.detach(ESCAPING_REPLICA);
    wait_processes(&handle, ESCAPING_PROCESSES);
    let cgroup = env.metadata(&handle, "cgroup");
    let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
    signal(guard_of(app_id(&handle)).unwrap(), "-KILL");
    signal(supervisor, "-KILL");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(processes_of(&handle).len(), ESCAPING_PROCESSES);
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_processes(&handle);
    assert!(!Path::new(&cgroup).exists());
}

#[test]
fn hundred_concurrent_detached_runs_all_recorded_and_succeed() {
    let env = Env::new();
    let children: Vec<_> = (0..100)
        .map(|i| {
            env.cmd(&[
                "run",
                "--detach",
                "utils.echo",
                "--msg",
                &format!("job {i}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut handles = BTreeSet::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        handles.insert(stdout(&out).trim().to_string());
    }
    assert_eq!(handles.len(), 100);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = env.list();
        let listed: BTreeSet<String> = list
            .iter()
            .map(|a| a["app_handle"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(listed, handles);
        if list.iter().all(|a| a["state"] == "SUCCEEDED") {
            break;
        }
        assert!(Instant::now() < deadline, "not all succeeded: {list:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = env.run(&["log", handles.iter().next().unwrap()]);
    assert!(stdout(&out).starts_with("echo/0 job "), "{}", stdout(&out));
}

#[test]
fn submitters_killed_mid_submission_leave_a_readable_ledger_and_no_stuck_apps() {
    let env = Env::new();
    for i in 0..20u64 {
        let mut c = env
            .cmd(&["run", "--detach", "utils.sh", "--", "sleep", "0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // From before anything is recorded to after the supervisor started.
        std::thread::sleep(Duration::from_millis(i * 5));
        let _ = c.kill();
        let _ = c.wait();
    }
    // Whatever was recorded is readable and reaches a terminal state; the later kills came
    // after recording, so there is something to check.
    assert!(
        !env.list().is_empty(),
        "no submission got as far as the ledger"
    );
    let deadline = Instant::now() + WITHIN;
    loop {
        let list = env.list();
        let pending: Vec<_> = list
            .iter()
            .filter(|a| {
                !["SUCCEEDED", "FAILED", "CANCELLED"].contains(&a["state"].as_str().unwrap())
            })
            .collect();
        if pending.is_empty() {
            for a in &list {
                assert_no_processes(a["app_handle"].as_str().unwrap());
            }
            break;
        }
        assert!(Instant::now() < deadline, "stuck: {pending:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // And the ledger still takes new jobs.
    let out = env.run(&["run", "utils.echo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn replica_that_cannot_start_fails_the_submission_and_is_recorded() {
    let env = Env::new();
    let out = env.run(&["run", "./missing.yaml"]);
    assert_ne!(out.status.code(), Some(0));
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: nope\nroles:\n- name: a\n  image: x\n  entrypoint: sleep\n  args: ['300']\n\
         - name: b\n  image: x\n  entrypoint: /no/such/program\n",
    )
    .unwrap();
    // Pre-flight refuses it before anything is recorded...
    let out = env.run(&["run", "./app.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pre-flight"), "{}", stderr(&out));
    // ...and without it, the replica that cannot start fails the submission.
    let out = env.run(&["run", "--skip_preflight", "./app.yaml"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("b/0 could not start: local_cwd: cannot start `/no/such/program`"),
        "{}",
        stderr(&out)
    );
    let list = env.list();
    assert_eq!(list[0]["state"], "FAILED");
    // The replica that did start was stopped.
    assert_no_processes(list[0]["app_handle"].as_str().unwrap());
}

/// Replicas are started without waiting for each exec; a failure the pre-flight PATH search
/// cannot see (a file that is executable but no program) must still be reported, and programs
/// are found on the replica's PATH, in the cwd, and by relative path.
#[test]
fn exec_failures_are_reported_and_programs_are_found_like_execvp() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let bin = env.cwd.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, text) in [
        ("garbage", "\x7fELF not really\n"),
        ("hello", "#!/bin/sh\necho hi $1\n"),
    ] {
        std::fs::write(bin.join(name), text).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |entrypoint: &str, extra: &str| {
        let spec = format!(
            "name: p\nroles:\n- name: a\n  image: x\n  entrypoint: {entrypoint}\n  \
             args: [arg]\n{extra}"
        );
        std::fs::write(env.cwd.join("app.yaml"), spec).unwrap();
        env.run(&["run", "./app.yaml"])
    };
    let out = run("./bin/garbage", "");
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot start `./bin/garbage`: Exec format error"),
        "{}",
        stderr(&out)
    );
    // `bin` is not on PATH: not found, before anything is started.
    let out = run("hello", "");
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot start `hello`: No such file or directory"));
    // A relative path with a slash runs from the cwd; the role's PATH (prepended) finds `hello`.
    let out = run("./bin/hello", "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("a/0 hi arg"), "{}", stderr(&out));
    let out = run("hello", "  env: {PATH: bin}\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("a/0 hi arg"), "{}", stderr(&out));
}
#[test]
fn ddp_launches_torchrun_with_the_right_arguments() {
    let env = Env::new();
    // A stand-in torchrun in the cwd, which local_cwd puts on the replica's PATH.
    write_exe(
        &env.cwd.join("torchrun"),
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > torchrun.args\n\
         env | grep -E '^(TORCHX_RANK0_HOST|PET_LOG_DIR|TORCHELASTIC_ERROR_FILE)=' | sort > torchrun.env\n",
    );
    std::fs::write(env.cwd.join("x.py"), "print('hi')\n").unwrap();
    let out = env.run(&["run", "dist.ddp", "-j", "1x2", "--script", "x.py"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let args = std::fs::read_to_string(env.cwd.join("torchrun.args")).unwrap();
    assert_eq!(
        args,
        format!(
            "--rdzv_backend\nc10d\n--rdzv_endpoint\nlocalhost:0\n--rdzv_id\n{}\n--nnodes\n1\n\
             --nproc_per_node\n2\n--tee\n3\n--role\n\nx.py\n",
            app_id(&handle)
        )
    );
    let envs = std::fs::read_to_string(env.cwd.join("torchrun.env")).unwrap();
    assert!(envs.contains("TORCHX_RANK0_HOST=localhost\n"), "{envs}");
    assert!(
        envs.contains(&format!("/{}/x/0/error.json", app_id(&handle))),
        "{envs}"
    );
    assert!(processes_of(&handle).is_empty());
}

#[test]
fn ddp_with_real_torchrun_and_gloo_when_torch_is_importable() {
    let Some(path) = support::torch_path("ddp_with_real_torchrun_and_gloo") else {
        return;
    };
    let env = Env::new();
    // The group is destroyed before exit: gloo can abort a rank exiting with it alive.
    std::fs::write(
        env.cwd.join("x.py"),
        "import os, torch, torch.distributed as dist\n\
         dist.init_process_group('gloo')\n\
         t = torch.ones(1)\ndist.all_reduce(t)\n\
         open(f\"rank{dist.get_rank()}\", 'w').write(str(int(t.item())))\n\
         dist.destroy_process_group()\n",
    )
    .unwrap();
    let out = env
        .cmd(&["run", "dist.ddp", "-j", "1x2", "--script", "x.py"])
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for rank in 0..2 {
        let got = std::fs::read_to_string(env.cwd.join(format!("rank{rank}"))).unwrap();
        assert_eq!(got, "2", "rank {rank}");
    }
}

/// `torchx run --detach dist.ddp -j 1x2` of a trainer that joins the gloo group, says so in
/// `up<rank>` and sleeps; returns its handle once both ranks are up (their files removed, for
/// the next one).
fn detach_sleeping_ddp(env: &Env, path: &str) -> String {
    std::fs::write(
        env.cwd.join("sleeper.py"),
        "import time, torch.distributed as dist\ndist.init_process_group('gloo')\n\
         open(f'up{dist.get_rank()}', 'w').close()\ntime.sleep(600)\n",
    )
    .unwrap();
    let out = env
        .cmd(&[
            "run",
            "--detach",
            "dist.ddp",
            "-j",
            "1x2",
            "--script",
            "sleeper.py",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..2).any(|r| !env.cwd.join(format!("up{r}")).exists()) {
        assert!(Instant::now() < deadline, "the workers never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    for rank in 0..2 {
        std::fs::remove_file(env.cwd.join(format!("up{rank}"))).unwrap();
    }
    handle
}

/// `kill -9` of the supervisor of a real `dist.ddp -j 1x2` job (torchrun's workers in sessions
/// of their own): within 5 s nothing of it is left, and status says so truthfully; on a job
/// whose guard died too, `cancel` stops it all.
#[test]
fn sigkill_of_a_real_ddp_jobs_supervisor_leaves_no_worker() {
    let Some(path) = support::torch_path("sigkill of a real ddp job's supervisor") else {
        return;
    };
    let env = Env::new();
    for guard_too in [false, true] {
        let handle = detach_sleeping_ddp(&env, &path);
        // torchrun and its two workers (and whatever else they run).
        assert!(
            processes_of(&handle).len() >= 3,
            "{:?}",
            processes_of(&handle)
        );
        let supervisor: u32 = env.metadata(&handle, "supervisor_pid").parse().unwrap();
        if guard_too {
            signal(guard_of(app_id(&handle)).unwrap(), "-KILL");
        }
        signal(supervisor, "-KILL");
        if guard_too {
            std::thread::sleep(Duration::from_millis(300));
            assert!(!processes_of(&handle).is_empty(), "nobody stopped them yet");
            let out = env.run(&["cancel", &handle]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_no_processes(&handle);
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !processes_of(&handle).is_empty() {
            let left = processes_of(&handle);
            assert!(Instant::now() < deadline, "left: {left:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Shown FAILED at once; the guard records why once it has stopped everything.
        let deadline = Instant::now() + WITHIN;
        let s = loop {
            let s = env.status(&handle);
            if s["state"] == "FAILED" && s["msg"] != "" {
                break s;
            }
            assert!(Instant::now() < deadline, "{s}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let msg = s["msg"].as_str().unwrap();
        assert!(msg.contains("its replicas were killed"), "{s}");
        assert!(!msg.contains("could not be killed"), "{msg}");
    }
}

/// A DDP trainer (gloo, 2 ranks) that saves its step when signalled, agreeing on it with its
/// peer; then every rank asks for a requeue (TORCHX_REQUEUE_FILE) and exits 75. At its goal
/// each rank prints its final step.
const DDP_TRAINER: &str = r#"import os, signal, time, pathlib
# The handler first: the signal may come while torch imports on a loaded machine.
stop = False
def on_signal(signum, frame):
    global stop
    stop = True
signal.signal(signal.SIGUSR1, on_signal)
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
attempt = os.environ["TORCHX_ATTEMPT"]
ckpt = pathlib.Path(os.environ["TORCHX_CHECKPOINT_DIR"]) / "step"
step = int(ckpt.read_text()) if ckpt.exists() else 0
print(f"rank {rank} attempt {attempt} resumes at {step}", flush=True)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while step < int(os.environ["GOAL"]):
    flag = torch.tensor([1.0 if stop else 0.0])
    dist.all_reduce(flag)
    if flag.item() > 0:
        if rank == 0:
            ckpt.write_text(str(step))
        dist.barrier()
        dist.destroy_process_group()
        pathlib.Path(os.environ["TORCHX_REQUEUE_FILE"]).touch()
        raise SystemExit(75)
    loss = model(torch.randn(8, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    time.sleep(0.1)
print(f"rank {rank} final step {step} in attempt {attempt}", flush=True)
dist.destroy_process_group()
"#;

/// `dist.ddp -j 1x2` under a time limit with the checkpoint signal before it: torchrun forwards
/// the signal to its workers (`PET_SIGNALS_TO_HANDLE`, which dist.ddp gets under recovery), they
/// save and ask for a requeue, and a training that needs two attempts takes exactly two, each
/// rank's final step printed once. Attempt 0 is signalled at 40 s, short of the 400 steps of
/// 0.1 s; attempt 1 needs what attempt 0 lost to start-up, well under its own 40 s.
#[test]
fn ddp_with_real_torchrun_checkpoints_and_requeues() {
    let Some(path) = support::torch_path("ddp_with_real_torchrun_checkpoints_and_requeues") else {
        return;
    };
    let env = Env::new();
    std::fs::write(env.cwd.join("train.py"), DDP_TRAINER).unwrap();
    let out = env
        .cmd(&[
            "run",
            "--time_limit",
            "60s",
            "--checkpoint_signal",
            "USR1@20",
            "--max_retries",
            "0",
            "dist.ddp",
            "-j",
            "1x2",
            "--env",
            "GOAL=400",
            "--script",
            "train.py",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let log = stdout(&env.run(&["log", &handle]));
    for rank in 0..2 {
        let finals = log
            .matches(&format!("rank {rank} final step 400 in attempt 1"))
            .count();
        assert_eq!(finals, 1, "rank {rank}: {log}");
    }
    assert_eq!(log.matches("final step").count(), 2, "{log}");
    let status = env.status(&handle);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = support::attempts(&status);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "requeued", "{seen:?}");
    assert_eq!(seen[1], ("succeeded".to_string(), Some(0)), "{seen:?}");
    assert_no_processes(&handle);
}

/// `kill -9` of a real torchrun (as the out-of-memory killer would) fails the job and leaves
/// none of its workers, which live in sessions of their own; so does `torchx cancel`.
#[test]
fn ddp_with_real_torchrun_leaves_no_worker() {
    let Some(path) = support::torch_path("ddp_with_real_torchrun_leaves_no_worker") else {
        return;
    };
    let env = Env::new();
    for how in ["kill", "cancel"] {
        let handle = detach_sleeping_ddp(&env, &path);
        // Long enough for the supervisor to have seen the workers (it looks every second).
        std::thread::sleep(Duration::from_millis(1500));
        if how == "kill" {
            let pid = env.status(&handle)["roles"][0]["replicas"][0]["pid"].clone();
            let torchrun = support::processes_of(&handle)
                .into_iter()
                .find(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                        c.contains("torchrun") || c.contains("torch.distributed.run")
                    })
                })
                .unwrap_or_else(|| panic!("no torchrun among the job's processes ({pid})"));
            let ok = Command::new("kill")
                .args(["-KILL", &torchrun.to_string()])
                .status()
                .unwrap()
                .success();
            assert!(ok);
            let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
            assert_eq!(status["state"], "FAILED", "{status}");
        } else {
            let out = env.run(&["cancel", &handle]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        }
        assert_no_processes(&handle);
    }
}
