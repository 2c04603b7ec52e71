//! Nothing the Runner waits for blocks the executor it is awaited on, proven by behaviour: on a
//! current-thread runtime, a ticker task beside the Runner's calls must tick every 10 ms while
//! a scheduler plugin's dry run hangs (its program answers `info`, then never answers `dryrun`)
//! while a group's record sits on a "disk" that never answers (a FIFO nobody writes, which
//! blocks whoever opens it), and while `list` folds 1,000 pipelines into its rows, then one
//! whose record never reads. A call that blocked the executor would stop the ticker for as
//! long as it hangs.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use torchx::config::TorchxConfig;
use torchx::opts::Cfg;
use torchx::runner::RunArgs;
use torchx::scheduler::Registry;
use torchx::specs::{AppDef, Role};
use torchx::Runner;

/// The longest gap between two ticks the test accepts (a tick is due every 10 ms; a loaded CI
/// machine may be late, but nothing here may stop it for the seconds a hang lasts).
const MAX_GAP: Duration = Duration::from_millis(500);

/// A plugin program that answers `info` and hangs on every other operation.
fn plugin_that_hangs_on_dryrun(bin: &Path) {
    let path = bin.join("torchx-scheduler-stalls");
    std::fs::write(
        &path,
        "#!/bin/sh\n\
         read -r request\n\
         case $request in\n\
         *'\"info\"'*) echo '{\"protocol\": 1, \"ok\": {\"description\": \"stalls\", \"capabilities\": {}, \"run_opts\": []}}' ;;\n\
         *) exec sleep 600 ;;\n\
         esac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `work` beside a 10 ms ticker on a current-thread runtime; returns the longest gap
/// between ticks while `work` ran.
fn longest_gap<F: std::future::Future<Output = ()>>(work: F) -> Duration {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let gap = runtime.block_on(async {
        let ticker = {
            let done = Arc::clone(&done);
            async move {
                let mut longest = Duration::ZERO;
                let mut last = Instant::now();
                while !done.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    longest = longest.max(last.elapsed());
                    last = Instant::now();
                }
                longest
            }
        };
        let work = async {
            work.await;
            done.store(true, Ordering::SeqCst);
        };
        tokio::join!(ticker, work).0
    });
    // A call still blocked on the blocking pool (the FIFO's open) must not hold the test.
    runtime.shutdown_background();
    gap
}

#[test]
fn a_hanging_plugin_dry_run_and_a_record_that_never_reads_stall_no_ticker() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    plugin_that_hangs_on_dryrun(&bin);
    // This test binary has this one test: nothing else reads the environment meanwhile.
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::set_var("PATH", format!("{}:{path}", bin.display()));
    std::env::set_var("TORCHX_STATE_DIR", dir.join("state"));
    std::env::set_var("TORCHX_PLUGIN_TIMEOUT", "3");
    std::env::set_var("TORCHX_PLUGIN_HOST_IDLE", "0");
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());

    // The plugin's dry run: the program never answers, the call times out after 3 s.
    let mut role = Role::new("main", "img");
    role.entrypoint = "echo".into();
    let app = AppDef::new("stall", vec![role]);
    let started = Instant::now();
    let gap = longest_gap(async {
        let dry = runner
            .dryrun(app, "stalls", &Cfg::new(), &RunArgs::default())
            .await;
        let e = dry.expect_err("the plugin never answers its dry run");
        assert!(e.to_string().contains("no answer within"), "{e}");
    });
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(
        gap < MAX_GAP,
        "the ticker stopped for {gap:?} during the plugin's dry run"
    );

    // A group's record that never reads: the status call waits on the blocking pool.
    let state = dir.join("state");
    let group_id = "g1";
    let groups = state.join("groups");
    std::fs::create_dir_all(&groups).unwrap();
    let record = groups.join(format!("{group_id}.json"));
    let made = std::process::Command::new("mkfifo")
        .arg(&record)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", record.display());
    let handle = format!("local_cwd://torchx/~{group_id}");
    let gap = longest_gap(async {
        let status = tokio::time::timeout(Duration::from_secs(2), runner.status(&handle)).await;
        assert!(status.is_err(), "the record's read never ends: {status:?}");
    });
    assert!(
        gap < MAX_GAP,
        "the ticker stopped for {gap:?} reading the record"
    );
    // Release the reader left on the blocking pool.
    let _ = std::fs::OpenOptions::new().write(true).open(&record);

    // 1,000 pipelines folded into `list`'s rows (as the dashboard lists them), then one whose
    // record never reads.
    let spec = torchx::pipeline::PipelineSpec::parse(
        "name: p\nsteps:\n  - name: a\n    component: utils.echo\n",
    )
    .unwrap();
    let pipelines = state.join("pipelines");
    for _ in 0..1000 {
        let record = torchx::pipeline::PipelineRecord::new(&spec, "torchx", "local_cwd", dir);
        let at = pipelines.join(&record.id);
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(
            at.join("record.json"),
            serde_json::to_string(&record).unwrap(),
        )
        .unwrap();
    }
    let gap = longest_gap(async {
        let mut apps = Vec::new();
        runner
            .fold_into_pipelines("local_cwd", &mut apps)
            .await
            .unwrap();
        assert_eq!(apps.len(), 1000);
    });
    assert!(
        gap < MAX_GAP,
        "the ticker stopped for {gap:?} listing 1,000 pipelines"
    );
    let stuck = pipelines.join("stuck");
    std::fs::create_dir_all(&stuck).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(stuck.join("record.json"))
        .status()
        .unwrap();
    assert!(made.success());
    let gap = longest_gap(async {
        let mut apps = Vec::new();
        let listed = tokio::time::timeout(
            Duration::from_secs(2),
            runner.fold_into_pipelines("local_cwd", &mut apps),
        )
        .await;
        assert!(listed.is_err(), "the stuck record's read never ends");
    });
    assert!(
        gap < MAX_GAP,
        "the ticker stopped for {gap:?} listing a pipeline whose record never reads"
    );
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .open(stuck.join("record.json"));
}
