//! Blocking work kept off the async executor (object_store's `maybe_spawn_blocking`
//! discipline): every SQLite call, scheduler command, file walk and interpreter goes through
//! [`blocking`], so no caller's executor stalls on it, unless the caller asked for it to be done
//! in place ([`in_place`]).

use std::future::Future;

use crate::error::{Error, Result};

tokio::task_local! {
    /// Set while a future runs under [`in_place`].
    static IN_PLACE: ();
}

/// Runs `fut` with its blocking work done in place, on the thread that polls it, instead of on
/// tokio's blocking pool. Only for a caller whose runtime serves this one future and nothing
/// else (the CLI's dry run): there, no other task can be held up, and a pool thread started
/// for a file read costs more than the read (a tenth of a dry run's time). Tasks `fut` spawns
/// are outside the scope.
pub async fn in_place<F: Future>(fut: F) -> F::Output {
    IN_PLACE.scope((), fut).await
}

/// Runs blocking work (SQLite with its busy timeout, a scheduler's command-line tools, reading
/// a workspace) on tokio's blocking pool; `who` names the caller in the error if the pool
/// loses the task.
pub(crate) async fn blocking<T: Send + 'static>(
    who: &str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    if IN_PLACE.try_with(|()| ()).is_ok() {
        return work();
    }
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        Error::backend(who, format!("a blocking task did not finish: {e}")).with_source(e)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_name() -> Result<Option<String>> {
        Ok(std::thread::current().name().map(String::from))
    }

    /// Blocking work runs on the pool, except under `in_place`, where it runs on the thread
    /// that polls the future; a task spawned from inside the scope is outside it.
    #[test]
    fn blocking_work_leaves_the_executor_unless_asked_to_stay() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .thread_name("executor")
            .build()
            .unwrap();
        let here = std::thread::current().name().map(String::from);
        rt.block_on(async {
            let pooled = blocking("test", thread_name).await.unwrap();
            assert_ne!(pooled, here, "on the blocking pool");
            let (inside, spawned) = in_place(async {
                let inside = blocking("test", thread_name).await.unwrap();
                let spawned = tokio::spawn(blocking("test", thread_name)).await.unwrap();
                (inside, spawned.unwrap())
            })
            .await;
            assert_eq!(inside, here, "in place");
            assert_ne!(spawned, here, "a spawned task is outside the scope");
        });
    }
}
