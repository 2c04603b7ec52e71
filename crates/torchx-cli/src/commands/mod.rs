//! One module per group of subcommands.

pub mod group;
pub mod info;
pub mod pipeline;
pub mod plan;
pub mod query;
pub mod run;
pub mod run_args;
pub mod show;
pub mod tracker;
#[cfg(feature = "ui")]
pub mod ui;

use std::sync::OnceLock;

use torchx::config::TorchxConfig;
use torchx::Extensions;
use torchx::{Result, Runner};

/// What this binary was built with (set once by `torchx_cli::main`).
static EXTENSIONS: OnceLock<Extensions> = OnceLock::new();

pub fn set_extensions(ext: Extensions) {
    let _ = EXTENSIONS.set(ext);
}

fn extensions() -> &'static Extensions {
    EXTENSIONS.get_or_init(Extensions::builtin)
}

/// A runner over this binary's schedulers, components and trackers, with the config files in
/// effect.
pub fn runner() -> Result<Runner> {
    extensions()
        .runner(TorchxConfig::discover()?)
        .map(inherit_session)
}

/// TorchX's session: `$TORCHX_INTERNAL_SESSION_ID` when this torchx runs inside a job.
fn inherit_session(runner: Runner) -> Runner {
    match std::env::var("TORCHX_INTERNAL_SESSION_ID") {
        Ok(id) if !id.is_empty() => runner.with_session_id(id),
        _ => runner,
    }
}

/// A runner that reads no config files (for commands that do not need them). A
/// `$TORCHXCONFIG` naming no file is still an error, as for every command.
pub fn runner_without_config() -> Result<Runner> {
    torchx::config::find_configs()?;
    extensions()
        .runner(TorchxConfig::default())
        .map(inherit_session)
}

/// Ctrl-C and SIGTERM, caught from now on: installed before anything is submitted, so one
/// that arrives while a job starts cancels it instead of leaving it running.
pub struct Interrupts {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Interrupts {
    pub fn install() -> Result<Interrupts> {
        let install = |kind| {
            tokio::signal::unix::signal(kind)
                .map_err(|e| torchx::Error::io("installing the Ctrl-C/SIGTERM handlers", e))
        };
        Ok(Interrupts {
            int: install(tokio::signal::unix::SignalKind::interrupt())?,
            term: install(tokio::signal::unix::SignalKind::terminate())?,
        })
    }

    /// Waits for either.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// `wait`, given up after `timeout` (exit code 7: the job keeps running).
pub async fn within<T>(
    timeout: Option<std::time::Duration>,
    handle: &str,
    wait: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match timeout {
        None => wait.await,
        Some(t) => tokio::time::timeout(t, wait).await.unwrap_or_else(|_| {
            Err(torchx::Error::timeout(format!(
                "{handle} did not finish within {}s (it keeps running)",
                t.as_secs_f64()
            )))
        }),
    }
}

/// The items of a comma-separated list (`-s slurm,local_cwd`, `--roles a,b`), trimmed, empty
/// ones dropped.
pub fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Runs `f` on this thread's single-threaded tokio runtime, built on first use (only by
/// commands that talk to a scheduler) and kept: a scheduler's client made in one call (a
/// Kubernetes client spawns its worker on the runtime) still works in the next.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
    }
    RUNTIME.with(|rt| rt.block_on(f))
}
