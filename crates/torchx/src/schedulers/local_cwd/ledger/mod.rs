//! The job ledger: an embedded SQLite database (WAL mode) in the state directory. Every process
//! reads and writes it directly: no daemon. SQLite gives atomic transactions (a crash mid-write
//! leaves the previous state), many concurrent readers and serialised writers (a busy timeout
//! lets 100 concurrent submitters queue instead of failing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

mod rows;
mod schema;

use rows::{
    app_row, attempt_row, db_err, liveness_row, replica_row, APP_COLUMNS, LIVENESS_COLUMNS,
    REPLICA_COLUMNS,
};
pub(super) use rows::{AppRow, AppSummary, AttemptRow, Liveness, Progress, ReplicaRow};
use schema::{CONNECTION_PRAGMAS, MIGRATIONS, SCHEMA, SCHEMA_VERSION};

use super::NAME;
use crate::error::{Error, Result};
use crate::specs::{AppState, EndReason};

/// An open ledger.
#[derive(Debug)]
pub(super) struct Ledger {
    conn: Connection,
    path: PathBuf,
}

impl Ledger {
    /// The ledger file under a state directory.
    pub(super) fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join(NAME).join("ledger.sqlite3")
    }

    /// The state directory it is under.
    pub(super) fn state_dir(&self) -> PathBuf {
        self.path
            .parent()
            .and_then(Path::parent)
            .map_or_else(PathBuf::new, Path::to_path_buf)
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
            &format!("INSERT INTO apps ({APP_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"),
            params![
                app.live.app_id,
                app.name,
                app.session,
                app.live.state.as_str(),
                app.msg,
                app.live.created,
                app.live.ended,
                app.log_dir,
                app.num_restarts,
                app.live.supervisor_pid,
                app.live.supervisor_start.map(|v| v as i64),
                app.live.submitter_pid,
                app.live.submitter_start.map(|v| v as i64),
                app.live.cancel_requested,
                app.live.host,
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
                    format!("an app with id `{}` already exists", app.live.app_id),
                )
                .with_source(e)
            } else {
                err(e)
            }
        })?;
        tx.execute(
            "INSERT OR REPLACE INTO specs (app_id, app_json, request_json) VALUES (?1, ?2, ?3)",
            params![app.live.app_id, app.app_json, request_json],
        )
        .map_err(&err)?;
        upsert_replicas(&tx, &app.live.app_id, replicas).map_err(&err)?;
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

    /// The cgroup its supervisor put the app's replicas in, if it had one.
    pub(super) fn cgroup(&self, app_id: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT cgroup FROM apps WHERE app_id = ?1")
            .and_then(|mut s| s.query_row([app_id], |r| r.get(0)).optional())
            .map(Option::flatten)
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

    /// Atomically takes charge of a PENDING app, whose replicas will live in `cgroup` (if any);
    /// false if it was cancelled (or claimed) first.
    pub(super) fn claim(
        &self,
        app_id: &str,
        pid: u32,
        start: Option<u64>,
        cgroup: Option<&Path>,
    ) -> Result<bool> {
        let cgroup = cgroup.map(|p| p.to_string_lossy().into_owned());
        self.conn
            .execute(
                "UPDATE apps SET supervisor_pid = ?2, supervisor_start = ?3, state = 'RUNNING', \
                 msg = '', cgroup = ?4 WHERE app_id = ?1 AND state = 'PENDING' \
                 AND cancel_requested = 0",
                params![app_id, pid, start.map(|v| v as i64), cgroup],
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
            .and_then(|mut s| s.query_map([app_id], attempt_row)?.collect())
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
        self.immediate(|tx| finish_in(tx, app_id, state, msg, ended))
    }

    /// Runs `work` in one write transaction taken at once (IMMEDIATE: no read that becomes a
    /// write halfway and finds the ledger busy), committed when `work` succeeds.
    fn immediate<T>(
        &mut self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let err = db_err(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        let out = work(&tx).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(out)
    }

    /// Settles a non-terminal app whose owner looks dead, in one write transaction, so that the
    /// decision and the facts it rests on cannot drift apart (a reader's snapshot may be stale:
    /// the supervisor may have claimed the app and started replicas since). Inside the
    /// transaction, which no writer can interleave with: if the app's row differs from `seen`,
    /// someone made progress and the app is left alone; else `settle` gets the row and the
    /// unfinished replicas, looks at the processes now and, on a verdict, stops them and
    /// returns the state and message to record. Returns the app's state afterwards.
    pub(super) fn settle(
        &mut self,
        seen: &Liveness,
        settle: impl FnOnce(&Liveness, &[ReplicaRow]) -> Option<(AppState, String)>,
    ) -> Result<AppState> {
        self.immediate(|tx| {
            let now_row = tx
                .prepare_cached(&format!(
                    "SELECT {LIVENESS_COLUMNS} FROM apps WHERE app_id = ?1"
                ))?
                .query_row([&seen.app_id], liveness_row)
                .optional()?;
            let Some(now_row) = now_row else {
                return Ok(seen.state);
            };
            if now_row != *seen || now_row.state.is_terminal() {
                return Ok(now_row.state);
            }
            let unfinished: Vec<ReplicaRow> = tx
                .prepare_cached(&format!(
                    "SELECT {REPLICA_COLUMNS} FROM replicas WHERE app_id = ?1 \
                     AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"
                ))?
                .query_map([&seen.app_id], replica_row)?
                .collect::<rusqlite::Result<_>>()?;
            let Some((state, msg)) = settle(&now_row, &unfinished) else {
                return Ok(now_row.state);
            };
            finish_in(tx, &seen.app_id, state, &msg, super::now())?;
            Ok(state)
        })
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
    use crate::ErrorKind;

    pub(crate) fn app(id: &str, created: f64) -> AppRow {
        AppRow {
            live: Liveness::submitted(id.into(), created, (1, None)),
            name: "echo".into(),
            session: "torchx".into(),
            msg: String::new(),
            log_dir: "/l".into(),
            num_restarts: 0,
            app_json: "{}".into(),
        }
    }

    fn replica(i: u32) -> ReplicaRow {
        ReplicaRow::pending(0, i, "echo".into(), ["o", "e", "c", "x"].map(String::from))
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
        assert_eq!((a.live.state, a.msg.as_str()), (AppState::Failed, "lost"));
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

    /// A ledger of schema 1 (attempts without reasons, apps without cgroups or hosts) is
    /// upgraded in place: its rows stay, new attempts record why they ended and apps their
    /// cgroup and host.
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
             1, NULL, 1.0, 2.0); ALTER TABLE apps DROP COLUMN cgroup; DROP INDEX apps_list; \
             ALTER TABLE apps DROP COLUMN host; CREATE INDEX apps_list ON apps(created, name, \
             app_id, state, ended, supervisor_pid, supervisor_start, submitter_pid, \
             submitter_start, cancel_requested); PRAGMA user_version=1;",
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
        assert_eq!(l.cgroup("a-1").unwrap(), None);
        let live = l.app_liveness("a-1").unwrap().unwrap();
        assert!(live.host.is_some() && !live.elsewhere(), "{live:?}");
        l.insert_app(&app("a-2", 1.0), "{}", &[replica(0)]).unwrap();
        assert!(l
            .claim("a-2", 7, None, Some(Path::new("/cg/torchx-a-2")))
            .unwrap());
        assert_eq!(l.cgroup("a-2").unwrap().as_deref(), Some("/cg/torchx-a-2"));
    }
}
