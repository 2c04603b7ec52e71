//! How a program becomes local_cwd's supervisor: the hidden `__supervise`/`__guard`
//! subcommands, and which executable the client starts for them.

use std::path::PathBuf;

use super::guard::{guard_main, GUARD_ARG};
use super::supervisor::{supervisor_main, SUPERVISE_ARG};
use super::NAME;
use crate::error::{Error, Result};

/// The executable that runs the supervisor: `$TORCHX_SUPERVISOR`, else this program if it
/// registered itself with [`embed_supervisor`].
pub(crate) fn supervisor_exe() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TORCHX_SUPERVISOR").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if let Some(exe) = CONFIGURED.get() {
        return Ok(exe.clone());
    }
    if EMBEDDED.get().is_some() {
        if let Ok(exe) = std::env::current_exe() {
            return Ok(exe);
        }
    }
    Err(Error::unsupported(
        NAME,
        "running apps from this program: local_cwd needs the `torchx` executable to supervise \
         them; set TORCHX_SUPERVISOR=/path/to/torchx, or call \
         torchx::schedulers::local_cwd::embed_supervisor() at the start of main()",
    ))
}

static EMBEDDED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
static CONFIGURED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `exe` (a `torchx` executable) the supervisor of the apps this process starts, unless
/// `TORCHX_SUPERVISOR` names another: how a host program that is not `torchx` (the Python
/// extension) points local_cwd at it without writing its own environment. The first call wins.
pub fn use_supervisor(exe: PathBuf) {
    let _ = CONFIGURED.set(exe);
}

/// Makes this program its own supervisor: if it was started as `__supervise` or `__guard`, runs
/// that role and exits; otherwise records that it can, and returns. Call first thing in `main`.
pub fn embed_supervisor() {
    let _ = EMBEDDED.set(());
    let arg = std::env::args_os().nth(1);
    let code = match arg.as_ref().and_then(|a| a.to_str()) {
        Some(SUPERVISE_ARG) => supervisor_main(),
        Some(GUARD_ARG) => guard_main(),
        _ => return,
    };
    std::process::exit(code);
}
