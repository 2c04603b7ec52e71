//! Scheduler plugins: `torchx-scheduler-<name>` programs speaking the JSON-over-stdio protocol
//! (docs/scheduler-plugins.md). The example plugin (examples/torchx-scheduler-subprocess.rs,
//! built by `cargo test`) runs the conformance suite through the protocol and the stock binary
//! end to end; broken plugins give errors that name them, and never hang.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use torchx::config::TorchxConfig;
use torchx::scheduler::{Registry, Scheduler};
use torchx::schedulers::PluginScheduler;
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

use support::{stderr, stdout, Env};

const EXAMPLE: &str = "torchx-scheduler-subprocess";

/// target/<profile>/examples, next to this test's target/<profile>/deps.
fn examples_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    assert!(
        dir.join(EXAMPLE).exists(),
        "{EXAMPLE} is not built in {} (cargo test builds examples)",
        dir.display()
    );
    dir
}

fn path_with(dir: &std::path::Path) -> String {
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap())
}

#[tokio::test]
async fn example_plugin_passes_the_conformance_suite() {
    let root = tempfile::tempdir().unwrap();
    // The plugin reads its state root from the environment of each call.
    std::env::set_var("TORCHX_SUBPROCESS_ROOT", root.path());
    let program = examples_dir().join(EXAMPLE);
    let mut registry = Registry::empty();
    registry
        .register("subprocess", "example plugin", move || {
            let s: Arc<dyn Scheduler> = Arc::new(PluginScheduler::connect("subprocess", &program)?);
            Ok(s)
        })
        .unwrap();
    let runner = Runner::new(registry, TorchxConfig::default());
    let opts = Conformance::new("ignored");
    conformance(&runner, "subprocess", &opts).await;
}

#[test]
fn example_plugin_through_the_stock_binary() {
    let env = Env::new();
    let root = tempfile::tempdir().unwrap();
    let path = path_with(&examples_dir());
    let run = |args: &[&str]| {
        env.cmd(args)
            .env("PATH", &path)
            .env("TORCHX_SUBPROCESS_ROOT", root.path())
            .output()
            .unwrap()
    };

    let out = run(&["runopts", "subprocess"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("env"), "{}", stdout(&out));

    let out = run(&[
        "run",
        "-s",
        "subprocess",
        "--dryrun",
        "utils.echo",
        "--msg",
        "hi ${replica_id}",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(r#"echo/0: ["echo", "hi 0"]"#),
        "{}",
        stdout(&out)
    );

    let out = run(&[
        "run",
        "-s",
        "subprocess",
        "-cfg",
        "env=GREETING:bonjour",
        "--wait",
        "utils.sh",
        "--num_replicas",
        "2",
        "sh",
        "-c",
        "echo $GREETING ${replica_id}",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().trim().to_string();
    assert!(handle.starts_with("subprocess://torchx/sh-"), "{handle}");

    let out = run(&["status", &handle, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(status["state"], "SUCCEEDED", "{status}");

    let out = run(&["log", &format!("{handle}/sh/1")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("bonjour 1"), "{}", stdout(&out));

    let out = run(&["list", "-s", "subprocess", "--json"]);
    assert!(stdout(&out).contains(&handle), "{}", stdout(&out));

    // Unknown scheduler names mention the plugin convention.
    let out = run(&["run", "-s", "subprocesss", "utils.echo"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("Did you mean `subprocess`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("torchx-scheduler-subprocesss"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn broken_plugins_fail_clearly_and_never_hang() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = [
        ("notjson", "#!/bin/sh\necho 'Traceback: oops'\n", "not JSON"),
        ("crash", "#!/bin/sh\necho 'segfault in plugin' >&2\nexit 3\n", "exit code 3"),
        (
            "future",
            "#!/bin/sh\necho '{\"protocol\": 99, \"ok\": {}}'\n",
            "protocol version 99",
        ),
        ("hang", "#!/bin/sh\nsleep 600\n", "no answer within 1s"),
        (
            "badopts",
            "#!/bin/sh\necho '{\"protocol\":1,\"ok\":{\"run_opts\":[{\"name\":\"n\",\"type\":\"tuple\"}]}}'\n",
            "unknown type `tuple`",
        ),
    ];
    for (name, body, _) in &plugins {
        let p = dir.path().join(format!("torchx-scheduler-{name}"));
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let env = Env::new();
    let path = path_with(dir.path());
    for (name, _, expected) in &plugins {
        let out = env
            .cmd(&["run", "-s", name, "utils.echo"])
            .env("PATH", &path)
            .env("TORCHX_PLUGIN_TIMEOUT", "1")
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{name}: {err}");
        assert!(
            err.contains(&format!("torchx-scheduler-{name}")) && err.contains(expected),
            "{name}: expected the plugin's path and `{expected}` in: {err}"
        );
    }
    let out = env
        .cmd(&["run", "-s", "crash", "utils.echo"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("segfault in plugin"),
        "its stderr is quoted: {}",
        stderr(&out)
    );
    // A broken plugin does not break listings of every scheduler.
    let out = env
        .cmd(&["runopts"])
        .env("PATH", &path)
        .env("TORCHX_PLUGIN_TIMEOUT", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("local_cwd:"));
}

#[test]
fn plugins_never_replace_builtin_schedulers() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("torchx-scheduler-local_cwd");
    std::fs::write(&p, "#!/bin/sh\necho hijacked >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = Env::new();
    let out = env
        .cmd(&["run", "--dryrun", "-s", "local_cwd", "utils.echo"])
        .env("PATH", path_with(dir.path()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("hijacked"));
}

/// A Python scheduler (the example package's `example_subprocess` entry point, hosted by its
/// interpreter over the protocol) passes the conformance suite. The interpreter is
/// `$TORCHX_TEST_PYTHON`, which scripts/test.sh sets to the venv it installs the package and
/// the example plugin into.
#[tokio::test]
async fn python_scheduler_passes_the_conformance_suite() {
    let test = "python_scheduler_passes_the_conformance_suite";
    let Some(python) = std::env::var_os("TORCHX_TEST_PYTHON") else {
        support::skip_engine(
            "python",
            test,
            "$TORCHX_TEST_PYTHON names no Python with torchx and the example plugin installed",
        );
        return;
    };
    let root = tempfile::tempdir().unwrap();
    std::env::set_var("TORCHX_PYTHON", &python);
    std::env::set_var("TORCHX_EXAMPLE_DIR", root.path());
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut opts = Conformance::new("ignored");
    // TorchX's `Scheduler._validate` wants a resource on every role.
    opts.resource = Some(torchx::specs::Resource::new(1, 0, 64));
    conformance(&runner, "example_subprocess", &opts).await;
}
