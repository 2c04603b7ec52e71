//! Builtin schedulers. Each has the same inner shape: `opts.rs` (typed run options),
//! `render.rs` (pure AppDef → native request), an I/O part, and state mapping.

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "aws")]
pub mod aws_batch;
#[cfg(feature = "aws")]
pub mod aws_sagemaker;
pub mod command;
#[cfg(test)]
mod hostile;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
#[cfg(feature = "kubernetes")]
pub mod kubernetes_mcad;
pub mod local_cwd;
#[cfg(feature = "docker")]
pub mod local_docker;
pub mod lsf;
pub mod plugin;
pub mod slurm;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::specs::AppDef;

/// Workspace images are built by the [`Runner`](crate::Runner) (its dry run plans them and
/// points the roles at them; `schedule` builds and pushes them): a role that still has a
/// workspace here was handed to the scheduler directly, and would run without it.
pub fn reject_workspaces(scheduler: &str, app: &AppDef) -> Result<()> {
    match app.roles.iter().find(|r| r.workspace.is_some()) {
        Some(r) => Err(Error::unsupported(
            scheduler,
            format!(
                "role `{}`'s workspace when called directly: submit through the Runner, which \
                 builds workspace images (Runner::dryrun, then Runner::schedule)",
                r.name
            ),
        )),
        None => Ok(()),
    }
}

/// The per-user state directory of every scheduler that keeps records locally:
/// `$TORCHX_STATE_DIR`, else `$XDG_STATE_HOME/torchx`, else `~/.local/state/torchx`.
pub fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TORCHX_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("torchx");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/state/torchx"),
        None => std::env::temp_dir().join(format!("torchx-{}", local_cwd::uid())),
    }
}

/// Creates `dir` (and parents) with owner-only permissions.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))
}
