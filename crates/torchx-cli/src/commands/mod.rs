//! One module per group of subcommands.

pub mod group;
pub mod info;
pub mod query;
pub mod run;
pub mod tracker;

use std::sync::OnceLock;

use torchx::config::TorchxConfig;
use torchx::extensions::Extensions;
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
    extensions().runner(TorchxConfig::discover()?)
}

/// A runner that reads no config files (for commands that do not need them). A
/// `$TORCHXCONFIG` naming no file is still an error, as for every command.
pub fn runner_without_config() -> Result<Runner> {
    torchx::config::find_configs()?;
    extensions().runner(TorchxConfig::default())
}

/// A single-threaded tokio runtime, built only by commands that talk to a scheduler.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}
