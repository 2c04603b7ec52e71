//! The Runner never stalls the executor it is awaited on: with a scheduler plugin whose start
//! hangs and a Python component whose interpreter hangs, every other public call of the same
//! Runner, on the same current-thread runtime, still answers. Each hanging program waits for a
//! release file that is written only after all those calls answered, and records whether it
//! was released or gave up (after 30 s): a Runner that blocked its executor on either would
//! keep the other calls from answering until the programs gave up.

use std::path::Path;
use std::time::Duration;

use torchx::config::TorchxConfig;
use torchx::runner::{ComponentOutcome, RunArgs};
use torchx::scheduler::{LogQuery, Registry};
use torchx::specs::AppState;
use torchx::Runner;

/// A program `bin/<name>` that waits for `dir/release` (at most 30 s), then appends how it
/// ended to `dir/ended.<name>` and fails.
fn hanging_program(bin: &Path, dir: &Path, name: &str) -> std::path::PathBuf {
    let path = bin.join(name);
    let d = dir.display();
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n\
             i=0\n\
             while [ ! -e '{d}/release' ]; do\n\
             \x20 i=$((i+1))\n\
             \x20 if [ $i -gt 600 ]; then echo gave-up >>'{d}/ended.{name}'; exit 3; fi\n\
             \x20 sleep 0.05\n\
             done\n\
             echo released >>'{d}/ended.{name}'\n\
             exit 3\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Every public call the test makes besides the hanging ones, in the order a user would.
async fn everything_else(runner: &Runner) {
    let cfg = runner.cfg_from_str("local_cwd", "").await.unwrap().0;
    let run = RunArgs::default();
    let dry = runner
        .dryrun_component(
            "utils.echo",
            &args(&["--msg", "dry"]),
            "local_cwd",
            &cfg,
            &run,
        )
        .await
        .unwrap();
    assert!(matches!(dry, ComponentOutcome::Done(_)));
    let ComponentOutcome::Done(handle) = runner
        .run_component(
            "utils.echo",
            &args(&["--msg", "hello"]),
            "local_cwd",
            &cfg,
            &run,
        )
        .await
        .unwrap()
    else {
        panic!("help instead of a job");
    };
    let status = runner
        .wait(
            &handle,
            Duration::from_millis(50),
            Some(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.state, AppState::Succeeded, "{status:?}");
    let app = runner.describe(&handle).await.unwrap().unwrap();
    let role = app.roles[0].name.clone();
    let mut lines = runner
        .log_lines(&handle, &role, 0, &LogQuery::default())
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    assert!(seen.iter().any(|l| l.contains("hello")), "{seen:?}");
    let ComponentOutcome::Done(sleeper) = runner
        .run_component("utils.sh", &args(&["sleep", "60"]), "local_cwd", &cfg, &run)
        .await
        .unwrap()
    else {
        panic!("help instead of a job");
    };
    runner.cancel(&sleeper).await.unwrap();
    let listed = runner.list("local_cwd").await.unwrap();
    assert!(listed.iter().any(|a| a.app_handle == handle), "{listed:?}");
    runner.delete(&handle).await.unwrap();
    assert!(runner.status(&handle).await.unwrap().is_none());
}

#[test]
fn a_hanging_plugin_or_interpreter_stalls_no_other_call() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    hanging_program(&bin, dir, "torchx-scheduler-hangs");
    let python = hanging_program(&bin, dir, "python3");
    std::fs::write(dir.join("component.py"), "def main(): ...\n").unwrap();
    // This test binary has this one test: nothing else reads the environment meanwhile.
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::set_var("PATH", format!("{}:{path}", bin.display()));
    std::env::set_var("TORCHX_PYTHON", &python);
    std::env::set_var("TORCHX_STATE_DIR", dir.join("state"));
    std::env::set_var("TORCHX_SUPERVISOR", env!("CARGO_BIN_EXE_torchx"));
    let component = format!("{}:main", dir.join("component.py").display());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let (plugin, python_component, ()) = runtime.block_on(async {
        tokio::join!(
            runner.scheduler("hangs"),
            runner.build_component(&component, &[]),
            async {
                everything_else(&runner).await;
                std::fs::write(dir.join("release"), "").unwrap();
            }
        )
    });
    for name in ["torchx-scheduler-hangs", "python3"] {
        let ended =
            std::fs::read_to_string(dir.join(format!("ended.{name}"))).unwrap_or_else(|e| {
                panic!(
                    "{name} never ran ({e}); plugin: {plugin:?}; component: {python_component:?}"
                )
            });
        assert!(
            ended.lines().all(|l| l == "released"),
            "{name} was not released before it gave up: the other calls waited for it"
        );
    }
    // Each hanging program failed once released: both calls say so.
    assert!(plugin.is_err());
    assert!(python_component.is_err());
}
