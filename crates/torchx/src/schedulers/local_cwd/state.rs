//! Pure state logic of `local_cwd`: retry decisions, exit messages, and what to conclude about
//! an app whose supervisor is gone. No I/O here, so all of it is unit-tested.

use crate::specs::{AppState, RetryPolicy};

use super::ledger::Liveness;
use crate::sys::Exit;

/// How long a PENDING app may wait for its supervisor before it is considered lost.
pub(super) const START_TIMEOUT_SECS: f64 = 60.0;

/// Restarts performed so far, per scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RetryCounters {
    /// Per role, per replica (REPLICA policy).
    pub replica: Vec<Vec<u32>>,
    /// Per role (ROLE policy).
    pub role: Vec<u32>,
    /// For the whole app (APPLICATION policy).
    pub app: u32,
}

impl RetryCounters {
    /// Zeroed counters for roles with these replica counts.
    pub(super) fn new(replicas_per_role: impl IntoIterator<Item = usize>) -> Self {
        let replica: Vec<Vec<u32>> = replicas_per_role.into_iter().map(|n| vec![0; n]).collect();
        RetryCounters {
            role: vec![0; replica.len()],
            replica,
            app: 0,
        }
    }
}

/// What to do when a replica fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    /// Restart only that replica.
    RestartReplica,
    /// Stop the role's other replicas, then restart all of them.
    RestartRole,
    /// Stop every replica, then restart all of them.
    RestartApp,
    /// No retries left: stop everything, the app FAILED.
    Fail,
}

/// Applies the failed replica's role policy and `max_retries`, counting the restart it decides.
pub(super) fn on_failure(
    policy: RetryPolicy,
    max_retries: u32,
    counters: &mut RetryCounters,
    role: usize,
    replica: usize,
) -> Decision {
    let (count, decision) = match policy {
        RetryPolicy::Replica => (
            &mut counters.replica[role][replica],
            Decision::RestartReplica,
        ),
        RetryPolicy::Role => (&mut counters.role[role], Decision::RestartRole),
        RetryPolicy::Application => (&mut counters.app, Decision::RestartApp),
    };
    if *count < max_retries {
        *count += 1;
        decision
    } else {
        Decision::Fail
    }
}

/// `trainer/1 exited with code 3`, `trainer/1 was killed by signal 9 (SIGKILL)`.
pub(super) fn exit_message(role: &str, id: u32, exit: Exit) -> String {
    match exit {
        Exit::Code(c) => format!("{role}/{id} exited with code {c}"),
        Exit::Signal(s) => format!(
            "{role}/{id} was killed by signal {s}{}",
            signal_name(s).map_or(String::new(), |n| format!(" ({n})"))
        ),
    }
}

fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// Which of an app's processes are alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Alive {
    /// Its supervisor.
    pub supervisor: bool,
    /// The process that submitted it (and starts the supervisor).
    pub submitter: bool,
}

/// The verdict on a non-terminal app whose supervisor is not running (or never started), or
/// `None` while it may still be fine.
pub(super) fn verdict_without_supervisor(
    live: &Liveness,
    alive: Alive,
    now: f64,
) -> Option<(AppState, String)> {
    if live.state.is_terminal() || alive.supervisor {
        return None;
    }
    let state = if live.cancel_requested {
        AppState::Cancelled
    } else {
        AppState::Failed
    };
    match live.supervisor_pid {
        Some(pid) => Some((
            state,
            if live.cancel_requested {
                "cancelled by user".to_string()
            } else {
                format!("the supervisor (pid {pid}) died unexpectedly; its replicas were killed")
            },
        )),
        None if live.cancel_requested => Some((state, "cancelled before it started".into())),
        None if !alive.submitter => Some((
            state,
            format!(
                "the submitting process (pid {}) died before starting its supervisor",
                live.submitter_pid
            ),
        )),
        None if now - live.created > START_TIMEOUT_SECS => {
            Some((state, "its supervisor did not start within a minute".into()))
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_policies_count_in_their_scope() {
        let mut c = RetryCounters::new([2, 1]);
        // REPLICA: each replica has its own budget.
        assert_eq!(
            on_failure(RetryPolicy::Replica, 1, &mut c, 0, 0),
            Decision::RestartReplica
        );
        assert_eq!(
            on_failure(RetryPolicy::Replica, 1, &mut c, 0, 1),
            Decision::RestartReplica
        );
        assert_eq!(
            on_failure(RetryPolicy::Replica, 1, &mut c, 0, 0),
            Decision::Fail
        );
        // ROLE: one budget per role.
        let mut c = RetryCounters::new([2, 1]);
        assert_eq!(
            on_failure(RetryPolicy::Role, 1, &mut c, 0, 0),
            Decision::RestartRole
        );
        assert_eq!(
            on_failure(RetryPolicy::Role, 1, &mut c, 0, 1),
            Decision::Fail
        );
        assert_eq!(
            on_failure(RetryPolicy::Role, 1, &mut c, 1, 0),
            Decision::RestartRole
        );
        // APPLICATION: one budget for everything; max_retries=0 never restarts.
        let mut c = RetryCounters::new([2, 1]);
        assert_eq!(
            on_failure(RetryPolicy::Application, 2, &mut c, 0, 0),
            Decision::RestartApp
        );
        assert_eq!(
            on_failure(RetryPolicy::Application, 2, &mut c, 1, 0),
            Decision::RestartApp
        );
        assert_eq!(
            on_failure(RetryPolicy::Application, 2, &mut c, 0, 1),
            Decision::Fail
        );
        assert_eq!(
            on_failure(
                RetryPolicy::Application,
                0,
                &mut RetryCounters::new([1]),
                0,
                0
            ),
            Decision::Fail
        );
    }

    #[test]
    fn messages() {
        assert_eq!(
            exit_message("t", 1, Exit::Code(3)),
            "t/1 exited with code 3"
        );
        assert_eq!(
            exit_message("t", 0, Exit::Signal(9)),
            "t/0 was killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn verdicts() {
        let live = Liveness {
            app_id: "a".into(),
            state: AppState::Running,
            created: 100.0,
            ended: None,
            supervisor_pid: Some(42),
            supervisor_start: Some(1),
            submitter_pid: 7,
            submitter_start: Some(1),
            cancel_requested: false,
            host: None,
        };
        const UP: Alive = Alive {
            supervisor: true,
            submitter: true,
        };
        const SUPERVISOR_DOWN: Alive = Alive {
            supervisor: false,
            submitter: true,
        };
        const ALL_DOWN: Alive = Alive {
            supervisor: false,
            submitter: false,
        };
        assert_eq!(verdict_without_supervisor(&live, UP, 101.0), None);
        let (s, msg) = verdict_without_supervisor(&live, SUPERVISOR_DOWN, 101.0).unwrap();
        assert_eq!(s, AppState::Failed);
        assert!(msg.contains("pid 42) died unexpectedly"), "{msg}");
        let cancelled = Liveness {
            cancel_requested: true,
            ..live.clone()
        };
        assert_eq!(
            verdict_without_supervisor(&cancelled, SUPERVISOR_DOWN, 101.0)
                .unwrap()
                .0,
            AppState::Cancelled
        );
        let pending = Liveness {
            state: AppState::Pending,
            supervisor_pid: None,
            ..live.clone()
        };
        assert_eq!(
            verdict_without_supervisor(&pending, SUPERVISOR_DOWN, 101.0),
            None
        );
        let (s, msg) = verdict_without_supervisor(&pending, ALL_DOWN, 101.0).unwrap();
        assert_eq!(s, AppState::Failed);
        assert!(msg.contains("submitting process"), "{msg}");
        assert_eq!(
            verdict_without_supervisor(&pending, SUPERVISOR_DOWN, 200.0)
                .unwrap()
                .0,
            AppState::Failed
        );
        let done = Liveness {
            state: AppState::Succeeded,
            ..live
        };
        assert_eq!(verdict_without_supervisor(&done, ALL_DOWN, 101.0), None);
    }
}
