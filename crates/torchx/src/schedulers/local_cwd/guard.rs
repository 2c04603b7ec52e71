//! The guard (`torchx __guard`, one per supervisor) and what readers do about an app whose
//! supervisor is gone: kill its replicas' process groups and record a verdict, once.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use std::path::PathBuf;

use super::cgroup::AppCgroup;
use super::descendants::{kill_tree, load_tracked, tracked_path};
use super::ledger::{Ledger, Liveness, ReplicaRow};
use super::now;
use super::state::{verdict_without_supervisor, Alive};
use crate::error::Result;
use crate::specs::AppState;
use crate::sys;

/// The hidden subcommand that runs [`guard_main`].
pub(super) const GUARD_ARG: &str = "__guard";
/// How often a failed ledger write is retried (the guard's and the supervisor's).
pub(super) const SAVE_RETRY: Duration = Duration::from_secs(1);

/// The guard line that carries an outcome the supervisor could not record:
/// `outcome <STATE> <message>`.
pub(super) const OUTCOME: &str = "outcome ";
/// The guard line that says the supervisor recorded the outcome itself.
pub(super) const DONE: &str = "done";
/// How long the guard keeps trying to record such an outcome.
const GUARD_SAVE_TIMEOUT: Duration = Duration::from_secs(3600);

/// Entry point of `torchx __guard`: reads the app id, then waits for its supervisor's pipe to
/// close. Without a final `done` the supervisor died: kill what is left and record why.
pub(super) fn guard_main() -> i32 {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let Some(Ok(app_id)) = lines.next() else {
        return 2;
    };
    let mut outcome: Option<(AppState, String)> = None;
    let mut done = false;
    for line in lines.map_while(std::result::Result::ok) {
        if line == DONE {
            done = true;
        } else if let Some(rest) = line.strip_prefix(OUTCOME) {
            let (state, msg) = rest.split_once(' ').unwrap_or((rest, ""));
            outcome = state.parse().ok().map(|s| (s, msg.to_string()));
        }
    }
    if let Some((state, msg)) = outcome {
        return record_outcome(&app_id, state, &msg);
    }
    if done {
        // The app's final record is in the WAL: copy it into the database file now, off the
        // path of anyone waiting, so records do not live in the WAL alone.
        if let Ok(ledger) = Ledger::open(&crate::schedulers::default_state_dir()) {
            ledger.checkpoint();
        }
        return 0;
    }
    let result = Ledger::open(&crate::schedulers::default_state_dir()).and_then(|mut ledger| {
        match ledger.app_liveness(&app_id)? {
            // The supervisor is dead (it closed our pipe), whatever its pid looks like now.
            Some(live) => settle(&mut ledger, &live, Some(false)).map(drop),
            None => Ok(()),
        }
    });
    if let Err(e) = result {
        note!("torchx guard of {app_id}: {e}");
        return 1;
    }
    0
}

/// The guard records the outcome its supervisor could not: retried until the ledger can be
/// written again (or [`GUARD_SAVE_TIMEOUT`]); readers meanwhile show the verdict on a dead
/// supervisor ([`reconcile_for_reader`]).
fn record_outcome(app_id: &str, state: AppState, msg: &str) -> i32 {
    let deadline = Instant::now() + GUARD_SAVE_TIMEOUT;
    loop {
        let recorded = Ledger::open(&crate::schedulers::default_state_dir()).and_then(|mut l| {
            match l.app_liveness(app_id)? {
                Some(live) => {
                    let containers = containers_of(&l, app_id);
                    let owned = owned_by(&l, app_id);
                    l.settle(&live, |_, rows| {
                        let outcome = stop_then((state, msg.to_string()), rows, &owned);
                        remove_containers(&containers);
                        Some(outcome)
                    })
                    .map(drop)
                }
                None => Ok(()),
            }
        });
        match recorded {
            Ok(()) => return 0,
            Err(e) if Instant::now() >= deadline => {
                note!("torchx guard of {app_id}: the outcome was never recorded: {e}");
                return 1;
            }
            Err(_) => std::thread::sleep(SAVE_RETRY),
        }
    }
}

/// How long a stop waits for the killed processes to be gone before it says which are left.
const KILL_WAIT: Duration = Duration::from_secs(3);

/// What holds an app's processes once its supervisor is gone: its cgroup, where it made one;
/// else the processes it tracked, in a file.
pub(super) struct Owned {
    cgroup: Option<AppCgroup>,
    tracked: PathBuf,
}

/// What holds app `app_id`'s processes (the ledger's state directory).
pub(super) fn owned_by(ledger: &Ledger, app_id: &str) -> Owned {
    Owned {
        cgroup: ledger
            .cgroup(app_id)
            .ok()
            .flatten()
            .map(|path| AppCgroup::at(&path)),
        tracked: tracked_path(&ledger.state_dir(), app_id),
    }
}

/// Stops what is left of an app's replicas: each one's process group and, where the app has
/// one, its cgroup, which holds everything they started in any session (then removed); else
/// every process its supervisor tracked and all they started since ([`kill_tree`]). Returns
/// the processes still alive afterwards.
fn stop_replicas(replicas: &[ReplicaRow], owned: &Owned) -> Vec<u32> {
    for r in replicas {
        if let Some(pid) = r.pid {
            kill_group_if_ours(pid, r.pid_start);
        }
    }
    if let Some(c) = &owned.cgroup {
        return c.kill_and_remove(KILL_WAIT);
    }
    let mut seeds = load_tracked(&owned.tracked);
    seeds.extend(replicas.iter().filter_map(|r| Some((r.pid?, r.pid_start))));
    let left = kill_tree(&seeds, KILL_WAIT);
    if left.is_empty() {
        let _ = std::fs::remove_file(&owned.tracked);
    }
    left
}

/// Stops what is left of an app's replicas ([`stop_replicas`]) and returns `verdict`, its
/// message saying which processes could not be killed, if any.
pub(super) fn stop_then(
    verdict: (AppState, String),
    replicas: &[ReplicaRow],
    owned: &Owned,
) -> (AppState, String) {
    let left = stop_replicas(replicas, owned);
    (verdict.0, format!("{}{}", verdict.1, left_behind(&left)))
}

/// The end of a record's message when a stop left processes alive (empty when it did not).
pub(super) fn left_behind(left: &[u32]) -> String {
    if left.is_empty() {
        return String::new();
    }
    let pids: Vec<String> = left.iter().map(u32::to_string).collect();
    format!(
        "; processes {} of its replicas could not be killed and are still running",
        pids.join(", ")
    )
}

/// The containers of an app whose replicas are `docker run`s (local_docker's supervised apps):
/// killing a `docker run` leaves its container running, so they are removed by name.
fn containers_of(ledger: &Ledger, app_id: &str) -> Vec<String> {
    ledger
        .request_json(app_id)
        .ok()
        .flatten()
        .and_then(|j| serde_json::from_str::<super::PopenRequest>(&j).ok())
        .map(|req| {
            req.roles
                .into_iter()
                .flat_map(|r| r.replicas)
                .filter_map(|p| p.container)
                .collect()
        })
        .unwrap_or_default()
}

fn remove_containers(names: &[String]) {
    if names.is_empty() {
        return;
    }
    let removed = std::process::Command::new("docker")
        .args(["rm", "-f"])
        .args(names)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if let Err(e) = removed {
        note!("torchx guard: cannot remove containers {names:?}: {e}");
    }
}

/// Brings an app whose supervisor is gone to a terminal state: kills its replicas' process
/// groups and records the verdict. Returns the app's state afterwards.
///
/// `live` is the caller's snapshot. It only decides whether a closer look is worth a write lock:
/// the verdict itself is taken again inside [`Ledger::settle`]'s transaction on the current row
/// and the processes as they are then, so a stale snapshot never harms a live app.
pub(super) fn reconcile(ledger: &mut Ledger, live: &Liveness) -> Result<AppState> {
    settle(ledger, live, None)
}

/// [`reconcile`] for a read-only command: when the ledger cannot be written (a full disk), the
/// app is shown as recorded, with a warning, rather than failing the command.
pub(super) fn reconcile_for_reader(ledger: &mut Ledger, live: &Liveness) -> AppState {
    reconcile(ledger, live).unwrap_or_else(|e| {
        log::warn!("cannot settle app {} now: {e}", live.app_id);
        // Shown as it will be recorded: never RUNNING with its supervisor gone.
        verdict(live, None).map_or(live.state, |(state, _)| state)
    })
}

/// [`reconcile`], where `supervisor_alive` overrides the pid check (the guard knows its
/// supervisor is dead: it closed the guard's pipe).
fn settle(
    ledger: &mut Ledger,
    live: &Liveness,
    supervisor_alive: Option<bool>,
) -> Result<AppState> {
    let Some((state, _)) = verdict(live, supervisor_alive).filter(|_| !live.state.is_terminal())
    else {
        return Ok(live.state);
    };
    if supervisor_alive.is_none() && guard_running(&live.app_id) {
        // Its guard records the outcome the supervisor could not (or the reason it died):
        // shown as the verdict meanwhile, left for the guard to write.
        return Ok(state);
    }
    let containers = containers_of(ledger, &live.app_id);
    let owned = owned_by(ledger, &live.app_id);
    let state = ledger.settle(live, |l, rows| {
        Some(stop_then(verdict(l, supervisor_alive)?, rows, &owned))
    })?;
    // After the transaction: an engine slow to answer holds no write lock on the ledger (the
    // replicas, `docker run` in the foreground, were stopped inside it).
    if state.is_terminal() {
        remove_containers(&containers);
    }
    Ok(state)
}

/// Whether app `app_id`'s guard still runs (found by its command line, `__guard <app_id>`).
/// Asked only about an app whose supervisor is gone, which is rare: a scan of /proc is fine.
fn guard_running(app_id: &str) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        let is_pid = p
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read(p.path().join("cmdline")).is_ok_and(|cmdline| {
                let mut args = cmdline.split(|b| *b == 0).skip(1);
                args.next() == Some(GUARD_ARG.as_bytes()) && args.next() == Some(app_id.as_bytes())
            })
    })
}

/// The state an app whose supervisor is gone is settled in, and why (None while it is alive,
/// and for an app of another host, whose pids mean nothing here).
pub(super) fn verdict(
    live: &Liveness,
    supervisor_alive: Option<bool>,
) -> Option<(AppState, String)> {
    if supervisor_alive.is_none() && live.elsewhere() {
        return None;
    }
    let alive = Alive {
        supervisor: supervisor_alive.unwrap_or_else(|| {
            live.supervisor_pid
                .is_some_and(|p| sys::pid_alive(p, live.supervisor_start))
        }),
        submitter: sys::pid_alive(live.submitter_pid, live.submitter_start),
    };
    verdict_without_supervisor(live, alive, now())
}

/// SIGKILLs a replica's process group unless its leader's pid now belongs to someone else. A
/// dead leader's group may still hold its descendants, and its id cannot be reused while it does.
pub(super) fn kill_group_if_ours(pgid: u32, leader_start: Option<u64>) {
    let ours = match (sys::proc_start_time(pgid), leader_start) {
        (None, _) | (_, None) => true,
        (Some(now), Some(then)) => now == then,
    };
    if ours {
        sys::signal_group(pgid, sys::SIGKILL);
    }
}
