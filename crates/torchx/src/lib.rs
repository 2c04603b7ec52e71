//! torchx: a universal job launcher for PyTorch applications.
//!
//! Write one portable job spec ([`specs::AppDef`]) and run it on any [`scheduler::Scheduler`]
//! through a [`runner::Runner`]. Builtin [`components`] build common AppDefs from command-line
//! style arguments. See ARCHITECTURE.md for the map of the code and its invariants.
//!
//! Schedulers compiled into every build: `local_cwd` (local processes in the current directory,
//! visible from every shell), `slurm` and `lsf`; with their features (on by default):
//! `local_docker` (`docker`), `kubernetes` and `kubernetes_mcad` (`kubernetes`), `aws_batch`
//! and `aws_sagemaker` (`aws`). Schedulers in other programs (`torchx-scheduler-<name>` on PATH)
//! and in Python (entry points) join them as plugins.
#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod blocking;
pub mod components;
pub mod config;
pub mod durable;
pub mod error;
mod extensions;
pub mod group;
pub mod opts;
pub mod pipeline;
pub mod plugins;
mod preflight;
pub(crate) mod python;
pub mod runner;
pub mod scheduler;
pub mod schedulers;
pub mod specs;
mod sys;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub(crate) mod text;
pub mod tracker;
pub mod workspace;

pub use error::{Error, ErrorKind, Remedy, Result};
pub use extensions::Extensions;
pub use runner::Runner;

/// The version of this crate.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
