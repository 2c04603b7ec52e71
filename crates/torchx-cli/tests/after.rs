//! `torchx run --after HANDLE[:ok|:notok|:any]` on local_cwd, with real processes: the
//! dependent job is recorded at once, PENDING with a message naming what it waits for, and
//! its supervisor starts it only once its dependencies ended as required; a dependency that
//! ends otherwise cancels it without running; bad input is refused before anything is
//! recorded.

mod support;

use std::time::Duration;

use support::{stderr, stdout, Env};

/// (started, ended) of the first attempt of the app's first replica.
fn times(status: &serde_json::Value) -> (f64, f64) {
    let a = &status["roles"][0]["replicas"][0]["attempts"][0];
    (a["started"].as_f64().unwrap(), a["ended"].as_f64().unwrap())
}

#[test]
fn a_dependent_starts_only_after_its_dependency_ended() {
    let env = Env::new();
    let first = env.detach(&["utils.sh", "sleep", "1.5"]);
    let second = env.detach(&["--after", &first, "utils.sh", "true"]);
    let waiting = env.status(&second);
    assert_eq!(waiting["state"], "PENDING", "{waiting}");
    let msg = waiting["msg"].as_str().unwrap();
    assert!(msg.contains(&format!("waiting for {first}")), "{msg}");
    let done = env.wait_state_terminal(&second, Duration::from_secs(30));
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    let (_, first_ended) = times(&env.status(&first));
    let (second_started, _) = times(&done);
    assert!(
        second_started >= first_ended,
        "started at {second_started}, before its dependency ended at {first_ended}"
    );
    // `run` without --detach waits through the dependency too, then for the job.
    let out = env.run(&[
        "run",
        "--after",
        &second,
        "utils.echo",
        "--msg",
        "after both",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("after both"), "{}", stderr(&out));
}

#[test]
fn a_failed_dependency_cancels_ok_dependents_and_runs_the_others() {
    let env = Env::new();
    let failing = env.detach(&["utils.sh", "sh", "-c", "sleep 0.5; exit 3"]);
    let ok = env.detach(&["--after", &failing, "utils.sh", "true"]);
    let explicit_ok = env.detach(&["--after", &format!("{failing}:ok"), "utils.sh", "true"]);
    let notok = env.detach(&["--after", &format!("{failing}:notok"), "utils.sh", "true"]);
    let any = env.detach(&["--after", &format!("{failing}:any"), "utils.sh", "true"]);
    for h in [&ok, &explicit_ok] {
        let status = env.wait_state_terminal(h, Duration::from_secs(30));
        assert_eq!(status["state"], "CANCELLED", "{status}");
        let msg = status["msg"].as_str().unwrap();
        assert!(
            msg.contains(&format!(
                "not started: its dependency {failing} ended FAILED"
            )),
            "{msg}"
        );
        assert!(
            status["roles"][0]["replicas"][0]["attempts"]
                .as_array()
                .is_none_or(|a| a.is_empty()),
            "it never ran: {status}"
        );
    }
    for h in [&notok, &any] {
        let status = env.wait_state_terminal(h, Duration::from_secs(30));
        assert_eq!(status["state"], "SUCCEEDED", "{status}");
    }
    // Several dependencies: all must be satisfied.
    let both = env.detach(&["--after", &notok, "--after", &failing, "utils.sh", "true"]);
    let status = env.wait_state_terminal(&both, Duration::from_secs(30));
    assert_eq!(status["state"], "CANCELLED", "{status}");
}

#[test]
fn a_group_can_be_a_dependency_and_a_waiting_job_can_be_cancelled() {
    let env = Env::new();
    let group = env.detach(&["--array", "3", "utils.sh", "sleep", "0.5"]);
    let after_group = env.detach(&["--after", &group, "utils.sh", "true"]);
    let status = env.wait_state_terminal(&after_group, Duration::from_secs(30));
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let long = env.detach(&["utils.sh", "sleep", "60"]);
    let waiting = env.detach(&["--after", &long, "utils.sh", "true"]);
    let started = std::time::Instant::now();
    let out = env.run(&["cancel", &waiting]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(5));
    let status = env.status(&waiting);
    assert_eq!(status["state"], "CANCELLED", "{status}");
    assert_eq!(env.status(&long)["state"], "RUNNING");
    assert_eq!(env.run(&["cancel", &long]).status.code(), Some(0));
}

#[test]
fn bad_dependencies_are_refused_before_anything_is_recorded() {
    let env = Env::new();
    for (after, code, says) in [
        ("nope", 2, "--after `nope`: give a job's handle"),
        (
            "local_cwd://torchx/ghost-1",
            4,
            "local_cwd://torchx/ghost-1",
        ),
        (
            "local_cwd://torchx/ghost-1:notok",
            4,
            "an --after dependency",
        ),
    ] {
        let out = env.run(&["run", "--after", after, "utils.sh", "true"]);
        assert_eq!(out.status.code(), Some(code), "{after}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{after}: {}", stderr(&out));
        assert_eq!(env.apps(), 0, "{after}: nothing recorded");
    }
    // A scheduler that cannot hold a job back: a detached process holds it (the dry run says
    // so).
    let done = env.detach(&["utils.sh", "true"]);
    let out = env.run(&[
        "run",
        "--dryrun",
        "-s",
        "kubernetes",
        "--workspace",
        "",
        "--after",
        &done,
        "utils.sh",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("=== HELD: kubernetes cannot hold this job for"),
        "{}",
        stdout(&out)
    );
    // Slurm holds only Slurm jobs natively; a local job is held by the detached process.
    let out = env.run(&[
        "run",
        "--dryrun",
        "-s",
        "slurm",
        "--workspace",
        "",
        "--after",
        &done,
        "utils.sh",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("=== HELD: slurm cannot hold this job for"),
        "{}",
        stdout(&out)
    );
    assert_eq!(env.apps(), 1, "a dry run records nothing");
}
