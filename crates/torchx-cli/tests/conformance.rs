//! The shared scheduler conformance suite (`torchx::testing`) for local_cwd, which runs
//! everywhere. Every other scheduler runs it in its own test file, against its engine, emulator
//! or fake (`slurm.rs`, `local_docker.rs`, `kubernetes.rs`, ...; the plugins in
//! `scheduler_plugins.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use torchx::config::TorchxConfig;
use torchx::scheduler::{Registry, Scheduler};
use torchx::schedulers::local_cwd::LocalCwdScheduler;
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

#[tokio::test]
async fn local_cwd_conforms() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().to_path_buf();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_torchx"));
    let mut registry = Registry::empty();
    registry
        .register("local_cwd", "local processes", move || {
            let s: Arc<dyn Scheduler> = Arc::new(LocalCwdScheduler::with_supervisor(
                state.clone(),
                exe.clone(),
            ));
            Ok(s)
        })
        .unwrap();
    let runner = Runner::new(registry, TorchxConfig::default());
    let opts = Conformance::new("ignored-by-local_cwd");
    conformance(&runner, "local_cwd", &opts).await;
}
