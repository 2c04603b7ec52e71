//! `local_cwd`: replicas run as local processes in the submitter's working directory.
//!
//! - `opts`: run options; `render`: the pure dry run (`PopenRequest`);
//! - `ledger`: the job ledger (SQLite under [`super::default_state_dir`]: `$TORCHX_STATE_DIR`, else
//!   `$XDG_STATE_HOME/torchx`, else `~/.local/state/torchx`), read and written by every process;
//! - `supervisor`: the detached per-app process that owns the replicas: its I/O; `machine`:
//!   its decisions (a pure state machine: starts, retries, requeues, time limits, stops);
//!   `launch`: starting replicas and pumping their output; `guard`: the guard process and
//!   what readers do about an app whose supervisor is gone;
//! - `entry`: the hidden `__supervise`/`__guard` subcommands and which executable runs them;
//! - `plan`: this machine's CPUs, GPUs and memory against what the app asks;
//! - `state`: pure retry and liveness decisions; `sys`: the POSIX calls std lacks.
//!
//! This module is the client side: `schedule` records the app and starts its supervisor
//! (`submit`); `describe`, `list`, `log_iter` (`logs`: a replica's file, followed until the app
//! ends), `cancel` and `delete` read the ledger, so they work from any process, during and after
//! the run.

/// Writes a line to the supervisor's stderr (its log file; the guard's likewise). Never `eprintln!`, which panics when
/// the write fails, as it does on a full disk: the supervisor must outlive that.
macro_rules! note {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod after;
mod cgroup;
mod descendants;
mod entry;
mod guard;
mod launch;
mod ledger;
mod logs;
mod machine;
mod opts;
mod plan;
mod render;
mod state;
mod submit;
mod supervisor;
#[cfg(test)]
mod tests;
mod watchdog;

use crate::scheduler::HangStacks;
use crate::schedulers::off_executor;
use crate::sys;

use std::collections::HashMap;
use std::fs;

use std::path::{Path, PathBuf};

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

pub(crate) use entry::supervisor_exe as torchx_exe;
pub use entry::{embed_supervisor, use_supervisor};
use ledger::{Ledger, Liveness};
pub use opts::LocalCwdOpts;
pub use render::{render, PopenRequest, ReplicaParam, RoleParams};
pub(crate) use watchdog::{
    parse as parse_stacks, summary as stacks_summary, COLLECTIVES, FAULTHANDLER_NOTE,
    NO_PYTHON_STACK_NOTE,
};
// For local_docker's supervised containers (feature `docker`).
#[cfg_attr(not(feature = "docker"), allow(unused_imports))]
pub(crate) use watchdog::{FAULTHANDLER_ENV, HEARTBEAT_FILE_ENV};

use crate::error::{Error, ErrorKind, Result};
use crate::scheduler::{
    Backend, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery, PlanReport, Replica,
    Scheduler, WorkspaceSupport,
};
use crate::specs::{
    AppDef, AppState, Attempt, DescribeAppResponse, ListAppResponse, ReplicaStatus, Stream, NONE,
};

/// The registry name.
pub const NAME: &str = "local_cwd";
/// How long a stop waits after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(10);

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(LocalCwdScheduler::new(super::default_state_dir())))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// How many ledger connections a scheduler has open at most (each is three files: the
/// database, its WAL and shared memory); a call beyond them waits for one to be put back.
const MAX_LEDGERS: usize = 8;

/// How long a cached app state may be reused by log followers.
const STATE_CACHE: Duration = Duration::from_millis(5);

#[derive(Debug)]
struct Shared {
    state_dir: PathBuf,
    /// The supervisor executable, if not the default (see [`supervisor::supervisor_exe`]).
    supervisor: Option<PathBuf>,
    /// Ledger connections: each ledger call takes one of its own (an idle one, else a new one
    /// up to [`MAX_LEDGERS`]) and puts it back. No lock is held while SQLite works or a reader
    /// settles an app, so one slow call (a busy ledger, a stalled `docker rm`) holds up no
    /// other.
    ledgers: Mutex<Ledgers>,
    /// Signalled when a connection is put back (or one could not be opened).
    ledger_returned: Condvar,
    /// app id → (when read, state): many log followers of one app share one ledger read.
    states: Mutex<HashMap<String, (Instant, AppState)>>,
    /// Apps whose supervisor this process started → becomes true when it exits (the app's
    /// final state is then recorded): log followers wake at once instead of polling.
    exits: Mutex<HashMap<String, tokio::sync::watch::Receiver<bool>>>,
}

/// The connections of [`Shared::ledgers`].
#[derive(Debug, Default)]
struct Ledgers {
    idle: Vec<Ledger>,
    /// Open ones, idle or in use.
    open: usize,
}

/// A connection taken from [`Shared::ledgers`]; put back when dropped (even by a panic).
struct Lease<'a> {
    shared: &'a Shared,
    ledger: Option<Ledger>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut pool = self.shared.pool();
        match self.ledger.take() {
            Some(ledger) => pool.idle.push(ledger),
            None => pool.open -= 1,
        }
        self.shared.ledger_returned.notify_one();
    }
}

impl Shared {
    fn pool(&self) -> std::sync::MutexGuard<'_, Ledgers> {
        self.ledgers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on a ledger connection of its own.
    fn with_ledger<T>(&self, f: impl FnOnce(&mut Ledger) -> Result<T>) -> Result<T> {
        let mut lease = self.lease()?;
        f(lease
            .ledger
            .as_mut()
            .expect("a lease holds its ledger until dropped"))
    }

    /// An idle connection, else a new one, else (at [`MAX_LEDGERS`]) the next one put back.
    fn lease(&self) -> Result<Lease<'_>> {
        let mut pool = self.pool();
        loop {
            if let Some(ledger) = pool.idle.pop() {
                return Ok(Lease {
                    shared: self,
                    ledger: Some(ledger),
                });
            }
            if pool.open < MAX_LEDGERS {
                pool.open += 1;
                drop(pool);
                // Counted before it opens, so a failure gives its place back (the lease's drop).
                let mut lease = Lease {
                    shared: self,
                    ledger: None,
                };
                lease.ledger = Some(Ledger::open(&self.state_dir)?);
                return Ok(lease);
            }
            pool = self
                .ledger_returned
                .wait(pool)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The app's state, settling it first if its supervisor is gone.
    fn current_state(&self, app_id: &str) -> Result<Option<AppState>> {
        if let Ok(cache) = self.states.lock() {
            if let Some((at, state)) = cache.get(app_id) {
                if state.is_terminal() || at.elapsed() < STATE_CACHE {
                    return Ok(Some(*state));
                }
            }
        }
        let state = self.with_ledger(|l| {
            Ok(l.app_liveness(app_id)?
                .map(|live| guard::reconcile_for_reader(l, &live)))
        })?;
        if let (Some(s), Ok(mut cache)) = (state, self.states.lock()) {
            cache.insert(app_id.to_string(), (Instant::now(), s));
        }
        Ok(state)
    }
}

/// The local process scheduler. Its ledger work (SQLite, which may wait on its busy timeout)
/// runs on tokio's blocking pool, with a clone of this handle.
#[derive(Debug, Clone)]
pub struct LocalCwdScheduler {
    shared: Arc<Shared>,
}

impl LocalCwdScheduler {
    /// A scheduler keeping its ledger and default logs under `state_dir`.
    pub fn new(state_dir: PathBuf) -> Self {
        Self::build(state_dir, None)
    }

    /// A scheduler whose apps are supervised by `exe` (a `torchx` binary, or any program that
    /// calls [`embed_supervisor`]) rather than by `$TORCHX_SUPERVISOR` or this program.
    pub fn with_supervisor(state_dir: PathBuf, exe: PathBuf) -> Self {
        Self::build(state_dir, Some(exe))
    }

    fn build(state_dir: PathBuf, supervisor: Option<PathBuf>) -> Self {
        LocalCwdScheduler {
            shared: Arc::new(Shared {
                state_dir,
                supervisor,
                ledgers: Mutex::new(Ledgers::default()),
                ledger_returned: Condvar::new(),
                states: Mutex::new(HashMap::new()),
                exits: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn state_dir(&self) -> &Path {
        &self.shared.state_dir
    }

    /// Whether this scheduler has ever recorded an app (its ledger exists): a caller that
    /// only may have apps here asks before opening (and so creating) the ledger.
    #[cfg(feature = "docker")]
    pub(crate) fn has_ledger(&self) -> bool {
        Ledger::path_in(self.state_dir()).exists()
    }

    fn with_ledger<T>(&self, f: impl FnOnce(&mut Ledger) -> Result<T>) -> Result<T> {
        self.shared.with_ledger(f)
    }

    /// The app's liveness row, settled (reconciled) if its supervisor is gone.
    fn settled(&self, app_id: &str) -> Result<Liveness> {
        check_app_id(app_id)?;
        self.with_ledger(|l| {
            let live = l.app_liveness(app_id)?.ok_or_else(|| unknown_app(app_id))?;
            if live.state.is_terminal() {
                return Ok(live);
            }
            let state = guard::reconcile_for_reader(l, &live);
            let mut now = l.app_liveness(app_id)?.ok_or_else(|| unknown_app(app_id))?;
            if state.is_terminal() && !now.state.is_terminal() {
                // Not recorded yet (the ledger cannot be written, or the guard records the
                // outcome): shown as it will be.
                now.state = state;
            }
            Ok(now)
        })
    }

    fn describe_app(&self, live: &Liveness) -> Result<Option<DescribeAppResponse>> {
        let app_id = &live.app_id;
        let (app, replicas, attempts, cgroup) = self.with_ledger(|l| {
            Ok((
                l.app(app_id)?,
                l.replicas(app_id)?,
                l.attempts(app_id)?,
                l.cgroup(app_id)?,
            ))
        })?;
        let Some(app) = app else {
            return Ok(None);
        };
        // A verdict not recorded yet (see `settled`) wins over the stale row, with its reason.
        let (state, msg) = if live.state.is_terminal() && !app.live.state.is_terminal() {
            guard::verdict(&app.live, None).unwrap_or_else(|| (live.state, app.msg.clone()))
        } else {
            (app.live.state, app.msg.clone())
        };
        let mut resp = DescribeAppResponse::new(app_id, state);
        resp.msg = msg;
        resp.num_restarts = app.num_restarts;
        resp.ui_url = Some(format!("file://{}", app.log_dir));
        if let Ok(def) = serde_json::from_str::<AppDef>(&app.app_json) {
            resp.roles = def.roles;
        }
        resp.metadata
            .insert("created".into(), format!("{:.3}", app.live.created));
        if let Some(e) = app.live.ended {
            resp.metadata.insert("ended".into(), format!("{e:.3}"));
        }
        if let Some(p) = app.live.supervisor_pid {
            resp.metadata.insert("supervisor_pid".into(), p.to_string());
        }
        resp.metadata.insert("log_dir".into(), app.log_dir.clone());
        // Where every process of its replicas lives (removed once they are gone).
        if let Some(cgroup) = cgroup {
            resp.metadata.insert("cgroup".into(), cgroup);
        }
        // The earliest torchelastic error file, as TorchX reports it.
        let mut errors: Vec<(SystemTime, String)> = Vec::new();
        for r in &replicas {
            let mut status = ReplicaStatus::new(r.replica_id, r.state, &r.role, "localhost");
            status.attempts = attempts
                .iter()
                .filter(|a| (a.role_idx, a.replica_id) == (r.role_idx, r.replica_id))
                .map(|a| Attempt {
                    attempt: a.attempt,
                    started: a.started,
                    ended: a.ended,
                    exit_code: a.exit_code,
                    signal: a.signal,
                    reason: a.reason,
                })
                .collect();
            // The attempt in progress, recorded when it ends.
            if r.state == AppState::Running && status.attempts.iter().all(|a| a.attempt < r.attempt)
            {
                status.attempts.push(Attempt {
                    attempt: r.attempt,
                    started: r.started,
                    ended: None,
                    exit_code: None,
                    signal: None,
                    reason: None,
                });
            }
            if let Ok(text) = fs::read_to_string(&r.error_file) {
                let modified = fs::metadata(&r.error_file)
                    .and_then(|m| m.modified())
                    .unwrap_or(UNIX_EPOCH);
                status.structured_error_msg = text.clone();
                errors.push((modified, text));
            }
            resp.add_replica(status);
        }
        errors.sort_by_key(|e| e.0);
        resp.structured_error_msg = errors
            .into_iter()
            .next()
            .map_or_else(|| NONE.to_string(), |e| e.1);
        Ok(Some(resp))
    }

    /// The app's liveness, settled, off the async executor.
    async fn settled_off_executor(&self, app_id: &str) -> Result<Liveness> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.settled(&app_id)).await
    }

    /// Requests a cancel and waits until the app has stopped.
    async fn cancel_and_wait(&self, app_id: &str) -> Result<()> {
        let id = app_id.to_string();
        let requested = off_executor(self, move |s| {
            let live = s.settled(&id)?;
            if live.state.is_terminal() {
                return Ok(false);
            }
            if live.elsewhere() {
                return Err(Error::backend(
                    NAME,
                    format!(
                        "app {id} runs on another host ({}): its processes are that host's, \
                         cancel it there",
                        live.host.as_deref().unwrap_or_default()
                    ),
                ));
            }
            s.with_ledger(|l| l.request_cancel(&id))?;
            if let Some(pid) = live.supervisor_pid {
                if sys::pid_alive(pid, live.supervisor_start) {
                    sys::signal_pid(pid, sys::SIGTERM);
                }
            }
            Ok(true)
        })
        .await?;
        if !requested {
            return Ok(());
        }
        // The supervisor escalates to SIGKILL after GRACE; past that (plus slack) it is not
        // answering (stopped, hung): stop what it owns ourselves.
        let deadline = Instant::now() + GRACE + Duration::from_secs(3);
        let mut pause = Duration::from_millis(1);
        loop {
            let live = self.settled_off_executor(app_id).await?;
            if live.state.is_terminal() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return off_executor(self, move |s| s.cancel_without_supervisor(&live)).await;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// Cancels an app whose supervisor does not respond: kills the supervisor (so it cannot
    /// restart anything or overwrite the record when it wakes) and every unfinished replica's
    /// process group, each verified by pid and start time, and records CANCELLED, all in one
    /// ledger transaction.
    fn cancel_without_supervisor(&self, live: &Liveness) -> Result<()> {
        let msg = match live.supervisor_pid {
            Some(pid) => format!(
                "cancelled by user; its supervisor (pid {pid}) did not respond, so torchx \
                 killed the replicas"
            ),
            None => "cancelled by user".to_string(),
        };
        let state = self.with_ledger(|l| {
            let owned = guard::owned_by(l, &live.app_id);
            l.settle(live, |_, replicas| {
                if let Some(pid) = live.supervisor_pid {
                    if sys::pid_alive(pid, live.supervisor_start) {
                        sys::signal_pid(pid, sys::SIGKILL);
                    }
                }
                Some(guard::stop_then(
                    (AppState::Cancelled, msg),
                    replicas,
                    &owned,
                ))
            })
        })?;
        if state.is_terminal() {
            Ok(())
        } else {
            Err(Error::backend(
                NAME,
                format!(
                    "app {} is still {state} after cancelling it (its record changed while \
                     torchx was stopping it); try again",
                    live.app_id
                ),
            ))
        }
    }

    /// Every app, newest first, settling those whose owner is gone.
    fn list_apps(&self) -> Result<Vec<ListAppResponse>> {
        self.with_ledger(|l| {
            let mut out = Vec::new();
            for summary in l.list()? {
                let live = summary.live;
                let (state, ended) = if live.state.is_terminal() {
                    (live.state, live.ended)
                } else {
                    let state = guard::reconcile_for_reader(l, &live);
                    (state, state.is_terminal().then(now))
                };
                out.push(ListAppResponse {
                    app_id: live.app_id,
                    state,
                    app_handle: String::new(),
                    name: summary.name,
                    start_time: Some(live.created),
                    end_time: ended,
                    other_state_dir: false,
                });
            }
            Ok(out)
        })
    }

    /// Says loudly when the ledger lists no app although job logs exist: the ledger was lost or
    /// damaged (deleted, truncated), which would otherwise look like an empty history.
    fn warn_if_ledger_lost(&self) {
        let logs = self.state_dir().join(NAME).join("logs");
        let apps = fs::read_dir(&logs)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|session| fs::read_dir(session.path()).ok())
            .map(|dir| dir.count())
            .sum::<usize>();
        if apps > 0 {
            log::warn!(
                "the job ledger {} lists no jobs, but {} holds the logs of {apps} app(s): the \
                 ledger was lost or damaged; those jobs cannot be shown",
                Ledger::path_in(self.state_dir()).display(),
                logs.display()
            );
        }
    }
}

fn check_app_id(app_id: &str) -> Result<()> {
    if app_id.is_empty() || app_id.contains(['/', '\0']) || app_id.starts_with('.') {
        return Err(Error::arg(format!("invalid local_cwd app id `{app_id}`")));
    }
    Ok(())
}

fn unknown_app(app_id: &str) -> Error {
    Error::app_not_found(
        format!("{NAME}://{app_id}"),
        ", it does not exist or has been deleted",
    )
}

#[async_trait]
impl Backend for LocalCwdScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        log_since_until: false,
        mounts: false,
        workspace: WorkspaceSupport::CurrentDir,
        runs_locally: true,
        dependencies: true,
        hang_watch: true,
        ..Capabilities::ALL
    };
    type Opts = LocalCwdOpts;
    type Request = PopenRequest;
    type Facts = ();

    fn render(
        &self,
        app: &AppDef,
        opts: &LocalCwdOpts,
        ctx: &DryRunContext,
        _facts: Option<&()>,
    ) -> Result<PopenRequest> {
        let base = self.state_dir().join(NAME).join("logs");
        Ok(render(app, opts, ctx, &base))
    }

    async fn plan(&self, _req: &PopenRequest, info: &DryRunInfo) -> Result<PlanReport> {
        let app = info.app.clone();
        crate::schedulers::blocking(NAME, move || Ok(plan::plan_on_this_machine(&app))).await
    }

    async fn submit(&self, req: &PopenRequest, info: &DryRunInfo) -> Result<String> {
        let req = req.clone();
        let session = req
            .log_dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let app = info.app.clone();
        off_executor(self, move |s| s.launch(&req, &app, &session)).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| match s.settled(&app_id) {
            Ok(live) => s.describe_app(&live),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        })
        .await
    }

    /// The request it was submitted with, kept in the ledger for as long as the app is.
    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        if check_app_id(app_id).is_err() {
            return Ok(None);
        }
        let app_id = app_id.to_string();
        off_executor(self, move |s| {
            let Some(text) = s.with_ledger(|l| l.request_json(&app_id))? else {
                return Ok(None);
            };
            serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::backend(NAME, format!("the request of {app_id} in the ledger: {e}"))
            })
        })
        .await
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        off_executor(self, |s| {
            let apps = s.list_apps()?;
            if apps.is_empty() {
                s.warn_if_ledger_lost();
            }
            Ok(apps)
        })
        .await
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        self.cancel_and_wait(app_id).await
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        self.cancel_and_wait(app_id).await?;
        let app_id = app_id.to_string();
        off_executor(self, move |s| {
            let log_dir = s.with_ledger(|l| {
                let dir = l.app(&app_id)?.map(|a| a.log_dir);
                l.delete(&app_id)?;
                Ok(dir)
            })?;
            // Logs are ours to remove only when they live in the state directory.
            if let Some(dir) = log_dir.map(PathBuf::from) {
                if dir.starts_with(s.state_dir()) {
                    let _ = fs::remove_dir_all(&dir);
                }
            }
            Ok(())
        })
        .await
    }

    /// The `stacks.<attempt>` files the supervisor wrote beside each replica's logs.
    async fn hang_stacks(&self, app_id: &str, attempt: Option<u32>) -> Result<Vec<HangStacks>> {
        let id = app_id.to_string();
        off_executor(self, move |s| {
            s.settled(&id)?;
            let replicas = s.with_ledger(|l| l.replicas(&id))?;
            if replicas.is_empty() {
                return Err(Error::not_found("app", &id, ""));
            }
            let mut out = Vec::new();
            for r in replicas {
                let Some(dir) = Path::new(&r.stdout).parent() else {
                    continue;
                };
                let captured = fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        name.strip_prefix("stacks.")?.parse::<u32>().ok()
                    });
                let chosen = match attempt {
                    Some(n) => captured.filter(|&a| a == n).max(),
                    None => captured.max(),
                };
                if let Some(a) = chosen {
                    let text = fs::read_to_string(dir.join(format!("stacks.{a}")))
                        .map_err(|e| Error::io("reading a replica's stacks", e))?;
                    out.push(HangStacks {
                        role: r.role.clone(),
                        replica: r.replica_id,
                        attempt: a,
                        text,
                    });
                }
            }
            Ok(out)
        })
        .await
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        let (id, role_name) = (app_id.to_string(), role.to_string());
        // One row, not all of them: a foreground run follows every replica's log.
        let (replica, replicas) = off_executor(self, move |s| {
            s.settled(&id)?;
            match s.with_ledger(|l| l.replica(&id, &role_name, k))? {
                Some(r) => Ok((Some(r), Vec::new())),
                None => Ok((None, s.with_ledger(|l| l.replicas(&id))?)),
            }
        })
        .await?;
        let replica = match replica {
            Some(r) => r,
            None => {
                let of_role = replicas.iter().filter(|r| r.role == role).count();
                if of_role == 0 {
                    let mut names: Vec<&str> = replicas.iter().map(|r| r.role.as_str()).collect();
                    names.dedup();
                    return Err(Error::not_found(
                        "role",
                        role,
                        format!(" in app {app_id}; its roles are: {}", names.join(", ")),
                    ));
                }
                return Err(Error::not_found(
                    "replica",
                    format!("{role}/{k}"),
                    format!(" in app {app_id}; role {role} has {of_role} replica(s)"),
                ));
            }
        };
        if query.since.is_some() || query.until.is_some() {
            return Err(Error::unsupported(
                NAME,
                "log --since/--until (its logs carry no timestamps)",
            ));
        }
        let path = match query.streams.unwrap_or(Stream::Combined) {
            Stream::Stdout => &replica.stdout,
            Stream::Stderr => &replica.stderr,
            Stream::Combined => &replica.combined,
        };
        let exited = self
            .shared
            .exits
            .lock()
            .ok()
            .and_then(|e| e.get(app_id).cloned());
        Ok(Box::new(logs::FileLines::new(
            PathBuf::from(path),
            query.should_tail,
            app_id,
            Arc::clone(&self.shared),
            exited,
        )))
    }
}

/// Records `n` finished one-replica apps in the ledger under `state_dir` (for benchmarking
/// `list` on a long history). Returns the ledger's path.
#[cfg(feature = "testing")]
pub fn fill_ledger_for_benchmarks(state_dir: &Path, n: usize) -> Result<PathBuf> {
    use crate::specs::Role;
    use ledger::{AppRow, ReplicaRow};
    let mut ledger = Ledger::open(state_dir)?;
    let app = AppDef::new(
        "echo",
        vec![Role::new("echo", "img").with_entrypoint("echo")],
    );
    let app_json = serde_json::to_string(&app).expect("serialisable");
    let start = 1_700_000_000.0;
    for i in 0..n {
        let app_id = format!("echo-fill{i:06}");
        let created = start + i as f64;
        let state = [AppState::Succeeded, AppState::Failed, AppState::Cancelled][i % 3];
        let row = AppRow {
            live: Liveness {
                state,
                ended: Some(created + 0.5),
                supervisor_pid: Some(1),
                ..Liveness::submitted(app_id.clone(), created, (1, None))
            },
            name: "echo".into(),
            session: "torchx".into(),
            msg: String::new(),
            log_dir: format!("/tmp/logs/{app_id}"),
            num_restarts: 0,
            app_json: app_json.clone(),
        };
        let logs = ["stdout.log", "stderr.log", "combined.log", "error.json"]
            .map(|f| format!("/tmp/logs/{app_id}/echo/0/{f}"));
        let replica = ReplicaRow {
            state,
            pid: Some(1),
            exit_code: Some(0),
            started: Some(created),
            ended: Some(created + 0.5),
            ..ReplicaRow::pending(0, 0, "echo".into(), logs)
        };
        ledger.insert_app(&row, "{}", &[replica])?;
    }
    Ok(Ledger::path_in(state_dir))
}
