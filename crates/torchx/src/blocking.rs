//! Blocking work kept off the async executor (object_store's `maybe_spawn_blocking`
//! discipline): every SQLite call, scheduler command, file walk and interpreter goes through
//! [`blocking`], so no caller's executor stalls on it.

use crate::error::{Error, Result};

/// Runs blocking work (SQLite with its busy timeout, a scheduler's command-line tools, reading
/// a workspace) on tokio's blocking pool; `who` names the caller in the error if the pool
/// loses the task.
pub(crate) async fn blocking<T: Send + 'static>(
    who: &str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        Error::backend(who, format!("a blocking task did not finish: {e}")).with_source(e)
    })?
}
