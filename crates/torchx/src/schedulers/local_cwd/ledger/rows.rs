//! The ledger's rows as Rust values, read by column name.

use std::path::Path;

use rusqlite::Row;

use crate::error::{Error, ErrorKind};
use crate::schedulers::local_cwd::NAME;
use crate::specs::{AppState, EndReason};

/// One app.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::schedulers::local_cwd) struct AppRow {
    /// Its state and the processes that own it.
    pub live: Liveness,
    /// AppDef name.
    pub name: String,
    /// Session name.
    pub session: String,
    /// Why it is in that state.
    pub msg: String,
    /// Log directory.
    pub log_dir: String,
    /// Restarts performed under the retry policy.
    pub num_restarts: i64,
    /// The AppDef, as JSON.
    pub app_json: String,
}

/// One replica's current attempt.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::schedulers::local_cwd) struct ReplicaRow {
    /// Index of its role in the app.
    pub role_idx: u32,
    /// Replica index within the role.
    pub replica_id: u32,
    /// Role name.
    pub role: String,
    /// State of the current attempt.
    pub state: AppState,
    /// 0 for the first run, +1 per restart.
    pub attempt: u32,
    /// Process id (and process group id).
    pub pid: Option<u32>,
    /// Process start time (pid-reuse guard).
    pub pid_start: Option<u64>,
    /// Exit code, once exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, once killed.
    pub signal: Option<i32>,
    /// Why it ended that way (spawn errors, who stopped it).
    pub msg: String,
    /// Start time of the current attempt.
    pub started: Option<f64>,
    /// End time of the current attempt.
    pub ended: Option<f64>,
    /// stdout log.
    pub stdout: String,
    /// stderr log.
    pub stderr: String,
    /// Combined log.
    pub combined: String,
    /// torchelastic error file.
    pub error_file: String,
}

impl ReplicaRow {
    /// A replica just recorded, not started: PENDING in attempt 0, writing to `logs` (stdout,
    /// stderr, combined, the torchelastic error file).
    pub(in crate::schedulers::local_cwd) fn pending(
        role_idx: u32,
        replica_id: u32,
        role: String,
        logs: [String; 4],
    ) -> ReplicaRow {
        let [stdout, stderr, combined, error_file] = logs;
        ReplicaRow {
            role_idx,
            replica_id,
            role,
            state: AppState::Pending,
            attempt: 0,
            pid: None,
            pid_start: None,
            exit_code: None,
            signal: None,
            msg: String::new(),
            started: None,
            ended: None,
            stdout,
            stderr,
            combined,
            error_file,
        }
    }
}

/// A finished attempt, kept as history.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::schedulers::local_cwd) struct AttemptRow {
    /// Role index.
    pub role_idx: u32,
    /// Replica index.
    pub replica_id: u32,
    /// Attempt number.
    pub attempt: u32,
    /// Process id.
    pub pid: Option<u32>,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// Signal.
    pub signal: Option<i32>,
    /// Start time.
    pub started: Option<f64>,
    /// End time.
    pub ended: Option<f64>,
    /// Why it ended (`None` in ledgers written before reasons were recorded).
    pub reason: Option<EndReason>,
}

/// The columns that decide whether an app is alive, and when it ran.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::schedulers::local_cwd) struct Liveness {
    /// App id.
    pub app_id: String,
    /// Recorded state.
    pub state: AppState,
    /// Submission time.
    pub created: f64,
    /// End time.
    pub ended: Option<f64>,
    /// The supervisor process, once started.
    pub supervisor_pid: Option<u32>,
    /// Its start time.
    pub supervisor_start: Option<u64>,
    /// The submitting process.
    pub submitter_pid: u32,
    /// Its start time.
    pub submitter_start: Option<u64>,
    /// A cancel was requested.
    pub cancel_requested: bool,
    /// The host its processes run on ([`host_key`]); `None` in rows of older versions.
    pub host: Option<String>,
}

impl Liveness {
    /// Whether its processes run on another host (or an earlier boot of this one), whose pids
    /// mean nothing here.
    pub(crate) fn elsewhere(&self) -> bool {
        self.host.as_deref().is_some_and(|h| h != host_key())
    }
}

/// This host as the ledger records it: its name and boot id.
pub(crate) fn host_key() -> String {
    let h = crate::durable::Host::this();
    format!("{} {}", h.name, h.boot)
}

pub(super) const LIVENESS_COLUMNS: &str =
    "app_id, state, created, ended, supervisor_pid, supervisor_start, \
    submitter_pid, submitter_start, cancel_requested, host";

impl Liveness {
    /// An app just recorded by its submitter: PENDING, no supervisor yet.
    pub(crate) fn submitted(
        app_id: String,
        created: f64,
        submitter: (u32, Option<u64>),
    ) -> Liveness {
        Liveness {
            app_id,
            state: AppState::Pending,
            created,
            ended: None,
            supervisor_pid: None,
            supervisor_start: None,
            submitter_pid: submitter.0,
            submitter_start: submitter.1,
            cancel_requested: false,
            host: Some(host_key()),
        }
    }
}

/// Reads [`LIVENESS_COLUMNS`] by name.
pub(super) fn liveness_row(r: &Row<'_>) -> rusqlite::Result<Liveness> {
    Ok(Liveness {
        app_id: r.get("app_id")?,
        state: state_of(r.get("state")?),
        created: r.get("created")?,
        ended: r.get("ended")?,
        supervisor_pid: r.get("supervisor_pid")?,
        supervisor_start: r
            .get::<_, Option<i64>>("supervisor_start")?
            .map(|v| v as u64),
        submitter_pid: r.get("submitter_pid")?,
        submitter_start: r
            .get::<_, Option<i64>>("submitter_start")?
            .map(|v| v as u64),
        cancel_requested: r.get("cancel_requested")?,
        host: r.get("host")?,
    })
}

/// The app-level fields the supervisor updates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::schedulers::local_cwd) struct Progress<'a> {
    /// The app's state.
    pub state: AppState,
    /// Why it is in that state.
    pub msg: &'a str,
    /// Restarts so far.
    pub num_restarts: i64,
    /// End time, once terminal.
    pub ended: Option<f64>,
}

/// What `list` needs of an app.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::schedulers::local_cwd) struct AppSummary {
    /// AppDef name.
    pub name: String,
    /// State and times.
    pub live: Liveness,
}

/// A ledger error, keeping SQLite's as its source; a busy or locked ledger is
/// [`ErrorKind::Unavailable`], an unwritable one [`ErrorKind::PermissionDenied`].
pub(super) fn db_err(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |e| {
        let kind = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                ErrorKind::Unavailable
            }
            Some(rusqlite::ErrorCode::PermissionDenied | rusqlite::ErrorCode::ReadOnly) => {
                ErrorKind::PermissionDenied
            }
            _ => ErrorKind::Backend,
        };
        let message = format!("job ledger {}: {e}", path.display());
        Error::backend_caused_by(NAME, message, kind, e)
    }
}

pub(super) fn state_of(s: String) -> AppState {
    s.parse().unwrap_or(AppState::Unknown)
}

pub(super) fn app_row(r: &Row<'_>) -> rusqlite::Result<AppRow> {
    Ok(AppRow {
        live: liveness_row(r)?,
        name: r.get("name")?,
        session: r.get("session")?,
        msg: r.get("msg")?,
        log_dir: r.get("log_dir")?,
        num_restarts: r.get("num_restarts")?,
        app_json: r.get::<_, Option<String>>("app_json")?.unwrap_or_default(),
    })
}

pub(super) const APP_COLUMNS: &str = "app_id, name, session, state, msg, created, ended, log_dir, \
    num_restarts, supervisor_pid, supervisor_start, submitter_pid, submitter_start, \
    cancel_requested, host";

pub(super) const REPLICA_COLUMNS: &str =
    "role_idx, replica_id, role, state, attempt, pid, pid_start, \
    exit_code, signal, msg, started, ended, stdout, stderr, combined, error_file";

pub(super) fn replica_row(r: &Row<'_>) -> rusqlite::Result<ReplicaRow> {
    Ok(ReplicaRow {
        role_idx: r.get("role_idx")?,
        replica_id: r.get("replica_id")?,
        role: r.get("role")?,
        state: state_of(r.get("state")?),
        attempt: r.get("attempt")?,
        pid: r.get("pid")?,
        pid_start: r.get::<_, Option<i64>>("pid_start")?.map(|v| v as u64),
        exit_code: r.get("exit_code")?,
        signal: r.get("signal")?,
        msg: r.get("msg")?,
        started: r.get("started")?,
        ended: r.get("ended")?,
        stdout: r.get("stdout")?,
        stderr: r.get("stderr")?,
        combined: r.get("combined")?,
        error_file: r.get("error_file")?,
    })
}

/// Reads an [`AttemptRow`] by column name (a reason this torchx does not know reads as none).
pub(super) fn attempt_row(r: &Row<'_>) -> rusqlite::Result<AttemptRow> {
    Ok(AttemptRow {
        role_idx: r.get("role_idx")?,
        replica_id: r.get("replica_id")?,
        attempt: r.get("attempt")?,
        pid: r.get("pid")?,
        exit_code: r.get("exit_code")?,
        signal: r.get("signal")?,
        started: r.get("started")?,
        ended: r.get("ended")?,
        reason: r
            .get::<_, Option<String>>("reason")?
            .and_then(|s| s.parse().ok()),
    })
}
