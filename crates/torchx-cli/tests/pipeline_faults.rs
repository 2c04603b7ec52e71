//! Pipelines under the faults of a cluster's login nodes, with real processes: a holder killed
//! with SIGKILL at each point of the submit protocol (`TORCHX_FAILPOINTS`), two hosts reading
//! one state directory (the second a UTS namespace with another host name, as on a shared NFS
//! home), an upstream job purged before its end was seen, and jobs seen over and then purged.
//! Every step is submitted exactly once.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{skip_engine, stderr, stdout, Env};

fn write(env: &Env, name: &str, text: &str) -> String {
    std::fs::write(env.cwd.join(name), text).unwrap();
    format!("./{name}")
}

/// A pipeline of `n` steps, two by two in parallel after the pair before, each appending its
/// name to the shared `ran` file once it runs.
fn ladder(n: usize) -> String {
    let mut text = String::from("name: ladder\nsteps:\n");
    for i in 0..n {
        text.push_str(&format!(
            "  - name: s{i}\n    component: utils.sh\n    args: [sh, -c, 'sleep 0.2; echo s{i} >> $TORCHX_PIPELINE_DIR/ran']\n"
        ));
        if i >= 2 {
            text.push_str(&format!("    after: [s{}]\n", i - 2));
        }
    }
    text
}

fn start(env: &Env, file: &str, extra_env: &[(&str, &str)]) -> String {
    let out = env
        .cmd(&["run", "--detach", file])
        .envs(extra_env.iter().copied())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

fn record_path(env: &Env) -> std::path::PathBuf {
    shared_dir(env).parent().unwrap().join("record.json")
}

fn shared_dir(env: &Env) -> std::path::PathBuf {
    std::fs::read_dir(env.state.join("pipelines"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("shared")
}

/// Polls the pipeline's status (which restarts a dead holder) until it ends.
fn wait_end(env: &Env, handle: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let s = env.status(handle);
        if !["RUNNING", "PENDING"].contains(&s["state"].as_str().unwrap()) {
            return s;
        }
        assert!(Instant::now() < deadline, "{handle} did not end: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Each step's name ran exactly once, and the pipeline's jobs are exactly its steps'.
fn assert_each_step_once(env: &Env, status: &serde_json::Value, n: usize) {
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let ran = std::fs::read_to_string(shared_dir(env).join("ran")).unwrap();
    let mut lines: Vec<&str> = ran.lines().collect();
    lines.sort_unstable();
    let mut want: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    want.sort_unstable();
    assert_eq!(lines, want, "each step ran exactly once");
    let handles: std::collections::BTreeSet<&str> = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles.len(), n, "one job per step: {status}");
}

/// The holder kills itself at each point of the submit protocol in turn (after it started a
/// step's submission, after it recorded it, after it told it to go, after it recorded the
/// outcome); each time the next `status` starts another, and no step runs twice or is lost.
#[test]
fn a_holder_killed_at_each_point_of_the_submit_protocol_submits_every_step_once() {
    let env = Env::new();
    let file = write(&env, "ladder.yaml", &ladder(4));
    let points = "pipeline.submit.spawned,pipeline.submit.recorded,pipeline.submit.told,\
                  pipeline.submit.settled";
    let handle = start(&env, &file, &[("TORCHX_FAILPOINTS", points)]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let done = loop {
        let s = env
            .cmd(&["status", &handle, "--json"])
            .env("TORCHX_FAILPOINTS", points)
            .output()
            .unwrap();
        let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
        if !["RUNNING", "PENDING"].contains(&s["state"].as_str().unwrap()) {
            break s;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for point in points.split(',') {
        assert!(
            env.state.join("failpoints").join(point.trim()).exists(),
            "the holder died at {point}"
        );
    }
    assert_each_step_once(&env, &done, 4);
}

/// A step's submission killed once it went on: before it submitted, the step fails saying its
/// submission ended unsaid and is not submitted again (its job could exist); after it
/// submitted but before it said so, likewise, and the job it submitted runs once. The
/// pipeline's other steps go on.
#[test]
fn a_submission_killed_after_it_went_on_is_never_submitted_again() {
    for (point, runs) in [("pipeline.step.going", 0), ("pipeline.step.submitted", 1)] {
        let env = Env::new();
        let file = write(
            &env,
            "two.yaml",
            "name: two\nsteps:\n  - name: a\n    component: utils.sh\n    args: [sh, -c, 'echo a >> $TORCHX_PIPELINE_DIR/ran']\n  - name: b\n    component: utils.sh\n    args: [sh, -c, 'sleep 0.3; echo b >> $TORCHX_PIPELINE_DIR/ran']\n    after: ['a:any']\n",
        );
        let handle = start(&env, &file, &[("TORCHX_FAILPOINTS", point)]);
        let done = wait_end(&env, &handle, Duration::from_secs(60));
        assert!(env.state.join("failpoints").join(point).exists(), "{point}");
        assert_eq!(done["state"], "FAILED", "{point}: {done}");
        assert_eq!(done["steps"][0]["state"], "FAILED", "{point}: {done}");
        let msg = done["steps"][0]["msg"].as_str().unwrap();
        assert!(
            msg.contains("its submission ended before it said what it submitted")
                && msg.contains("not submitted again"),
            "{point}: {msg}"
        );
        assert_eq!(done["steps"][1]["state"], "SUCCEEDED", "{point}: {done}");
        // The killed submission's job, if it was submitted, ended too.
        std::thread::sleep(Duration::from_millis(500));
        let ran = std::fs::read_to_string(shared_dir(&env).join("ran")).unwrap();
        let a = ran.lines().filter(|l| *l == "a").count();
        assert_eq!(a, runs, "{point}: {ran}");
    }
}

/// Whether `unshare -u` works here (root, or user namespaces).
fn uts_namespaces(test: &str) -> bool {
    let ok = Command::new("unshare")
        .args(["-u", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip_engine("namespaces", test, "unshare -u is refused (not root?)");
    }
    ok
}

/// A login node `host-b` over the same state directory: `torchx status` run in a UTS
/// namespace with that host name (the holders it starts run there too).
fn status_from_host_b(env: &Env, handle: &str) -> std::process::Output {
    let exe = env!("CARGO_BIN_EXE_torchx");
    let script = format!("hostname torchx-host-b && exec {exe} status {handle} --json");
    let mut cmd = env.cmd_of("unshare".as_ref(), &["-u", "sh", "-c", &script]);
    cmd.output().unwrap()
}

fn holder_pids(handle: &str) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-f", &format!("__pipeline {handle}$")])
        .output()
        .unwrap();
    stdout(&out).lines().map(|l| l.trim().to_string()).collect()
}

/// Two login nodes read one pipeline while its holders keep dying: every holder is judged by
/// its host (a holder on the other host by its lock, never by its pid), one holder works at a
/// time, and every step is submitted once.
#[test]
fn two_hosts_over_one_state_directory_submit_every_step_once() {
    if !uts_namespaces("two hosts over one state directory") {
        return;
    }
    let env = Env::new();
    let file = write(&env, "ladder.yaml", &ladder(6));
    let handle = start(&env, &file, &[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut kills = 0;
    let mut from_b = 0;
    let mut hosts = std::collections::BTreeSet::new();
    let done = loop {
        // Host B reads (and starts a holder there when none lives).
        let out = status_from_host_b(&env, &handle);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        from_b += 1;
        // Host A reads too.
        let s = env.status(&handle);
        if !["RUNNING", "PENDING"].contains(&s["state"].as_str().unwrap()) {
            break s;
        }
        let record = std::fs::read_to_string(record_path(&env)).unwrap_or_default();
        let record: serde_json::Value = serde_json::from_str(&record).unwrap_or_default();
        if let Some(host) = record["holder"]["host"]["name"].as_str() {
            hosts.insert(host.to_string());
        }
        // Every third round, whichever holder is at work dies.
        if from_b % 3 == 0 {
            for pid in holder_pids(&handle) {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                kills += 1;
            }
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(150));
    };
    assert!(kills > 0, "no holder was ever killed");
    assert!(
        hosts.contains("torchx-host-b") && hosts.len() == 2,
        "holders worked on both hosts: {hosts:?}"
    );
    assert_each_step_once(&env, &done, 6);
}

/// An upstream job purged from its scheduler before any holder saw it end: after the grace
/// period (`TORCHX_PIPELINE_LOST_AFTER`) the step is lost and what runs after it ends with that
/// reason, instead of waiting forever.
#[test]
fn a_purged_upstream_job_ends_its_downstream_steps_with_a_reason() {
    let env = Env::new();
    let file = write(
        &env,
        "purged.yaml",
        "name: purged\nsteps:\n  - name: a\n    component: utils.sh\n    args: [sh, -c, 'sleep 1']\n  \
         - name: b\n    component: utils.echo\n    after: [a]\n",
    );
    let grace = [("TORCHX_PIPELINE_LOST_AFTER", "2")];
    let handle = start(&env, &file, &grace);
    // Step a's job, then its holder killed before a ends.
    let deadline = Instant::now() + Duration::from_secs(30);
    let job = loop {
        let s = env.status(&handle);
        if let Some(h) = s["steps"][0]["handle"].as_str() {
            break h.to_string();
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for pid in holder_pids(&handle) {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
    }
    env.wait_state_terminal(&job, Duration::from_secs(30));
    let out = env.run(&["delete", &job]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let out = env
            .cmd(&["status", &handle, "--json"])
            .envs(grace)
            .output()
            .unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if !["RUNNING", "PENDING"].contains(&s["state"].as_str().unwrap()) {
            break s;
        }
        assert!(Instant::now() < deadline, "still waiting: {s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "not before the grace"
    );
    assert_eq!(done["state"], "FAILED", "{done}");
    let a = done["steps"][0]["msg"].as_str().unwrap();
    assert!(a.starts_with("lost: its scheduler has not known it"), "{a}");
    assert_eq!(done["steps"][1]["state"], "CANCELLED", "{done}");
    let b = done["steps"][1]["msg"].as_str().unwrap();
    assert!(b.contains("step a was lost"), "{b}");
}

/// What the holder saw end is kept in the record: once the pipeline's jobs are purged, its
/// status still says how each step ended.
#[test]
fn steps_seen_over_keep_their_end_once_their_jobs_are_purged() {
    let env = Env::new();
    let file = write(&env, "ladder.yaml", &ladder(2));
    let handle = start(&env, &file, &[]);
    let done = wait_end(&env, &handle, Duration::from_secs(60));
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    // The holder records each end it sees, then leaves.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let record = std::fs::read_to_string(record_path(&env)).unwrap_or_default();
        let record: serde_json::Value = serde_json::from_str(&record).unwrap_or_default();
        let ended = record["ended"].as_object().map_or(0, |e| e.len());
        if ended == 2 && record.get("holder").is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "{record}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for step in done["steps"].as_array().unwrap() {
        let out = env.run(&["delete", step["handle"].as_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let after = env.status(&handle);
    assert_eq!(after["state"], "SUCCEEDED", "{after}");
    for step in after["steps"].as_array().unwrap() {
        assert_eq!(step["state"], "SUCCEEDED", "{after}");
    }
}
