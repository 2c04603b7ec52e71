//! Builtin schedulers. Each has the same inner shape: `opts.rs` (typed run options),
//! `render.rs` (pure AppDef → native request), an I/O part, and state mapping.

pub mod local_cwd;
#[cfg(feature = "docker")]
pub mod local_docker;
pub mod slurm;
