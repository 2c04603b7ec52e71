//! Trackers through the stock binary: a job launched with `--parent_run_id` records metadata
//! and artifacts (`torchx tracker add` inside the job) that `torchx tracker list` shows, and
//! data written by Python TorchX's fsspec backend (fixtures/tracker, see generate.py there) is
//! read as TorchX reads it and written byte for byte the same.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::{stderr, stdout, Env};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A tracker root (a copy of `fixture` if given) and the fsspec config file naming it.
fn tracker_root(env: &Env, fixture: Option<&str>) -> (PathBuf, PathBuf) {
    let root = env.home.join("tracker");
    match fixture {
        Some(f) => copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/tracker")
                .join(f),
            &root,
        ),
        None => std::fs::create_dir_all(&root).unwrap(),
    }
    let conf = env.home.join("fsspec.conf");
    std::fs::write(
        &conf,
        format!("# test\nprotocol=file\nroot_path={}\n", root.display()),
    )
    .unwrap();
    (root, conf)
}

/// `torchx args` with the fsspec tracker configured through the environment.
fn with_fsspec_env(env: &Env, conf: &Path, args: &[&str]) -> std::process::Output {
    env.cmd(args)
        .env("TORCHX_TRACKERS", "fsspec")
        .env("TORCHX_TRACKER_FSSPEC_CONFIG", conf)
        .output()
        .unwrap()
}

fn json_of(env: &Env, args: &[&str]) -> Value {
    let out = env.run(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn a_job_launched_with_a_parent_records_what_tracker_lists() {
    let env = Env::new();
    let (_, conf) = tracker_root(&env, None);
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        format!(
            "[torchx:tracker]\nfsspec =\n\n[tracker:fsspec]\nconfig = {}\n",
            conf.display()
        ),
    )
    .unwrap();
    let torchx = env!("CARGO_BIN_EXE_torchx");
    let script = format!(
        "{torchx} tracker add metadata lr=0.1 model=resnet && \
         {torchx} tracker add artifact --metadata step=3 checkpoint /ckpt/3.pt && \
         echo \"job=$TORCHX_JOB_ID parent=$TORCHX_PARENT_RUN_ID trackers=$TORCHX_TRACKERS\""
    );
    let parent = "local_cwd://torchx/prep-1";
    let out = env.run(&[
        "run",
        "--parent_run_id",
        parent,
        "--log",
        "utils.sh",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().trim().to_string();
    // `--log` streams the job's output to stderr, as TorchX does.
    assert!(
        stderr(&out).contains(&format!("job={handle} parent={parent} trackers=fsspec")),
        "the job sees its run id, parent and trackers: {}",
        stderr(&out)
    );

    let md = json_of(&env, &["tracker", "list", "metadata", &handle, "--json"]);
    assert_eq!(md, json!({"lr": 0.1, "model": "resnet"}));
    let arts = json_of(&env, &["tracker", "list", "artifacts", &handle, "--json"]);
    assert_eq!(
        arts,
        json!([{"name": "checkpoint", "path": "/ckpt/3.pt", "metadata": {"step": 3}}])
    );
    let jobs = json_of(
        &env,
        &[
            "tracker",
            "list",
            "jobs",
            "--parent-run-id",
            parent,
            "--json",
        ],
    );
    assert_eq!(jobs, json!([handle]));
    let lineage = json_of(&env, &["tracker", "list", "lineage", &handle, "--json"]);
    assert_eq!(
        lineage["sources"],
        json!([{"source_run_id": parent, "artifact_name": null}])
    );

    let out = env.run(&["tracker", "list", "metadata", &handle]);
    assert!(
        stdout(&out).starts_with("ID     VALUE\n-----  ------\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_launcher_records_the_parent_even_if_the_job_never_tracks() {
    let env = Env::new();
    let (_, conf) = tracker_root(&env, None);
    let run = |args: &[&str]| with_fsspec_env(&env, &conf, args);
    let out = run(&["run", "--parent_run_id", "exp://sweep/7", "utils.echo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().trim().to_string();
    let out = run(&["tracker", "list", "lineage", "exp://sweep/7", "--json"]);
    let lineage: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        lineage["descendants"],
        json!([{"source_run_id": handle, "artifact_name": null}])
    );
}

#[test]
fn python_torchx_fsspec_data_is_read_and_written_alike() {
    let env = Env::new();
    let (root, conf) = tracker_root(&env, Some("fsspec"));
    let run = |args: &[&str]| with_fsspec_env(&env, &conf, args);
    let json_run = |args: &[&str]| -> Value {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    };
    let (parent, child) = ("local_cwd://torchx/prep-b3xq", "slurm://torchx/1234");
    assert_eq!(
        json_run(&["tracker", "list", "jobs", "--json"]),
        json!([parent, child])
    );
    assert_eq!(
        json_run(&["tracker", "list", "metadata", child, "--json"]),
        json!({"lr": 0.1, "epochs": 4, "note": "naïve \"quoted\""}),
        "later records win"
    );
    assert_eq!(
        json_run(&["tracker", "list", "artifacts", child, "--json"]),
        json!([
            {"name": "log", "path": "/logs/train.log", "metadata": null},
            {"name": "model", "path": "/ckpt/model.pt", "metadata": {"step": 100, "tags": ["best", null]}},
        ])
    );
    assert_eq!(
        json_run(&[
            "tracker",
            "list",
            "artifacts",
            "--artifact",
            "model",
            child,
            "--json"
        ])
        .as_array()
        .unwrap()
        .len(),
        1
    );
    let lineage = json_run(&["tracker", "list", "lineage", child, "--json"]);
    assert_eq!(
        lineage["sources"],
        json!([
            {"source_run_id": parent, "artifact_name": null},
            {"source_run_id": "s3://bucket/tokenizer", "artifact_name": "vocab"},
        ])
    );
    assert_eq!(
        json_run(&[
            "tracker",
            "list",
            "jobs",
            "--parent-run-id",
            parent,
            "--json"
        ]),
        json!([child])
    );

    // Written like TorchX: the same record bytes, and the parent's descendants file appended.
    let out = run(&["tracker", "add", "metadata", "--run-id", child, "epochs=4"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md_dir = root.join("ONWHK4TNHIXS65DPOJRWQ6BPGEZDGNA=/metadata");
    let mut records: Vec<String> = std::fs::read_dir(&md_dir)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    records.sort();
    assert_eq!(
        records
            .iter()
            .filter(|r| *r == r#"{"metadata": {"epochs": 4}}"#)
            .count(),
        2
    );
    let out = run(&[
        "tracker",
        "add",
        "source",
        "--run-id",
        child,
        "--artifact",
        "dataset",
        parent,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let descendants = std::fs::read_to_string(
        root.join("NRXWGYLML5RXOZB2F4XXI33SMNUHQL3QOJSXALLCGN4HC===/descendants/ONWHK4TNHIXS65DPOJRWQ6BPGEZDGNA="),
    )
    .unwrap();
    assert_eq!(descendants, "\ndataset\n");
}

#[test]
fn tracker_errors_are_specific() {
    let env = Env::new();
    let out = env.run(&["tracker", "list", "jobs"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("No trackers configured"),
        "{}",
        stderr(&out)
    );

    let (_, conf) = tracker_root(&env, None);
    let run = |trackers: &str, args: &[&str]| {
        env.cmd(args)
            .env("TORCHX_TRACKERS", trackers)
            .env("TORCHX_TRACKER_FSSPEC_CONFIG", &conf)
            .env_remove("TORCHX_JOB_ID")
            .output()
            .unwrap()
    };
    let out = run("fsspec", &["tracker", "add", "metadata", "a=1"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("--run-id"), "{}", stderr(&out));
    let out = run(
        "fsspec",
        &["tracker", "add", "metadata", "--run-id", "r", "novalue"],
    );
    assert!(
        stderr(&out).contains("KEY=VALUE, got `novalue`"),
        "{}",
        stderr(&out)
    );
    let out = run("fsspek", &["tracker", "list", "jobs"]);
    assert!(
        stderr(&out).contains("Did you mean `fsspec`"),
        "{}",
        stderr(&out)
    );
    std::fs::write(&conf, "protocol=s3\nroot_path=bucket/x\n").unwrap();
    let out = run("fsspec", &["tracker", "list", "jobs"]);
    assert!(stderr(&out).contains("protocol `s3`"), "{}", stderr(&out));
}
