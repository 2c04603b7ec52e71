//! Library registration through a custom binary (examples/custom-torchx.rs, built by `cargo
//! test`): its component, named resource, scheduler and tracker work through the standard CLI,
//! next to the builtins.

mod support;

use std::path::PathBuf;

use support::{stderr, stdout, Env};

fn custom(env: &Env, args: &[&str]) -> std::process::Output {
    let exe = std::env::current_exe().unwrap();
    let bin: PathBuf = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/custom-torchx");
    assert!(
        bin.exists(),
        "{} is not built (cargo test builds examples)",
        bin.display()
    );
    env.cmd_of(&bin, args).output().unwrap()
}

#[test]
fn registered_extensions_work_next_to_the_builtins() {
    let env = Env::new();
    let out = custom(&env, &["builtins"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("acme.hello  (acme)"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("utils.echo"),
        "builtins stay: {}",
        stdout(&out)
    );

    let out = custom(
        &env,
        &["run", "--dryrun", "--json", "acme.hello", "--who", "you"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dry: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let role = &dry["app"]["roles"][0];
    assert_eq!(role["args"][0], "hello you");
    assert_eq!(role["resource"]["memMB"], 4096, "{role}");

    // The registered tracker records the launch's parent; the registered scheduler runs it.
    let tracker_root = env.home.join("tracker");
    std::fs::create_dir_all(&tracker_root).unwrap();
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        format!(
            "[torchx:tracker]\nacme =\n\n[tracker:acme]\nconfig = {}\n",
            tracker_root.display()
        ),
    )
    .unwrap();
    let out = custom(
        &env,
        &[
            "run",
            "-s",
            "acme_local",
            "--parent_run_id",
            "sweep-1",
            "acme.hello",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().trim().to_string();
    assert!(handle.starts_with("acme_local://torchx/hello-"), "{handle}");
    let out = custom(&env, &["log", &handle]);
    assert!(stdout(&out).contains("hello world"), "{}", stdout(&out));
    let out = custom(
        &env,
        &[
            "tracker",
            "list",
            "jobs",
            "--parent-run-id",
            "sweep-1",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(&handle), "{}", stdout(&out));

    // The stock binary has none of it.
    let out = env.run(&["run", "--dryrun", "acme.hello"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}
