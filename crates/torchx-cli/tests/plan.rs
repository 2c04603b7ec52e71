//! `torchx plan` and `torchx run -s auto:...`: seeded mistakes are caught before anything is
//! queued, each named with what to change; `auto` runs on the first scheduler whose plan is
//! ok and says why the others were skipped.

mod support;

use std::process::Command;

use support::{docker_up, slurm_up, stderr, stdout, Env};

fn plan_json(env: &Env, args: &[&str]) -> (i32, Vec<serde_json::Value>) {
    let mut full = vec!["plan", "--json"];
    full.extend_from_slice(args);
    let out = env.run(&full);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&out), stderr(&out)));
    (out.status.code().unwrap(), rows.as_array().unwrap().clone())
}

fn failed_checks(row: &serde_json::Value) -> Vec<String> {
    row["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["outcome"] == "fails")
        .map(|c| format!("{}: {} -> {}", c["check"], c["detail"], c["fix"]))
        .collect()
}

#[test]
fn local_cwd_plans_ok_and_names_a_missing_script() {
    let env = Env::new();
    let (code, rows) = plan_json(&env, &["-s", "local_cwd", "utils.echo", "--msg", "hi"]);
    assert_eq!(code, 0, "{rows:?}");
    assert_eq!(rows[0]["verdict"], "ok", "{rows:?}");
    assert_eq!(rows[0]["start"], "now");
    let (code, rows) = plan_json(&env, &["utils.python", "--script", "train.py"]);
    assert_eq!(code, 1, "{rows:?}");
    assert_eq!(rows[0]["verdict"], "fails");
    let failed = failed_checks(&rows[0]);
    assert!(
        failed[0].contains("script `train.py` does not exist"),
        "{failed:?}"
    );
    assert!(failed[0].contains("--skip_preflight"), "{failed:?}");
    // Text: one row per scheduler, the failed check and what to change.
    let out = env.run(&["plan", "utils.python", "--script", "train.py"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("local_cwd: fails"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("FAILS pre-flight"),
        "{}",
        stdout(&out)
    );
    // A typo in a run option is named with the nearest valid one.
    let (_, rows) = plan_json(
        &env,
        &["-s", "local_cwd", "-cfg", "log_dri=x", "utils.echo"],
    );
    let failed = failed_checks(&rows[0]);
    assert!(failed[0].contains("did you mean `log_dir`"), "{failed:?}");
    assert_eq!(env.apps(), 0, "plan submits nothing");
}

fn squeue_count() -> usize {
    let out = Command::new("squeue")
        .args(["--noheader", "--all"])
        .output()
        .unwrap();
    stdout(&out).lines().count()
}

#[test]
fn slurm_mistakes_are_caught_before_anything_is_queued() {
    if !slurm_up("plan on slurm") {
        return;
    }
    let env = Env::new();
    let queued = squeue_count();
    let (code, rows) = plan_json(
        &env,
        &[
            "-s",
            "slurm,local_cwd",
            "-cfg",
            "slurm.partition=nosuch",
            "utils.echo",
        ],
    );
    assert_eq!(code, 0, "local_cwd is ok: {rows:?}");
    assert_eq!(rows[0]["verdict"], "fails");
    let failed = failed_checks(&rows[0]);
    assert!(failed[0].contains("partition"), "{failed:?}");
    assert_eq!(rows[1]["verdict"], "ok");
    // A node too small for the request.
    std::fs::write(
        env.cwd.join("big.yaml"),
        "name: big\nroles:\n- name: t\n  image: x\n  entrypoint: 'true'\n  \
         resource: {cpu: 64, gpu: 0, memMB: 1024}\n",
    )
    .unwrap();
    let (code, rows) = plan_json(&env, &["-s", "slurm", "./big.yaml"]);
    assert_eq!(code, 1, "{rows:?}");
    let failed = failed_checks(&rows[0]);
    assert!(
        failed[0].contains("node configuration is not available"),
        "{failed:?}"
    );
    assert!(failed[0].contains("largest node"), "{failed:?}");
    // An ok plan says when the job would start.
    let (code, rows) = plan_json(&env, &["-s", "slurm", "utils.echo"]);
    assert_eq!(code, 0, "{rows:?}");
    assert!(
        rows[0]["start"].as_str().unwrap().ends_with('Z'),
        "{rows:?}"
    );
    assert_eq!(squeue_count(), queued, "plan queued nothing");
}

#[test]
fn auto_runs_on_the_first_scheduler_that_can_and_says_why() {
    if !slurm_up("run -s auto") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "auto:slurm,local_cwd",
        "-cfg",
        "slurm.partition=nosuch",
        "utils.echo",
        "--msg",
        "ran here",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("local_cwd://"), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("skipped slurm (fails: sbatch --test-only"),
        "{err}"
    );
    assert!(err.contains("running on local_cwd"), "{err}");
    assert!(err.contains("ran here"), "{err}");
    // Nothing can run it: a clear error, nothing submitted.
    let out = env.run(&[
        "run",
        "-s",
        "auto:slurm",
        "-cfg",
        "partition=nosuch",
        "utils.echo",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no scheduler can run this job"),
        "{}",
        stderr(&out)
    );
}

/// local_docker: an image on the engine passes; one not on the engine is looked for in its
/// registry (the test registry, through the engine): there it passes (pulled at start), a tag
/// never pushed fails.
#[test]
fn images_are_looked_for_on_the_engine_then_in_their_registry() {
    let Some(registries) = support::registries_up("plan on local_docker") else {
        return;
    };
    let env = Env::new();
    let plan = |image: &str| {
        plan_json(
            &env,
            &[
                "-s",
                "local_docker",
                "--workspace",
                "",
                "utils.sh",
                "--image",
                image,
                "true",
            ],
        )
    };
    let (code, rows) = plan("busybox:local");
    assert_eq!(code, 0, "{rows:?}");
    assert!(
        rows[0]["checks"].to_string().contains("on the engine"),
        "{rows:?}"
    );
    let pushed = format!("{}/torchx-plan-{}:ok", registries.open, std::process::id());
    for args in [
        vec!["tag", "busybox:local", pushed.as_str()],
        vec!["push", pushed.as_str()],
        vec!["rmi", pushed.as_str()],
    ] {
        let out = support::docker(None, &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let (code, rows) = plan(&pushed);
    assert_eq!(code, 0, "{rows:?}");
    assert!(
        rows[0]["checks"].to_string().contains("in its registry"),
        "{rows:?}"
    );
    let never = format!("{}/torchx-never-pushed:nope", registries.open);
    let (code, rows) = plan(&never);
    assert_eq!(code, 1, "{rows:?}");
    let failed = failed_checks(&rows[0]);
    assert!(failed[0].contains(&format!("image {never}")), "{failed:?}");
    assert!(
        failed[0].contains("neither on the engine nor in its registry"),
        "{failed:?}"
    );
}

/// Cancels the blocker jobs when dropped, even if the test fails.
struct Blockers(String);

impl Drop for Blockers {
    fn drop(&mut self) {
        let _ = Command::new("scancel").args(["-n", &self.0]).status();
    }
}

#[test]
fn failover_moves_a_held_slurm_job_to_local_cwd_exactly_once() {
    if !slurm_up("run -s auto --failover_after") {
        return;
    }
    let env = Env::new();
    // Every node busy, so the job cannot start on Slurm before it is held.
    let blockers = block_every_node(&format!("torchx-blocker-{}", std::process::id()));
    let handle = run_with_failover(&env, "5s");
    assert!(handle.starts_with("pipeline://"), "{handle}");
    // Its Slurm job, held as an operator would.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let slurm_job = loop {
        let s = env.status(&handle);
        if let Some(h) = s["steps"][0]["handle"].as_str() {
            break h.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(slurm_job.starts_with("slurm://"), "{slurm_job}");
    let id = slurm_job.rsplit('/').next().unwrap();
    let held = Command::new("scontrol")
        .args(["hold", id])
        .output()
        .unwrap();
    assert!(held.status.success(), "{}", stderr(&held));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let done = loop {
        let s = env.status(&handle);
        if s["state"] == "SUCCEEDED" || s["state"] == "FAILED" {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    drop(blockers);
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    let step = &done["steps"][0];
    assert!(
        step["handle"].as_str().unwrap().starts_with("local_cwd://"),
        "{done}"
    );
    let msg = step["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("moved here after 5s pending on {slurm_job}")),
        "{msg}"
    );
    assert!(!msg.contains("then"), "moved exactly once: {msg}");
    assert_eq!(env.status(&slurm_job)["state"], "CANCELLED");
    let ran = std::fs::read_to_string(env.cwd.join("ran.txt")).unwrap();
    assert_eq!(ran.lines().count(), 1, "one copy ran: {ran}");
    assert!(ran.contains("local_cwd://"), "{ran}");
}

/// `torchx run -s auto:slurm,local_cwd --failover_after AFTER --detach` of a job that appends
/// where it ran to `ran.txt`; the handle (a pipeline's).
fn run_with_failover(env: &Env, after: &str) -> String {
    let out = env.run(&[
        "run",
        "-s",
        "auto:slurm,local_cwd",
        "--failover_after",
        after,
        "--detach",
        "utils.sh",
        "sh",
        "-c",
        "echo ran on $TORCHX_JOB_ID >> ran.txt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// Fills every node of the Slurm cluster with a job named `name` (cancelled on drop).
fn block_every_node(name: &str) -> Blockers {
    let blockers = Blockers(name.to_string());
    for _ in 0..4 {
        let out = Command::new("sbatch")
            .args(["-N1", "--exclusive", "-o", "/dev/null", "-J", name])
            .args(["--wrap", "sleep 120"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    blockers
}

/// When Slurm started job `id`, if it did (sacct's `Start` is `Unknown`/`None` before).
fn slurm_started(id: &str) -> Option<String> {
    let out = Command::new("sacct")
        .args(["-n", "-X", "-P", "-j", id, "-o", "Start"])
        .output()
        .unwrap();
    let start = stdout(&out).trim().to_string();
    (!start.is_empty() && start != "Unknown" && start != "None").then_some(start)
}

/// A Slurm job whose nodes free up at the very moment its failover moves it (the blockers
/// cancelled a little before, at, and a little after the limit): each time the step runs
/// exactly once, and a job that started on Slurm stays there (the holder holds it before it
/// cancels, and Slurm refuses to hold a job that started).
#[test]
fn failover_never_moves_a_slurm_job_that_started_at_the_moment_of_the_move() {
    if !slurm_up("failover race") {
        return;
    }
    for (trial, offset_ms) in [(0, 3000u64), (1, 3300), (2, 3600), (3, 3900)] {
        let env = Env::new();
        let name = format!("torchx-race-{}-{trial}", std::process::id());
        let blockers = block_every_node(&name);
        let submitted = std::time::Instant::now();
        let handle = run_with_failover(&env, "3s");
        let wait = std::time::Duration::from_millis(offset_ms).saturating_sub(submitted.elapsed());
        std::thread::sleep(wait);
        drop(blockers);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        let done = loop {
            let s = env.status(&handle);
            if s["state"] == "SUCCEEDED" || s["state"] == "FAILED" || s["state"] == "CANCELLED" {
                break s;
            }
            assert!(std::time::Instant::now() < deadline, "trial {trial}: {s}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        let record = std::fs::read_dir(env.state.join("pipelines"))
            .unwrap()
            .flatten()
            .map(|d| std::fs::read_to_string(d.path().join("record.json")).unwrap_or_default())
            .collect::<String>();
        assert_eq!(
            done["state"], "SUCCEEDED",
            "trial {trial}: {done}\n{record}"
        );
        let ran = std::fs::read_to_string(env.cwd.join("ran.txt")).unwrap_or_default();
        assert_eq!(ran.lines().count(), 1, "trial {trial}: one copy ran: {ran}");
        let step = &done["steps"][0];
        let final_job = step["handle"].as_str().unwrap();
        let msg = step["msg"].as_str().unwrap_or_default();
        if final_job.starts_with("slurm://") {
            assert!(ran.contains("slurm://"), "trial {trial}: {ran}");
            assert!(!msg.contains("moved here"), "trial {trial}: {msg}");
        } else {
            // Moved: its Slurm job was cancelled before it ever started.
            let moved_from = msg
                .split("pending on ")
                .nth(1)
                .and_then(|r| r.split([';', ',']).next())
                .unwrap_or_else(|| panic!("trial {trial}: {msg}"));
            let id = moved_from.trim().rsplit('/').next().unwrap();
            assert_eq!(
                slurm_started(id),
                None,
                "trial {trial}: {moved_from} had started"
            );
            assert!(ran.contains("local_cwd://"), "trial {trial}: {ran}");
        }
        eprintln!("trial {trial} (+{offset_ms} ms): ended on {final_job}");
    }
}

/// A workspace is built by the plan (never pushed): one whose Dockerfile fails fails the plan
/// with the build's error; a good one passes with the image it would run.
#[test]
fn the_workspace_builds_without_being_pushed() {
    if !docker_up("plan a workspace") {
        return;
    }
    let env = Env::new();
    let ws = env.cwd.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("train.py"), "print('hi')\n").unwrap();
    let plan = |env: &Env| {
        plan_json(
            env,
            &[
                "-s",
                "local_docker",
                "--workspace",
                ws.to_str().unwrap(),
                "utils.sh",
                "--image",
                "busybox:local",
                "cat",
                "train.py",
            ],
        )
    };
    let (code, rows) = plan(&env);
    assert_eq!(code, 0, "{rows:?}");
    assert!(
        rows[0]["checks"].to_string().contains("builds: "),
        "{rows:?}"
    );
    std::fs::write(
        ws.join("Dockerfile.torchx"),
        "FROM busybox:local\nRUN exit 3\n",
    )
    .unwrap();
    let (code, rows) = plan(&env);
    assert_eq!(code, 1, "{rows:?}");
    let failed = failed_checks(&rows[0]);
    assert!(failed[0].contains("does not build"), "{failed:?}");
}
