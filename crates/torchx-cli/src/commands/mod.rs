//! One module per group of subcommands.

pub mod info;
pub mod query;
pub mod run;
pub mod tracker;

use torchx::config::TorchxConfig;
use torchx::scheduler::Registry;
use torchx::{Result, Runner};

/// A runner over the builtin schedulers with the config files in effect.
pub fn runner() -> Result<Runner> {
    Ok(Runner::new(Registry::builtin(), TorchxConfig::discover()?))
}

/// A runner that reads no config files (for commands that do not need them).
pub fn runner_without_config() -> Runner {
    Runner::new(Registry::builtin(), TorchxConfig::default())
}

/// A single-threaded tokio runtime, built only by commands that talk to a scheduler.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}
