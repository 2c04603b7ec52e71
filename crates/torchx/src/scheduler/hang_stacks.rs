//! The stacks a hang watch captured, read back from the replicas' logs, where the watch writes
//! them between two marker lines (`schedulers::hang_watch` writes them, this reads them).

use super::{Backend, HangStacks, LogQuery, Replica};
use crate::error::{Error, Result};

/// The line that opens a replica's stacks in a container's log (then `role/N attempt A`).
pub(crate) const STACKS_BEGIN: &str = "torchx: stacks of ";
/// The line that closes them (then `role/N`).
pub(crate) const STACKS_END: &str = "torchx: end of the stacks of ";
/// The stacks a container's log holds, per replica and attempt: the lines between
/// [`STACKS_BEGIN`] and [`STACKS_END`].
pub(crate) fn stacks_in_log(lines: &[String]) -> Vec<(String, u32, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, u32, String)> = None;
    for line in lines {
        if let Some(head) = line.strip_prefix(STACKS_BEGIN) {
            let (replica, attempt) = head.rsplit_once(" attempt ").unwrap_or((head, "0"));
            open = Some((
                replica.to_string(),
                attempt.trim().parse().unwrap_or(0),
                String::new(),
            ));
        } else if line.starts_with(STACKS_END) {
            out.extend(open.take());
        } else if let Some((_, _, text)) = open.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// [`Backend::hang_stacks`] of a scheduler whose watch writes into the replicas' logs (every
/// container scheduler): the stacks the watch wrote in each
/// replica's log (the log the scheduler keeps: a replaced pod's is gone with it), of
/// `attempt` or of the last attempt that has any.
pub(crate) async fn from_logs<B: Backend + ?Sized>(
    backend: &B,
    app_id: &str,
    attempt: Option<u32>,
) -> Result<Vec<HangStacks>> {
    let Some(app) = backend.describe(app_id).await? else {
        return Err(Error::not_found("app", app_id, ""));
    };
    let mut out = Vec::new();
    for role in &app.roles_statuses {
        for replica in &role.replicas {
            let query = LogQuery::default();
            let mut lines = backend
                .log_iter(
                    Replica {
                        app_id,
                        role: &role.role,
                        k: replica.id,
                    },
                    &query,
                )
                .await?;
            let mut log = Vec::new();
            while let Some(line) = lines.next_line().await? {
                log.push(line);
            }
            let found = stacks_in_log(&log)
                .into_iter()
                .rfind(|(_, a, _)| attempt.is_none_or(|n| n == *a));
            out.extend(found.map(|(_, a, text)| HangStacks {
                role: role.role.clone(),
                replica: replica.id,
                attempt: a,
                text,
            }));
        }
    }
    Ok(out)
}
