//! The job ledger: an embedded SQLite database (WAL mode) in the state directory. Every process
//! reads and writes it directly: no daemon. SQLite gives atomic transactions (a crash mid-write
//! leaves the previous state), many concurrent readers and serialised writers (a busy timeout
//! lets 100 concurrent submitters queue instead of failing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row};

use super::NAME;
use crate::error::{Error, ErrorKind, Result};
use crate::specs::{AppState, EndReason};

/// Bumped when the schema changes incompatibly.
const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS apps (
    app_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    session TEXT NOT NULL,
    state TEXT NOT NULL,
    msg TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    ended REAL,
    log_dir TEXT NOT NULL,
    num_restarts INTEGER NOT NULL DEFAULT 0,
    supervisor_pid INTEGER,
    supervisor_start INTEGER,
    submitter_pid INTEGER NOT NULL,
    submitter_start INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
-- Covers `list`, which then never reads the table itself.
CREATE INDEX IF NOT EXISTS apps_list ON apps(created, name, app_id, state, ended, supervisor_pid,
    supervisor_start, submitter_pid, submitter_start, cancel_requested);
-- The bulky parts live apart, so that `list` reads only small rows.
CREATE TABLE IF NOT EXISTS specs (
    app_id TEXT PRIMARY KEY,
    app_json TEXT NOT NULL,
    request_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS replicas (
    app_id TEXT NOT NULL,
    role_idx INTEGER NOT NULL,
    replica_id INTEGER NOT NULL,
    role TEXT NOT NULL,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    pid_start INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    msg TEXT NOT NULL DEFAULT '',
    started REAL,
    ended REAL,
    stdout TEXT NOT NULL,
    stderr TEXT NOT NULL,
    combined TEXT NOT NULL,
    error_file TEXT NOT NULL,
    PRIMARY KEY (app_id, role_idx, replica_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    app_id TEXT NOT NULL,
    role_idx INTEGER NOT NULL,
    replica_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    started REAL,
    ended REAL,
    reason TEXT,
    PRIMARY KEY (app_id, role_idx, replica_id, attempt)
);
";

/// What brings a ledger of each older schema version to the current one, in order.
const MIGRATIONS: [(i64, &str); 1] = [
    // Version 2: why each attempt ended (`succeeded`, `requeued`, `timeout`, ...).
    (1, "ALTER TABLE attempts ADD COLUMN reason TEXT;"),
];

/// Per connection: WAL commits without fsync (atomic, durable up to the last checkpoint), and
/// reads through mmap rather than copies.
const CONNECTION_PRAGMAS: &str = "PRAGMA synchronous=NORMAL; PRAGMA mmap_size=268435456;";

/// One app.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AppRow {
    /// App id.
    pub app_id: String,
    /// AppDef name.
    pub name: String,
    /// Session name.
    pub session: String,
    /// Recorded state (see [`super::state::reconcile`] for apps whose supervisor died).
    pub state: AppState,
    /// Why it is in that state.
    pub msg: String,
    /// Submission time (unix seconds).
    pub created: f64,
    /// End time (unix seconds), once terminal.
    pub ended: Option<f64>,
    /// Log directory.
    pub log_dir: String,
    /// Restarts performed under the retry policy.
    pub num_restarts: i64,
    /// The supervisor process, once started.
    pub supervisor_pid: Option<u32>,
    /// Its start time (pid-reuse guard).
    pub supervisor_start: Option<u64>,
    /// The process that submitted it (it starts the supervisor).
    pub submitter_pid: u32,
    /// Its start time.
    pub submitter_start: Option<u64>,
    /// A cancel was requested.
    pub cancel_requested: bool,
    /// The AppDef, as JSON.
    pub app_json: String,
}

/// One replica's current attempt.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ReplicaRow {
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

/// A finished attempt, kept as history.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AttemptRow {
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
pub(super) struct Liveness {
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
}

const LIVENESS_COLUMNS: &str = "app_id, state, created, ended, supervisor_pid, supervisor_start, \
    submitter_pid, submitter_start, cancel_requested";

/// Reads [`LIVENESS_COLUMNS`], which are the last columns of the row.
fn liveness_row(r: &Row<'_>) -> rusqlite::Result<Liveness> {
    let base = r.as_ref().column_count() - 9;
    Ok(Liveness {
        app_id: r.get(base)?,
        state: state_of(r.get(base + 1)?),
        created: r.get(base + 2)?,
        ended: r.get(base + 3)?,
        supervisor_pid: r.get(base + 4)?,
        supervisor_start: r.get::<_, Option<i64>>(base + 5)?.map(|v| v as u64),
        submitter_pid: r.get(base + 6)?,
        submitter_start: r.get::<_, Option<i64>>(base + 7)?.map(|v| v as u64),
        cancel_requested: r.get(base + 8)?,
    })
}

/// The app-level fields the supervisor updates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Progress<'a> {
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
pub(super) struct AppSummary {
    /// AppDef name.
    pub name: String,
    /// State and times.
    pub live: Liveness,
}

/// An open ledger.
#[derive(Debug)]
pub(super) struct Ledger {
    conn: Connection,
    path: PathBuf,
}

/// A ledger error, keeping SQLite's as its source; a busy or locked ledger is
/// [`ErrorKind::Unavailable`], an unwritable one [`ErrorKind::PermissionDenied`].
fn db_err(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
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

fn state_of(s: String) -> AppState {
    s.parse().unwrap_or(AppState::Unknown)
}

fn app_row(r: &Row<'_>) -> rusqlite::Result<AppRow> {
    Ok(AppRow {
        app_id: r.get(0)?,
        name: r.get(1)?,
        session: r.get(2)?,
        state: state_of(r.get(3)?),
        msg: r.get(4)?,
        created: r.get(5)?,
        ended: r.get(6)?,
        log_dir: r.get(7)?,
        num_restarts: r.get(8)?,
        supervisor_pid: r.get(9)?,
        supervisor_start: r.get::<_, Option<i64>>(10)?.map(|v| v as u64),
        submitter_pid: r.get(11)?,
        submitter_start: r.get::<_, Option<i64>>(12)?.map(|v| v as u64),
        cancel_requested: r.get(13)?,
        app_json: r.get::<_, Option<String>>(14)?.unwrap_or_default(),
    })
}

const APP_COLUMNS: &str = "app_id, name, session, state, msg, created, ended, log_dir, \
    num_restarts, supervisor_pid, supervisor_start, submitter_pid, submitter_start, \
    cancel_requested";

const REPLICA_COLUMNS: &str = "role_idx, replica_id, role, state, attempt, pid, pid_start, \
    exit_code, signal, msg, started, ended, stdout, stderr, combined, error_file";

fn replica_row(r: &Row<'_>) -> rusqlite::Result<ReplicaRow> {
    Ok(ReplicaRow {
        role_idx: r.get(0)?,
        replica_id: r.get(1)?,
        role: r.get(2)?,
        state: state_of(r.get(3)?),
        attempt: r.get(4)?,
        pid: r.get(5)?,
        pid_start: r.get::<_, Option<i64>>(6)?.map(|v| v as u64),
        exit_code: r.get(7)?,
        signal: r.get(8)?,
        msg: r.get(9)?,
        started: r.get(10)?,
        ended: r.get(11)?,
        stdout: r.get(12)?,
        stderr: r.get(13)?,
        combined: r.get(14)?,
        error_file: r.get(15)?,
    })
}

impl Ledger {
    /// The ledger file under a state directory.
    pub(super) fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join(NAME).join("ledger.sqlite3")
    }

    /// Opens (creating if needed, owner-only) the ledger under `state_dir`.
    pub(super) fn open(state_dir: &Path) -> Result<Ledger> {
        let dir = state_dir.join(NAME);
        crate::schedulers::create_private_dir(&dir)?;
        let path = Self::path_in(state_dir);
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(db_err(&path))?;
        restrict_to_owner(&path)?;
        let ledger = Ledger { conn, path };
        ledger.setup()?;
        Ok(ledger)
    }

    fn setup(&self) -> Result<()> {
        let err = db_err(&self.path);
        self.conn
            .busy_timeout(Duration::from_secs(60))
            .map_err(&err)?;
        // The last connection to close would otherwise checkpoint the WAL into the database
        // and fsync it, which every short-lived command paid for; SQLite's automatic
        // checkpoint (every 1000 pages) bounds the WAL instead.
        self.conn
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(&err)?;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(&err)?;
        if version == SCHEMA_VERSION {
            return self.conn.execute_batch(CONNECTION_PRAGMAS).map_err(&err);
        }
        if version > SCHEMA_VERSION {
            return Err(Error::backend(
                NAME,
                format!(
                    "job ledger {} was written by a newer torchx (schema {version}, this one \
                     knows {SCHEMA_VERSION}); upgrade torchx or point TORCHX_STATE_DIR elsewhere",
                    self.path.display()
                ),
            ));
        }
        // First use: several processes may race here; the busy timeout serialises them and
        // everything below is idempotent.
        retry_busy(|| {
            self.conn
                .query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        })
        .map_err(&err)?;
        // The version is read again under the write lock: a racing process may have upgraded.
        retry_busy(|| {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            let upgraded = (|| {
                let version: i64 = self
                    .conn
                    .query_row("PRAGMA user_version", [], |r| r.get(0))?;
                if version == 0 {
                    self.conn.execute_batch(SCHEMA)?;
                } else {
                    for (from, step) in MIGRATIONS {
                        if version <= from {
                            self.conn.execute_batch(step)?;
                        }
                    }
                }
                self.conn
                    .execute_batch(&format!("PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"))
            })();
            if upgraded.is_err() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            upgraded
        })
        .map_err(&err)?;
        self.conn.execute_batch(CONNECTION_PRAGMAS).map_err(&err)
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        db_err(&self.path)
    }

    /// Records a new app, its native request and its replicas (one transaction).
    pub(super) fn insert_app(
        &mut self,
        app: &AppRow,
        request_json: &str,
        replicas: &[ReplicaRow],
    ) -> Result<()> {
        let path = self.path.clone();
        let err = db_err(&path);
        let tx = self.conn.transaction().map_err(&err)?;
        tx.execute(
            &format!("INSERT INTO apps ({APP_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
            params![
                app.app_id,
                app.name,
                app.session,
                app.state.as_str(),
                app.msg,
                app.created,
                app.ended,
                app.log_dir,
                app.num_restarts,
                app.supervisor_pid,
                app.supervisor_start.map(|v| v as i64),
                app.submitter_pid,
                app.submitter_start.map(|v| v as i64),
                app.cancel_requested,
            ],
        )
        .map_err(|e| {
            // Only the app id's own constraint is a clash; another one (a NOT NULL, say) is
            // a broken ledger, not something that exists.
            let duplicate = e.sqlite_error().is_some_and(|s| {
                [
                    rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE,
                ]
                .contains(&s.extended_code)
            });
            if duplicate {
                Error::already_exists(
                    NAME,
                    format!("an app with id `{}` already exists", app.app_id),
                )
                .with_source(e)
            } else {
                err(e)
            }
        })?;
        tx.execute(
            "INSERT OR REPLACE INTO specs (app_id, app_json, request_json) VALUES (?1, ?2, ?3)",
            params![app.app_id, app.app_json, request_json],
        )
        .map_err(&err)?;
        upsert_replicas(&tx, &app.app_id, replicas).map_err(&err)?;
        tx.commit().map_err(&err)
    }

    /// One app, if recorded.
    pub(super) fn app(&self, app_id: &str) -> Result<Option<AppRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {APP_COLUMNS}, app_json FROM apps LEFT JOIN specs USING (app_id) \
                 WHERE app_id = ?1"
            ))
            .and_then(|mut s| s.query_row([app_id], app_row).optional())
            .map_err(self.err())
    }

    /// The native request an app was submitted with.
    pub(super) fn request_json(&self, app_id: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT request_json FROM specs WHERE app_id = ?1")
            .and_then(|mut s| s.query_row([app_id], |r| r.get(0)).optional())
            .map_err(self.err())
    }

    /// What decides whether an app is still alive (cheap; for followers polling it).
    pub(super) fn app_liveness(&self, app_id: &str) -> Result<Option<Liveness>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {LIVENESS_COLUMNS} FROM apps WHERE app_id = ?1"
            ))
            .and_then(|mut s| s.query_row([app_id], liveness_row).optional())
            .map_err(self.err())
    }

    /// Atomically takes charge of a PENDING app; false if it was cancelled (or claimed) first.
    pub(super) fn claim(&self, app_id: &str, pid: u32, start: Option<u64>) -> Result<bool> {
        self.conn
            .execute(
                "UPDATE apps SET supervisor_pid = ?2, supervisor_start = ?3, state = 'RUNNING', \
                 msg = '' WHERE app_id = ?1 AND state = 'PENDING' AND cancel_requested = 0",
                params![app_id, pid, start.map(|v| v as i64)],
            )
            .map(|n| n == 1)
            .map_err(self.err())
    }

    /// Makes the supervisor `pid` the owner of a PENDING app that waits for its dependencies,
    /// saying so in its message (it stays PENDING); false if it was cancelled or claimed.
    pub(super) fn claim_waiting(
        &self,
        app_id: &str,
        pid: u32,
        start: Option<u64>,
        msg: &str,
    ) -> Result<bool> {
        self.conn
            .execute(
                "UPDATE apps SET supervisor_pid = ?2, supervisor_start = ?3, msg = ?4 \
                 WHERE app_id = ?1 AND state = 'PENDING' AND cancel_requested = 0 \
                 AND supervisor_pid IS NULL",
                params![app_id, pid, start.map(|v| v as i64), msg],
            )
            .map(|n| n == 1)
            .map_err(self.err())
    }

    /// The message of a PENDING app (what it waits for).
    pub(super) fn set_pending_msg(&self, app_id: &str, msg: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE apps SET msg = ?2 WHERE app_id = ?1 AND state = 'PENDING'",
                params![app_id, msg],
            )
            .map(|_| ())
            .map_err(self.err())
    }

    /// An app's replicas in role order.
    pub(super) fn replicas(&self, app_id: &str) -> Result<Vec<ReplicaRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {REPLICA_COLUMNS} FROM replicas WHERE app_id = ?1 ORDER BY role_idx, replica_id"
            ))
            .and_then(|mut s| s.query_map([app_id], replica_row)?.collect())
            .map_err(self.err())
    }

    /// Replica `k` of `role` (the k-th of that role's replicas).
    pub(super) fn replica(&self, app_id: &str, role: &str, k: u32) -> Result<Option<ReplicaRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {REPLICA_COLUMNS} FROM replicas WHERE app_id = ?1 AND role = ?2 \
                 ORDER BY role_idx, replica_id LIMIT 1 OFFSET ?3"
            ))
            .and_then(|mut s| {
                s.query_row(params![app_id, role, k], replica_row)
                    .optional()
            })
            .map_err(self.err())
    }

    /// An app's finished attempts, oldest first.
    pub(super) fn attempts(&self, app_id: &str) -> Result<Vec<AttemptRow>> {
        self.conn
            .prepare_cached(
                "SELECT role_idx, replica_id, attempt, pid, exit_code, signal, started, ended, \
                 reason FROM attempts WHERE app_id = ?1 ORDER BY role_idx, replica_id, attempt",
            )
            .and_then(|mut s| {
                s.query_map([app_id], |r| {
                    Ok(AttemptRow {
                        role_idx: r.get(0)?,
                        replica_id: r.get(1)?,
                        attempt: r.get(2)?,
                        pid: r.get(3)?,
                        exit_code: r.get(4)?,
                        signal: r.get(5)?,
                        started: r.get(6)?,
                        ended: r.get(7)?,
                        reason: r.get::<_, Option<String>>(8)?.and_then(|s| s.parse().ok()),
                    })
                })?
                .collect()
            })
            .map_err(self.err())
    }

    /// Every app, newest first.
    pub(super) fn list(&self) -> Result<Vec<AppSummary>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT name, {LIVENESS_COLUMNS} FROM apps ORDER BY created DESC"
            ))
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok(AppSummary {
                        name: r.get(0)?,
                        live: liveness_row(r)?,
                    })
                })?
                .collect()
            })
            .map_err(self.err())
    }

    /// Flags a cancel request; false if the app is unknown.
    pub(super) fn request_cancel(&self, app_id: &str) -> Result<bool> {
        self.conn
            .execute(
                "UPDATE apps SET cancel_requested = 1 WHERE app_id = ?1",
                [app_id],
            )
            .map(|n| n > 0)
            .map_err(self.err())
    }

    /// Saves the supervisor's view of an app in one transaction: app state, changed replicas and
    /// finished attempts.
    pub(super) fn save(
        &mut self,
        app_id: &str,
        progress: &Progress<'_>,
        replicas: &[ReplicaRow],
        attempts: &[AttemptRow],
    ) -> Result<()> {
        let path = self.path.clone();
        let err = db_err(&path);
        let tx = self.conn.transaction().map_err(&err)?;
        tx.execute(
            "UPDATE apps SET state = ?2, msg = ?3, num_restarts = ?4, ended = ?5 WHERE app_id = ?1",
            params![
                app_id,
                progress.state.as_str(),
                progress.msg,
                progress.num_restarts,
                progress.ended
            ],
        )
        .map_err(&err)?;
        upsert_replicas(&tx, app_id, replicas).map_err(&err)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO attempts (app_id, role_idx, replica_id, attempt, pid, \
                     exit_code, signal, started, ended, reason) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .map_err(&err)?;
            for a in attempts {
                stmt.execute(params![
                    app_id,
                    a.role_idx,
                    a.replica_id,
                    a.attempt,
                    a.pid,
                    a.exit_code,
                    a.signal,
                    a.started,
                    a.ended,
                    a.reason.map(EndReason::as_str)
                ])
                .map_err(&err)?;
            }
        }
        tx.commit().map_err(&err)
    }

    /// Marks a non-terminal app terminal (and its unfinished replicas with it). Returns false if
    /// it was already terminal, so that concurrent reconcilers agree on one outcome.
    pub(super) fn finish_if_unfinished(
        &mut self,
        app_id: &str,
        state: AppState,
        msg: &str,
        ended: f64,
    ) -> Result<bool> {
        let path = self.path.clone();
        let err = db_err(&path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        let finished = finish_in(&tx, app_id, state, msg, ended).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(finished)
    }

    /// Settles a non-terminal app whose owner looks dead, in one write transaction, so that the
    /// decision and the facts it rests on cannot drift apart (a reader's snapshot may be stale:
    /// the supervisor may have claimed the app and started replicas since). Inside the
    /// transaction, which no writer can interleave with: if the app's row differs from `seen`,
    /// someone made progress and the app is left alone; else `decide` looks at the processes
    /// now and, on a verdict, `stop` gets the unfinished replicas before the verdict is
    /// recorded. Returns the app's state afterwards.
    pub(super) fn settle(
        &mut self,
        seen: &Liveness,
        decide: impl FnOnce(&Liveness) -> Option<(AppState, String)>,
        stop: impl FnOnce(&[ReplicaRow]),
    ) -> Result<AppState> {
        let path = self.path.clone();
        let err = db_err(&path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        let now_row = tx
            .prepare_cached(&format!(
                "SELECT {LIVENESS_COLUMNS} FROM apps WHERE app_id = ?1"
            ))
            .and_then(|mut s| s.query_row([&seen.app_id], liveness_row).optional())
            .map_err(&err)?;
        let Some(now_row) = now_row else {
            return Ok(seen.state);
        };
        if now_row != *seen || now_row.state.is_terminal() {
            return Ok(now_row.state);
        }
        let Some((state, msg)) = decide(&now_row) else {
            return Ok(now_row.state);
        };
        let unfinished: Vec<ReplicaRow> = tx
            .prepare_cached(&format!(
                "SELECT {REPLICA_COLUMNS} FROM replicas WHERE app_id = ?1 \
                 AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"
            ))
            .and_then(|mut s| s.query_map([&seen.app_id], replica_row)?.collect())
            .map_err(&err)?;
        stop(&unfinished);
        finish_in(&tx, &seen.app_id, state, &msg, super::now()).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(state)
    }

    /// Copies what the WAL holds into the database file, as far as readers allow (a passive
    /// checkpoint never waits for them). Best effort: a failure leaves the WAL as it was.
    pub(super) fn checkpoint(&self) {
        if let Err(e) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        {
            log::debug!("checkpointing {}: {e}", self.path.display());
        }
    }

    /// Forgets an app; false if it was unknown.
    pub(super) fn delete(&mut self, app_id: &str) -> Result<bool> {
        let path = self.path.clone();
        let err = db_err(&path);
        let tx = self.conn.transaction().map_err(&err)?;
        let n = tx
            .execute("DELETE FROM apps WHERE app_id = ?1", [app_id])
            .map_err(&err)?;
        for table in ["specs", "replicas", "attempts"] {
            tx.execute(&format!("DELETE FROM {table} WHERE app_id = ?1"), [app_id])
                .map_err(&err)?;
        }
        tx.commit().map_err(&err)?;
        Ok(n > 0)
    }
}

/// Within `tx`: marks a non-terminal app terminal, with its unfinished replicas; false if it
/// was terminal already.
fn finish_in(
    tx: &rusqlite::Transaction<'_>,
    app_id: &str,
    state: AppState,
    msg: &str,
    ended: f64,
) -> rusqlite::Result<bool> {
    let n = tx.execute(
        "UPDATE apps SET state = ?2, msg = ?3, ended = ?4 WHERE app_id = ?1 \
         AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')",
        params![app_id, state.as_str(), msg, ended],
    )?;
    if n > 0 {
        // The attempt each unfinished replica was in ends here too: `status` lists it (a
        // supervisor killed mid-attempt must not make the running attempt disappear). One the
        // supervisor recorded already is left as it is.
        let reason = match state {
            AppState::Cancelled => EndReason::Cancelled,
            _ => EndReason::Failed,
        };
        tx.execute(
            "INSERT OR IGNORE INTO attempts (app_id, role_idx, replica_id, attempt, pid, \
             exit_code, signal, started, ended, reason) \
             SELECT app_id, role_idx, replica_id, attempt, pid, NULL, NULL, started, ?2, ?3 \
             FROM replicas WHERE app_id = ?1 AND started IS NOT NULL \
             AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')",
            params![app_id, ended, reason.as_str()],
        )?;
        tx.execute(
            "UPDATE replicas SET state = ?2, ended = ?3 WHERE app_id = ?1 \
             AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')",
            params![app_id, state.as_str(), ended],
        )?;
    }
    Ok(n > 0)
}

fn upsert_replicas(
    tx: &rusqlite::Transaction<'_>,
    app_id: &str,
    replicas: &[ReplicaRow],
) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(&format!(
        "INSERT OR REPLACE INTO replicas (app_id, {REPLICA_COLUMNS}) VALUES \
         (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
    ))?;
    for r in replicas {
        stmt.execute(params![
            app_id,
            r.role_idx,
            r.replica_id,
            r.role,
            r.state.as_str(),
            r.attempt,
            r.pid,
            r.pid_start.map(|v| v as i64),
            r.exit_code,
            r.signal,
            r.msg,
            r.started,
            r.ended,
            r.stdout,
            r.stderr,
            r.combined,
            r.error_file
        ])?;
    }
    Ok(())
}

/// Retries an operation that SQLite refused with BUSY/LOCKED outside the busy handler's reach
/// (journal-mode changes on a brand-new file).
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut delay = Duration::from_millis(2);
    for _ in 0..200 {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
    f()
}

/// Makes the ledger file owner-only (SQLite gives its -wal and -shm files the same mode).
fn restrict_to_owner(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let err = |e| Error::io(format!("setting permissions of {}", path.display()), e);
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn app(id: &str, created: f64) -> AppRow {
        AppRow {
            app_id: id.into(),
            name: "echo".into(),
            session: "torchx".into(),
            state: AppState::Pending,
            msg: String::new(),
            created,
            ended: None,
            log_dir: "/l".into(),
            num_restarts: 0,
            supervisor_pid: None,
            supervisor_start: None,
            submitter_pid: 1,
            submitter_start: None,
            cancel_requested: false,
            app_json: "{}".into(),
        }
    }

    fn replica(i: u32) -> ReplicaRow {
        ReplicaRow {
            role_idx: 0,
            replica_id: i,
            role: "echo".into(),
            state: AppState::Pending,
            attempt: 0,
            pid: None,
            pid_start: None,
            exit_code: None,
            signal: None,
            msg: String::new(),
            started: None,
            ended: None,
            stdout: "o".into(),
            stderr: "e".into(),
            combined: "c".into(),
            error_file: "x".into(),
        }
    }

    #[test]
    fn roundtrip_and_concurrent_finish() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        l.insert_app(&app("a-1", 1.0), "{}", &[replica(0), replica(1)])
            .unwrap();
        l.insert_app(&app("a-2", 2.0), "{}", &[replica(0)]).unwrap();
        let dup = l.insert_app(&app("a-2", 2.0), "{}", &[]).unwrap_err();
        assert!(dup.to_string().contains("already exists"), "{dup}");
        assert_eq!(dup.kind(), ErrorKind::AlreadyExists);
        let ids: Vec<String> = l
            .list()
            .unwrap()
            .into_iter()
            .map(|a| a.live.app_id)
            .collect();
        assert_eq!(ids, ["a-2", "a-1"]);
        let mut r = replica(1);
        r.state = AppState::Failed;
        r.exit_code = Some(3);
        let progress = Progress {
            state: AppState::Running,
            msg: "",
            num_restarts: 1,
            ended: None,
        };
        l.save("a-1", &progress, &[r.clone()], &[]).unwrap();
        assert_eq!(l.replicas("a-1").unwrap()[1], r);
        assert_eq!(l.app("a-1").unwrap().unwrap().num_restarts, 1);
        // A second ledger handle (another process) sees it, and only one reconciler wins.
        let mut other = Ledger::open(dir.path()).unwrap();
        assert!(other
            .finish_if_unfinished("a-1", AppState::Failed, "lost", 9.0)
            .unwrap());
        assert!(!l
            .finish_if_unfinished("a-1", AppState::Cancelled, "x", 9.0)
            .unwrap());
        let a = l.app("a-1").unwrap().unwrap();
        assert_eq!((a.state, a.msg.as_str()), (AppState::Failed, "lost"));
        assert_eq!(l.replicas("a-1").unwrap()[0].state, AppState::Failed);
        assert!(l.delete("a-1").unwrap());
        assert!(!l.delete("a-1").unwrap());
        assert!(l.replicas("a-1").unwrap().is_empty());
    }

    #[test]
    fn private_and_versioned() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        Ledger::open(&state).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state.join(NAME)), 0o700);
        assert_eq!(mode(&Ledger::path_in(&state)), 0o600);
        let conn = Connection::open(Ledger::path_in(&state)).unwrap();
        conn.execute_batch("PRAGMA user_version=99").unwrap();
        let e = Ledger::open(&state).unwrap_err();
        assert!(e.to_string().contains("newer torchx"), "{e}");
    }

    /// A ledger of schema 1 (attempts without reasons) is upgraded in place: its rows stay, and
    /// new attempts record why they ended.
    #[test]
    fn an_older_ledger_is_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        Ledger::open(&state).unwrap();
        let conn = Connection::open(Ledger::path_in(&state)).unwrap();
        conn.execute_batch(
            "DROP TABLE attempts; CREATE TABLE attempts (app_id TEXT NOT NULL, role_idx INTEGER \
             NOT NULL, replica_id INTEGER NOT NULL, attempt INTEGER NOT NULL, pid INTEGER, \
             exit_code INTEGER, signal INTEGER, started REAL, ended REAL, PRIMARY KEY (app_id, \
             role_idx, replica_id, attempt)); INSERT INTO attempts VALUES ('a-1', 0, 0, 0, 7, \
             1, NULL, 1.0, 2.0); PRAGMA user_version=1;",
        )
        .unwrap();
        drop(conn);
        let mut l = Ledger::open(&state).unwrap();
        let old = l.attempts("a-1").unwrap();
        assert_eq!(
            (old.len(), old[0].exit_code, old[0].reason),
            (1, Some(1), None)
        );
        l.insert_app(&app("a-1", 1.0), "{}", &[replica(0)]).unwrap();
        let progress = Progress {
            state: AppState::Running,
            msg: "",
            num_restarts: 1,
            ended: None,
        };
        let requeued = AttemptRow {
            attempt: 1,
            reason: Some(EndReason::Requeued),
            ..old[0].clone()
        };
        l.save("a-1", &progress, &[], &[requeued]).unwrap();
        let reasons: Vec<_> = l
            .attempts("a-1")
            .unwrap()
            .iter()
            .map(|a| a.reason)
            .collect();
        assert_eq!(reasons, [None, Some(EndReason::Requeued)]);
    }
}
