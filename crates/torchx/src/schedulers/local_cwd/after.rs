//! `--after` on local_cwd: the job is recorded at once (PENDING, its message naming what it
//! waits for) and its own supervisor waits for the dependencies before it starts anything. A
//! dependency on any scheduler, or a group, is asked about with this program's own `status`
//! command, as a user would; one that ends in a way that can no longer satisfy the job ends it
//! CANCELLED without running, saying which and how.

use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::ledger::Ledger;
use super::now;
use crate::error::{Error, Result};
use crate::specs::{AppState, Dependency, Verdict};
use crate::sys::{self, SignalFd};

/// The variable that names, to a supervisor, the state directory of the user who submitted
/// (its own may be a scheduler's private one: local_docker's).
pub(super) const USER_STATE_DIR: &str = "TORCHX_USER_STATE_DIR";

/// How often every dependency is asked about with `torchx status` (which also settles a
/// local job whose supervisor died).
const POLL: Duration = Duration::from_secs(1);
/// Between those, a local_cwd dependency's recorded state is read from the ledger, at first
/// this often (a tenth of the time waited so far, up to [`POLL`]): a chain of short local jobs
/// moves on within milliseconds of each end, a long wait costs few reads.
const QUICK: Duration = Duration::from_millis(20);

/// How a wait for dependencies ended.
pub(super) enum Waited {
    /// All are satisfied: start the replicas.
    Go,
    /// The app ended without running (cancelled, a dependency failed it, or someone else owns
    /// it): nothing to start.
    Ended,
}

/// Claims the PENDING app `app_id` for this supervisor (`ready` is called once it is: the
/// submitter may go), then waits until every dependency in `after` is satisfied; a signal on
/// `signals` (a cancel) ends the wait at once.
pub(super) fn wait_for_dependencies(
    ledger: &mut Ledger,
    app_id: &str,
    after: &[Dependency],
    signals: &mut SignalFd,
    ready: impl FnOnce(),
) -> Result<Waited> {
    let me = std::process::id();
    let mut said = format!(
        "waiting for {}",
        after
            .iter()
            .map(|d| d.handle.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !ledger.claim_waiting(app_id, me, sys::proc_start_time(me), &said)? {
        return Ok(Waited::Ended);
    }
    ready();
    let waiting_since = std::time::Instant::now();
    let mut asked: Option<std::time::Instant> = None;
    loop {
        let full = asked.is_none_or(|t| t.elapsed() >= POLL);
        if full {
            asked = Some(std::time::Instant::now());
        }
        // What each dependency says now: in a quick round only an end the ledger recorded.
        let mut waiting: Vec<String> = Vec::new();
        let mut quiet = false;
        let mut impossible: Option<String> = None;
        for dep in after {
            let state = if full {
                dependency_state(&dep.handle)
            } else {
                match recorded_end(ledger, &dep.handle) {
                    Some(end) => Ok(Some(end)),
                    None => {
                        quiet = true;
                        continue;
                    }
                }
            };
            match state {
                Ok(Some(state)) => match dep.condition.verdict(state) {
                    Verdict::Satisfied => {}
                    Verdict::Waiting => waiting.push(format!("{} ({state})", dep.handle)),
                    Verdict::Impossible => {
                        impossible = Some(format!(
                            "not started: its dependency {} ended {state}, and it waits for it \
                             to end {}",
                            dep.handle,
                            dep.condition.wanted()
                        ));
                        break;
                    }
                },
                Ok(None) => {
                    impossible = Some(format!(
                        "not started: its dependency {} is no longer known",
                        dep.handle
                    ));
                    break;
                }
                // A scheduler that does not answer now is asked again.
                Err(e) => waiting.push(format!("{} (its status: {e})", dep.handle)),
            }
        }
        if let Some(why) = impossible {
            ledger.finish_if_unfinished(app_id, AppState::Cancelled, &why, now())?;
            return Ok(Waited::Ended);
        }
        if waiting.is_empty() && !quiet {
            return Ok(Waited::Go);
        }
        if full {
            let now_waiting = format!("waiting for {} to end", waiting.join(", "));
            if now_waiting != said {
                ledger.set_pending_msg(app_id, &now_waiting)?;
                said = now_waiting;
            }
        }
        let pause = (waiting_since.elapsed() / 10).clamp(QUICK, POLL);
        let ready = sys::poll_readable(&[signals.as_raw_fd()], Some(pause))
            .map_err(|e| Error::io("waiting for dependencies", e))?;
        // SIGCHLD comes from the `status` commands; the others are a cancel.
        if ready[0] && signals.read().iter().any(|s| *s != sys::SIGCHLD) {
            ledger.finish_if_unfinished(app_id, AppState::Cancelled, "cancelled by user", now())?;
            return Ok(Waited::Ended);
        }
    }
}

/// The terminal state the ledger recorded for `handle`, when it is a local_cwd job of this
/// ledger that ended.
fn recorded_end(ledger: &Ledger, handle: &str) -> Option<AppState> {
    let h = crate::specs::parse_app_handle(handle).ok()?;
    if h.scheduler() != super::NAME || h.names_group() {
        return None;
    }
    let state = ledger.app_liveness(h.app_id()).ok()??.state;
    state.is_terminal().then_some(state)
}

/// The state of the job or group `handle` (`None`: no scheduler knows it), from this
/// program's `status --json`.
fn dependency_state(handle: &str) -> Result<Option<AppState>> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding this program", e))?;
    let mut status = Command::new(exe);
    status
        .args(["status", "--json", handle])
        .stdin(Stdio::null());
    if let Some(dir) = std::env::var_os(USER_STATE_DIR) {
        status.env("TORCHX_STATE_DIR", dir);
    }
    let out = status
        .output()
        .map_err(|e| Error::io("asking about a dependency", e))?;
    match out.status.code() {
        Some(0) => {}
        // The CLI's exit code for something not found.
        Some(4) => return Ok(None),
        _ => {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(Error::backend(super::NAME, err.trim().to_string()));
        }
    }
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        Error::backend(super::NAME, format!("`status --json {handle}`: {e}")).with_source(e)
    })?;
    status["state"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .map(Some)
        .ok_or_else(|| Error::backend(super::NAME, format!("`status --json {handle}`: no state")))
}
