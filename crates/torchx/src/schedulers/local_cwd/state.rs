//! The on-disk record of a local app and how it maps to [`AppState`] (pure).

use serde::{Deserialize, Serialize};

use crate::specs::{AppDef, AppState};

/// One replica process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaRecord {
    /// Replica index within its role.
    pub id: u32,
    /// Process id (also its process group id).
    pub pid: Option<u32>,
    /// The process start time (clock ticks since boot) guarding against pid reuse.
    pub pid_start: Option<u64>,
    /// Exit code, once exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal, once killed.
    pub signal: Option<i32>,
    /// Why it could not start, if it could not.
    pub spawn_error: Option<String>,
    /// Start time (unix seconds).
    pub started: f64,
    /// End time (unix seconds).
    pub ended: Option<f64>,
    /// Log files.
    pub stdout: String,
    /// Log files.
    pub stderr: String,
    /// Log files.
    pub combined: String,
    /// torchelastic error file.
    pub error_file: String,
}

impl ReplicaRecord {
    /// True once the process has ended (or never started).
    pub fn finished(&self) -> bool {
        self.exit_code.is_some() || self.signal.is_some() || self.spawn_error.is_some()
    }

    /// True when it ended with code 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// A role's replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleRecord {
    /// Role name.
    pub role: String,
    /// Replicas.
    pub replicas: Vec<ReplicaRecord>,
}

/// Everything known about a local app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRecord {
    /// App id.
    pub app_id: String,
    /// Session name.
    pub session: String,
    /// The process that owns (waits for) the replicas.
    pub owner_pid: u32,
    /// Its start time, guarding against pid reuse.
    pub owner_start: Option<u64>,
    /// Creation time (unix seconds).
    pub created: f64,
    /// The app's log directory.
    pub log_dir: String,
    /// The app as submitted.
    pub app: AppDef,
    /// Per-role process records.
    pub roles: Vec<RoleRecord>,
}

/// Liveness facts gathered by the I/O layer for [`derive_state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// A cancel was requested.
    pub cancelled: bool,
    /// The owner process is still alive.
    pub owner_alive: bool,
    /// Some unfinished replica's process is still alive.
    pub any_unfinished_alive: bool,
}

/// The app state: cancelled apps are CANCELLED once nothing runs; an unfinished replica whose
/// owner is gone and whose process is gone is lost (FAILED); any running replica makes the app
/// RUNNING; then any failure makes it FAILED, else SUCCEEDED.
pub fn derive_state(rec: &AppRecord, live: Liveness) -> (AppState, String) {
    let replicas = rec
        .roles
        .iter()
        .flat_map(|r| r.replicas.iter().map(move |x| (&r.role, x)));
    let unfinished = replicas.clone().filter(|(_, r)| !r.finished()).count();
    if unfinished > 0 && (live.any_unfinished_alive || live.owner_alive) {
        return (AppState::Running, String::new());
    }
    if live.cancelled {
        return (AppState::Cancelled, "cancelled by user".into());
    }
    if unfinished > 0 {
        return (
            AppState::Failed,
            format!("{unfinished} replica(s) lost: the process that supervised them exited before they finished"),
        );
    }
    let failures: Vec<String> = replicas
        .filter(|(_, r)| !r.succeeded())
        .map(|(role, r)| match (&r.spawn_error, r.exit_code, r.signal) {
            (Some(e), _, _) => format!("{role}/{} could not start: {e}", r.id),
            (_, Some(c), _) => format!("{role}/{} exited with code {c}", r.id),
            (_, _, Some(s)) => format!("{role}/{} was killed by signal {s}", r.id),
            _ => format!("{role}/{} ended in an unknown way", r.id),
        })
        .collect();
    if failures.is_empty() {
        (AppState::Succeeded, String::new())
    } else {
        (AppState::Failed, failures.join("; "))
    }
}

/// A replica's state in `describe`.
pub fn replica_state(r: &ReplicaRecord, app_state: AppState) -> AppState {
    if r.succeeded() {
        AppState::Succeeded
    } else if r.finished() {
        if app_state == AppState::Cancelled {
            AppState::Cancelled
        } else {
            AppState::Failed
        }
    } else if app_state.is_terminal() {
        app_state
    } else {
        AppState::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::Role;

    fn rec(states: &[(Option<i32>, Option<i32>)]) -> AppRecord {
        AppRecord {
            app_id: "a-1".into(),
            session: "torchx".into(),
            owner_pid: 1,
            owner_start: None,
            created: 0.0,
            log_dir: "/l".into(),
            app: AppDef::new("a", vec![Role::new("r", "i").with_entrypoint("e")]),
            roles: vec![RoleRecord {
                role: "r".into(),
                replicas: states
                    .iter()
                    .enumerate()
                    .map(|(i, (code, sig))| ReplicaRecord {
                        id: i as u32,
                        pid: Some(10),
                        pid_start: None,
                        exit_code: *code,
                        signal: *sig,
                        spawn_error: None,
                        started: 0.0,
                        ended: None,
                        stdout: String::new(),
                        stderr: String::new(),
                        combined: String::new(),
                        error_file: String::new(),
                    })
                    .collect(),
            }],
        }
    }

    const DEAD: Liveness = Liveness {
        cancelled: false,
        owner_alive: false,
        any_unfinished_alive: false,
    };

    #[test]
    fn mapping() {
        assert_eq!(
            derive_state(&rec(&[(Some(0), None), (Some(0), None)]), DEAD).0,
            AppState::Succeeded
        );
        let (s, msg) = derive_state(&rec(&[(Some(0), None), (Some(3), None)]), DEAD);
        assert_eq!(
            (s, msg.as_str()),
            (AppState::Failed, "r/1 exited with code 3")
        );
        let live = Liveness {
            owner_alive: true,
            ..DEAD
        };
        assert_eq!(
            derive_state(&rec(&[(Some(0), None), (None, None)]), live).0,
            AppState::Running
        );
        let (s, msg) = derive_state(&rec(&[(None, None)]), DEAD);
        assert_eq!(s, AppState::Failed);
        assert!(msg.contains("lost"));
        let cancelled = Liveness {
            cancelled: true,
            ..DEAD
        };
        assert_eq!(
            derive_state(&rec(&[(None, Some(15))]), cancelled).0,
            AppState::Cancelled
        );
        assert_eq!(
            replica_state(
                &rec(&[(None, Some(15))]).roles[0].replicas[0],
                AppState::Cancelled
            ),
            AppState::Cancelled
        );
    }
}
