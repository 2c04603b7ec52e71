//! Pipelines (`torchx run ./pipe.yaml`) with real processes: steps run in order, each once
//! its dependencies ended as required, sharing `TORCHX_PIPELINE_DIR` and seeing their
//! upstream handles; bad files are refused before anything runs; the detached holder killed
//! with SIGKILL is replaced and submits nothing twice; cancel, rerun --failed, list and log
//! know pipeline handles. With the engines up: a pipeline local_cwd → slurm → local_docker,
//! and `--after` across schedulers held by the same holder.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{docker_up, slurm_up, stderr, stdout, Env};

fn write(env: &Env, name: &str, text: &str) -> String {
    std::fs::write(env.cwd.join(name), text).unwrap();
    format!("./{name}")
}

/// The handle a `torchx run --detach` of a pipeline printed.
fn start(env: &Env, file: &str) -> String {
    let out = env.run(&["run", "--detach", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(handle.starts_with("pipeline://torchx/"), "{handle}");
    // A pipeline this command does not wait for says so, and how to follow it.
    assert!(
        stderr(&out).contains(&format!("follow it with `torchx log {handle} --tail`")),
        "{}",
        stderr(&out)
    );
    handle
}

fn steps(status: &serde_json::Value) -> Vec<(String, String)> {
    status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// (started, ended) of the first attempt of the job's first replica.
fn times(env: &Env, handle: &str) -> (f64, f64) {
    let s = env.status(handle);
    let a = &s["roles"][0]["replicas"][0]["attempts"][0];
    (a["started"].as_f64().unwrap(), a["ended"].as_f64().unwrap())
}

const THREE: &str = "
name: three
steps:
  - name: prepare
    component: utils.sh
    args: [sh, -c, 'sleep 0.3; echo 41 > $TORCHX_PIPELINE_DIR/value']
  - name: train
    component: utils.sh
    args: [sh, -c, 'echo $(( $(cat $TORCHX_PIPELINE_DIR/value) + 1 )) > $TORCHX_PIPELINE_DIR/value; echo upstream=$TORCHX_UPSTREAM_PREPARE_HANDLE']
    after: [prepare]
  - name: evaluate
    component: utils.sh
    args: [sh, -c, 'echo value=$(cat $TORCHX_PIPELINE_DIR/value)']
    after: [train]
  - name: on-failure
    component: utils.echo
    args: [--msg, cleaning up]
    after: ['train:notok']
";

#[test]
fn three_steps_pass_a_value_through_the_pipeline_dir_in_order() {
    let env = Env::new();
    let file = write(&env, "pipe.yaml", THREE);
    // On local schedulers `run` waits, as for one job, and sums up at the end.
    let out = env.run(&["run", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(
        stderr(&out).contains(&format!("pipeline {handle}: SUCCEEDED")),
        "{}",
        stderr(&out)
    );
    let status = env.status(&handle);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    assert_eq!(
        steps(&status),
        [
            ("prepare".to_string(), "SUCCEEDED".to_string()),
            ("train".into(), "SUCCEEDED".into()),
            ("evaluate".into(), "SUCCEEDED".into()),
            ("on-failure".into(), "CANCELLED".into()),
        ]
    );
    let skipped = status["steps"][3]["msg"].as_str().unwrap();
    assert!(skipped.contains("step train ended SUCCEEDED"), "{skipped}");
    // Each step started only after the one before it ended.
    let handle_of = |i: usize| status["steps"][i]["handle"].as_str().unwrap().to_string();
    for i in 1..3 {
        let (_, before_ended) = times(&env, &handle_of(i - 1));
        let (started, _) = times(&env, &handle_of(i));
        assert!(
            started >= before_ended,
            "step {i} started before step {} ended",
            i - 1
        );
    }
    // The log: every step's lines, labelled with the step.
    let log = env.run(&["log", &handle]);
    assert_eq!(log.status.code(), Some(0), "{}", stderr(&log));
    let text = stdout(&log);
    assert!(text.contains("evaluate:sh/0 value=42"), "{text}");
    assert!(
        text.contains(&format!("train:sh/0 upstream={}", handle_of(0))),
        "{text}"
    );
    // `list`: one row for the pipeline, none for its steps.
    let list = env.list();
    let handles: Vec<&str> = list
        .iter()
        .map(|a| a["app_handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles, [handle.as_str()], "{list:?}");
}

#[test]
fn a_failed_step_cancels_its_ok_dependents_and_runs_its_notok_ones() {
    let env = Env::new();
    let text = THREE.replace("echo $(( $(cat", "exit 3; echo $(( $(cat");
    let file = write(&env, "pipe.yaml", &text);
    let out = env.run(&["run", &file]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(
        stderr(&out).contains(&format!("torchx rerun {handle} --failed")),
        "{}",
        stderr(&out)
    );
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(
        steps(&status),
        [
            ("prepare".to_string(), "SUCCEEDED".to_string()),
            ("train".into(), "FAILED".into()),
            ("evaluate".into(), "CANCELLED".into()),
            ("on-failure".into(), "SUCCEEDED".into()),
        ]
    );
    let why = status["steps"][2]["msg"].as_str().unwrap();
    assert!(
        why.contains("not started: step train ended FAILED"),
        "{why}"
    );

    // `rerun --failed`: the succeeded steps keep their outcome, the others run again.
    std::fs::write(env.cwd.join("pipe.yaml"), THREE).unwrap();
    let out = env.run(&["rerun", &handle, "--failed", "--wait"]);
    // The recorded step still fails: the rerun runs it (and only it) again.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rerun = stdout(&out).trim().to_string();
    let status = env.status(&rerun);
    assert_eq!(status["parent"], handle.as_str(), "{status}");
    assert_eq!(status["steps"][0]["state"], "SUCCEEDED");
    assert_eq!(
        status["steps"][0]["handle"],
        env.status(&handle)["steps"][0]["handle"]
    );
    assert_ne!(
        status["steps"][1]["handle"],
        env.status(&handle)["steps"][1]["handle"]
    );
}

#[test]
fn bad_pipelines_are_refused_before_anything_runs() {
    let env = Env::new();
    for (text, code, expected) in [
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo, after: [b]}\n  \
             - {name: b, component: utils.echo, after: [a]}\n",
            2,
            "cycle: a -> b -> a",
        ),
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo, after: [nope]}\n",
            2,
            "`nope`, which is not a step",
        ),
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo, after: ['a0:sometimes']}\n",
            2,
            "unknown condition `sometimes`",
        ),
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo}\n  \
             - {name: b, component: utils.ecoh, after: [a]}\n",
            4,
            "step `b` (local_cwd)",
        ),
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo, scheduler: nosuch}\n",
            4,
            "step `a` (nosuch)",
        ),
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo, cfg: {log_dri: x}}\n",
            3,
            "log_dri",
        ),
        (
            "name: p\nsteps:\n  - {name: a, component: utils.echo, scheduler: aws_batch}\n",
            2,
            "step `a` (aws_batch): step `a` runs on aws_batch, whose containers do not see this \
             machine's files: give it `pipeline_dir: <path on one of its mounts>`",
        ),
    ] {
        let file = write(&env, "bad.yaml", text);
        let out = env.run(&["run", &file]);
        assert_eq!(out.status.code(), Some(code), "{text}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{text}: {}", stderr(&out));
        let dry = env.run(&["run", "--dryrun", &file]);
        assert_eq!(dry.status.code(), Some(code), "{text}: {}", stderr(&dry));
    }
    assert_eq!(env.apps(), 0, "nothing was submitted");
    assert!(
        !env.state.join("pipelines").exists()
            || std::fs::read_dir(env.state.join("pipelines"))
                .unwrap()
                .next()
                .is_none(),
        "nothing was recorded"
    );
    // Job options belong to the steps.
    let file = write(&env, "pipe.yaml", THREE);
    let out = env.run(&["run", "--max_retries", "2", &file]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max_retries does not apply to a pipeline"));
}

#[test]
fn the_dry_run_shows_every_step_and_the_dag() {
    let env = Env::new();
    let file = write(&env, "pipe.yaml", THREE);
    let out = env.run(&["run", "--dryrun", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for expected in [
        "=== STEP prepare (local_cwd) ===",
        "=== STEP on-failure (local_cwd) ===",
        "=== PIPELINE three: 4 steps ===",
        "train (local_cwd) after prepare",
        "on-failure (local_cwd) after train:notok",
        "TORCHX_PIPELINE_DIR",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    let out = env.run(&["run", "--dryrun", "--json", &file]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["steps"][1]["after"][0], "prepare");
    assert_eq!(v["steps"][1]["dryrun"]["scheduler"], "local_cwd");
    assert_eq!(env.apps(), 0);
}

const SLOW: &str = "
name: slow
steps:
  - name: a
    component: utils.sh
    args: [sh, -c, 'sleep 1.5; echo a >> $TORCHX_PIPELINE_DIR/ran']
  - name: b
    component: utils.sh
    args: [sh, -c, 'sleep 1.5; echo b >> $TORCHX_PIPELINE_DIR/ran']
    after: [a]
  - name: c
    component: utils.sh
    args: [sh, -c, 'echo c >> $TORCHX_PIPELINE_DIR/ran']
    after: [b]
";

fn holder_pids(handle: &str) -> Vec<i32> {
    let out = Command::new("pgrep")
        .args(["-f", &format!("__pipeline {handle}$")])
        .output()
        .unwrap();
    stdout(&out)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[test]
fn a_holder_killed_mid_pipeline_is_replaced_and_submits_nothing_twice() {
    let env = Env::new();
    let file = write(&env, "slow.yaml", SLOW);
    let handle = start(&env, &file);
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(800));
        let pids = holder_pids(&handle);
        assert_eq!(pids.len(), 1, "round {round}: one holder: {pids:?}");
        // As a user, or the OOM killer, would.
        Command::new("kill")
            .args(["-KILL", &pids[0].to_string()])
            .status()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // The next command that reads the pipeline starts a holder again.
        let s = env.status(&handle);
        assert!(
            ["RUNNING", "PENDING"].contains(&s["state"].as_str().unwrap()),
            "{s}"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let done = loop {
        let s = env.status(&handle);
        if s["state"] != "RUNNING" && s["state"] != "PENDING" {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    let dir = std::fs::read_dir(env.state.join("pipelines"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let ran = std::fs::read_to_string(dir.join("shared/ran")).unwrap();
    assert_eq!(ran, "a\nb\nc\n", "each step ran exactly once");
    // Three jobs were submitted in all.
    let out = env.run(&["status", &handle, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let submitted: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["handle"].as_str())
        .collect();
    assert_eq!(submitted.len(), 3, "{v}");
}

#[test]
fn cancel_stops_the_running_step_and_the_waiting_ones() {
    let env = Env::new();
    let file = write(&env, "slow.yaml", SLOW);
    let handle = start(&env, &file);
    std::thread::sleep(Duration::from_millis(500));
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = env.status(&handle);
    assert_eq!(s["state"], "CANCELLED", "{s}");
    assert_eq!(
        steps(&s),
        [
            ("a".to_string(), "CANCELLED".to_string()),
            ("b".into(), "CANCELLED".into()),
            ("c".into(), "CANCELLED".into()),
        ]
    );
    assert!(s["steps"][1]["msg"]
        .as_str()
        .unwrap()
        .contains("cancelled before it started"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(holder_pids(&handle).is_empty(), "the holder left");
    let out = env.run(&["delete", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["status", &handle]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}

#[test]
fn a_job_waits_for_a_pipeline_with_after() {
    let env = Env::new();
    let file = write(&env, "slow.yaml", &SLOW.replace("sleep 1.5", "sleep 0.2"));
    let pipeline = start(&env, &file);
    let job = env.detach(&[
        "--after",
        &pipeline,
        "utils.echo",
        "--msg",
        "after the pipeline",
    ]);
    let s = env.wait_state_terminal(&job, Duration::from_secs(60));
    assert_eq!(s["state"], "SUCCEEDED", "{s}");
    assert_eq!(env.status(&pipeline)["state"], "SUCCEEDED");
}

#[test]
fn a_pipeline_runs_across_local_cwd_slurm_and_local_docker() {
    if !slurm_up("pipeline across schedulers") || !docker_up("pipeline across schedulers") {
        return;
    }
    let env = Env::new();
    let file = write(
        &env,
        "cross.yaml",
        "
name: cross
steps:
  - name: prepare
    component: utils.sh
    args: [sh, -c, 'echo 1 > $TORCHX_PIPELINE_DIR/value; echo prepare out; echo prepare err >&2']
  - name: train
    scheduler: slurm
    component: utils.sh
    args: [sh, -c, 'echo $(( $(cat $TORCHX_PIPELINE_DIR/value) + 1 )) > $TORCHX_PIPELINE_DIR/value; echo train out; echo train err >&2']
    after: [prepare]
  - name: evaluate
    scheduler: local_docker
    component: utils.sh
    args: [--image, busybox:local, sh, -c, 'echo $(( $(cat $TORCHX_PIPELINE_DIR/value) + 1 )) > $TORCHX_PIPELINE_DIR/value']
    workspace: ''
    after: [train]
",
    );
    let out = env.run(&["run", "--wait", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let s = env.status(&handle);
    assert_eq!(s["state"], "SUCCEEDED", "{s}");
    let on: Vec<&str> = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["handle"].as_str().unwrap().split("://").next().unwrap())
        .collect();
    assert_eq!(on, ["local_cwd", "slurm", "local_docker"]);
    let dir = std::fs::read_dir(env.state.join("pipelines"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let value = std::fs::read_to_string(dir.join("shared/value")).unwrap();
    assert_eq!(value.trim(), "3", "each step added one");
    // One default for the whole pipeline: every step's stdout and stderr, Slurm's (two files)
    // as local_cwd's (one combined log).
    let log = stdout(&env.run(&["log", &handle]));
    for line in [
        "prepare:sh/0 prepare out",
        "prepare:sh/0 prepare err",
        "train:sh/0 train out",
        "train:sh/0 train err",
    ] {
        assert!(log.contains(line), "{line}: {log}");
    }
}

#[test]
fn slurm_after_a_local_job_is_held_by_a_detached_process() {
    if !slurm_up("slurm --after local_cwd") {
        return;
    }
    let env = Env::new();
    let first = env.detach(&["utils.sh", "sleep", "2"]);
    let out = env.run(&[
        "run",
        "-s",
        "slurm",
        "--after",
        &first,
        "utils.echo",
        "--msg",
        "held",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a detached torchx process submits it"),
        "{}",
        stderr(&out)
    );
    let handle = stdout(&out).trim().to_string();
    let s = env.status(&handle);
    assert_eq!(s["state"], "PENDING", "{s}");
    let msg = s["steps"][0]["msg"].as_str().unwrap();
    assert!(msg.contains(&format!("waiting for {first}")), "{msg}");
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let done = loop {
        let s = env.status(&handle);
        if ["SUCCEEDED", "FAILED", "CANCELLED"].contains(&s["state"].as_str().unwrap()) {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    let job = done["steps"][0]["handle"].as_str().unwrap();
    assert!(job.starts_with("slurm://"), "{job}");
    // A failed local dependency: the Slurm job is never submitted.
    let failing = env.detach(&["utils.sh", "sh", "-c", "exit 2"]);
    let out = env.run(&["run", "-s", "slurm", "--after", &failing, "utils.echo"]);
    let handle = stdout(&out).trim().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let done = loop {
        let s = env.status(&handle);
        if s["state"] == "CANCELLED" {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(done["steps"][0]["handle"].is_null(), "{done}");
    let msg = done["steps"][0]["msg"].as_str().unwrap();
    assert!(msg.contains(&format!("{failing} ended FAILED")), "{msg}");
}
