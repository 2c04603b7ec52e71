//! The supervisor: one detached process per app (`torchx __supervise`, in its own session) that
//! owns the replicas. It starts them, copies their output into the log files, records every
//! start and exit in the ledger, applies the retry policy and stops everything on cancel.
//!
//! It is single-threaded: one `poll` loop over a signalfd (SIGCHLD, SIGTERM, SIGINT, SIGHUP) and
//! the replicas' pipes. Each replica leads its own process group. A companion guard process
//! (`torchx __guard`, holding a pipe only the supervisor writes to) notices if the supervisor is
//! killed and kills the replicas' process groups, so no replica outlives a dead supervisor; if
//! the guard is killed too, the next `status`/`list`/`log` of the app does the same.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::ledger::{AttemptRow, Ledger, Liveness, Progress, ReplicaRow};
use super::render::{cuda_assignments, join_path, PopenRequest, ReplicaParam};
use super::state::{
    exit_message, on_failure, verdict_without_supervisor, Alive, Decision, RetryCounters,
};
use super::{now, GRACE, NAME};
use crate::error::{Error, Result};
use crate::specs::{AppState, RetryPolicy};
use crate::sys::{self, Exit, SignalFd};

/// Writes a line to the supervisor's stderr (its log file). Never `eprintln!`, which panics when
/// the write fails, as it does on a full disk: the supervisor must outlive that.
macro_rules! note {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The hidden subcommand that runs [`supervisor_main`].
pub const SUPERVISE_ARG: &str = "__supervise";
/// The hidden subcommand that runs [`guard_main`].
pub const GUARD_ARG: &str = "__guard";

/// Entry point of `torchx __supervise`: reads the app id from stdin, reports `ready` or
/// `failed: <why>` on stdout once the replicas are started, then supervises them to the end.
pub fn supervisor_main() -> i32 {
    let mut app_id = String::new();
    let _ = std::io::stdin().lock().read_line(&mut app_id);
    let app_id = app_id.trim().to_string();
    if app_id.is_empty() {
        note!("torchx {SUPERVISE_ARG}: expected an app id on stdin");
        return 2;
    }
    // Out of the submitter's session: terminal signals go to `torchx run`, which cancels.
    sys::setsid();
    let state_dir = crate::schedulers::default_state_dir();
    let mut sup = match Supervisor::start(&state_dir, &app_id) {
        Ok(Some(s)) => s,
        Ok(None) => {
            report("failed: cancelled before it started");
            return 0;
        }
        Err(e) => {
            note!("torchx supervisor of {app_id}: {e}");
            if let Ok(mut ledger) = Ledger::open(&state_dir) {
                let _ =
                    ledger.finish_if_unfinished(&app_id, AppState::Failed, &e.to_string(), now());
            }
            report(&format!("failed: {e}"));
            return 1;
        }
    };
    let startup_error = sup.msg.clone();
    if startup_error.is_empty() {
        report("ready");
    }
    let result = sup.run();
    if !startup_error.is_empty() {
        report(&format!("failed: {startup_error}"));
    }
    match result {
        Ok(()) => 0,
        Err(e) => {
            note!("torchx supervisor of {app_id}: {e}");
            1
        }
    }
}

fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Entry point of `torchx __guard`: reads the app id, then waits for its supervisor's pipe to
/// close. Without a final `done` the supervisor died: kill what is left and record why.
pub fn guard_main() -> i32 {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let Some(Ok(app_id)) = lines.next() else {
        return 2;
    };
    let mut outcome: Option<(AppState, String)> = None;
    let mut done = false;
    for line in lines.map_while(std::result::Result::ok) {
        if line == "done" {
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
                Some(live) => l
                    .settle(&live, |_| Some((state, msg.to_string())), stop_replicas)
                    .map(drop),
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

fn stop_replicas(replicas: &[ReplicaRow]) {
    for r in replicas {
        if let Some(pid) = r.pid {
            kill_group_if_ours(pid, r.pid_start);
        }
    }
}

/// Brings an app whose supervisor is gone to a terminal state: kills its replicas' process
/// groups and records the verdict. Returns the app's state afterwards.
///
/// `live` is the caller's snapshot. It only decides whether a closer look is worth a write lock:
/// the verdict itself is taken again inside [`Ledger::settle`]'s transaction on the current row
/// and the processes as they are then, so a stale snapshot never harms a live app.
pub fn reconcile(ledger: &mut Ledger, live: &Liveness) -> Result<AppState> {
    settle(ledger, live, None)
}

/// [`reconcile`] for a read-only command: when the ledger cannot be written (a full disk), the
/// app is shown as recorded, with a warning, rather than failing the command.
pub fn reconcile_for_reader(ledger: &mut Ledger, live: &Liveness) -> AppState {
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
    ledger.settle(live, |l| verdict(l, supervisor_alive), stop_replicas)
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

/// The state an app whose supervisor is gone is settled in (None while it is alive).
fn verdict(live: &Liveness, supervisor_alive: Option<bool>) -> Option<(AppState, String)> {
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

/// The executable that runs the supervisor: `$TORCHX_SUPERVISOR`, else this program if it
/// registered itself with [`embed_supervisor`].
pub fn supervisor_exe() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TORCHX_SUPERVISOR").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if let Some(exe) = CONFIGURED.get() {
        return Ok(exe.clone());
    }
    if EMBEDDED.get().is_some() {
        if let Ok(exe) = std::env::current_exe() {
            return Ok(exe);
        }
    }
    Err(Error::unsupported(
        NAME,
        "running apps from this program: local_cwd needs the `torchx` executable to supervise \
         them; set TORCHX_SUPERVISOR=/path/to/torchx, or call \
         torchx::schedulers::local_cwd::embed_supervisor() at the start of main()",
    ))
}

static EMBEDDED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
static CONFIGURED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `exe` (a `torchx` executable) the supervisor of the apps this process starts, unless
/// `TORCHX_SUPERVISOR` names another: how a host program that is not `torchx` (the Python
/// extension) points local_cwd at it without writing its own environment. The first call wins.
pub fn use_supervisor(exe: PathBuf) {
    let _ = CONFIGURED.set(exe);
}

/// Makes this program its own supervisor: if it was started as `__supervise` or `__guard`, runs
/// that role and exits; otherwise records that it can, and returns. Call first thing in `main`.
pub fn embed_supervisor() {
    let _ = EMBEDDED.set(());
    let arg = std::env::args_os().nth(1);
    let code = match arg.as_ref().and_then(|a| a.to_str()) {
        Some(SUPERVISE_ARG) => supervisor_main(),
        Some(GUARD_ARG) => guard_main(),
        _ => return,
    };
    std::process::exit(code);
}

struct RoleSpec {
    name: String,
    policy: RetryPolicy,
    max_retries: u32,
}

/// A pipe from a replica and the log it feeds.
struct Pipe {
    src: File,
    partial: Vec<u8>,
}

struct Proc {
    pid: u32,
    stop_sent: bool,
    /// stdout and stderr.
    pipes: [Option<Pipe>; 2],
    /// stdout, stderr and combined logs; opened once the batch of replicas being started is
    /// running (`None` if that failed: output is then dropped and the failure recorded).
    logs: Option<[File; 3]>,
}

struct Slot {
    role_idx: usize,
    param: ReplicaParam,
    env: crate::specs::Env,
    row: ReplicaRow,
    proc: Option<Proc>,
    dirty: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Running,
    /// Waiting for these slots to stop, then restarting them.
    Restarting(Vec<usize>),
    /// Stopping everything; the app ends in this state.
    Stopping(AppState),
}

struct Supervisor {
    ledger: Ledger,
    app_id: String,
    roles: Vec<RoleSpec>,
    slots: Vec<Slot>,
    counters: RetryCounters,
    num_restarts: i64,
    phase: Phase,
    msg: String,
    stop_deadline: Option<Instant>,
    signals: SignalFd,
    guard: Option<ChildStdin>,
    attempts: Vec<AttemptRow>,
    app_dirty: bool,
    /// The last ledger write failed: changes are pending.
    unsaved: bool,
    /// The first ledger write failure, for the final record.
    save_error: Option<String>,
    /// The first failed write to a log file, for the final record.
    log_error: Option<String>,
}

/// How often a failed ledger write is retried.
const SAVE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// The guard line that carries an outcome the supervisor could not record:
/// `outcome <STATE> <message>`.
const OUTCOME: &str = "outcome ";
/// How long the guard keeps trying to record such an outcome.
const GUARD_SAVE_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long the supervisor keeps trying to record the app's outcome before handing it to the
/// guard: `TORCHX_SUPERVISOR_SAVE_TIMEOUT` seconds (default 300).
fn final_save_timeout() -> Duration {
    std::env::var("TORCHX_SUPERVISOR_SAVE_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(300), Duration::from_secs_f64)
}

impl Supervisor {
    /// Claims the app, starts the guard and the replicas. `None` if the app was cancelled first.
    fn start(state_dir: &Path, app_id: &str) -> Result<Option<Supervisor>> {
        // Block the signals we read before any child exists, so no exit goes unnoticed.
        let signals = SignalFd::new(&[sys::SIGCHLD, sys::SIGTERM, sys::SIGINT, sys::SIGHUP])
            .map_err(|e| Error::io("creating the supervisor's signalfd", e))?;
        let ledger = Ledger::open(state_dir)?;
        let corrupt = |what: &str, e: String| {
            Error::backend(
                NAME,
                format!("the ledger's {what} of {app_id} is unreadable: {e}"),
            )
        };
        let request: PopenRequest = ledger
            .request_json(app_id)?
            .ok_or_else(|| Error::not_found("app", app_id, " in the job ledger"))
            .and_then(|j| {
                serde_json::from_str(&j).map_err(|e| corrupt("request", e.to_string()))
            })?;
        let me = std::process::id();
        if !ledger.claim(app_id, me, sys::proc_start_time(me))? {
            return Ok(None);
        }
        let guard = spawn_guard(state_dir, app_id)
            .map_err(|e| Error::io("starting the supervisor's guard process", e))?;
        let cuda = if request.auto_set_cuda_visible_devices {
            cuda_assignments(&request, gpu_count())
        } else {
            None
        };
        let mut replicas = ledger.replicas(app_id)?.into_iter();
        let mut slots = Vec::new();
        for (ri, role) in request.roles.iter().enumerate() {
            for (i, p) in role.replicas.iter().enumerate() {
                let mut env = p.env.clone();
                if let Some(ids) = cuda.as_ref().and_then(|c| c.get(ri)).and_then(|r| r.get(i)) {
                    env.insert("CUDA_VISIBLE_DEVICES".into(), ids.clone());
                }
                let row = replicas
                    .next()
                    .ok_or_else(|| corrupt("replicas", "fewer rows than replicas".into()))?;
                slots.push(Slot {
                    role_idx: ri,
                    param: p.clone(),
                    env,
                    row,
                    proc: None,
                    dirty: true,
                });
            }
        }
        let roles: Vec<RoleSpec> = request
            .roles
            .iter()
            .map(|r| RoleSpec {
                name: r.role.clone(),
                policy: r.retry_policy,
                max_retries: r.max_retries,
            })
            .collect();
        let mut sup = Supervisor {
            ledger,
            app_id: app_id.to_string(),
            counters: RetryCounters::new(request.roles.iter().map(|r| r.replicas.len())),
            roles,
            slots,
            num_restarts: 0,
            phase: Phase::Running,
            msg: String::new(),
            stop_deadline: None,
            signals,
            guard: Some(guard),
            attempts: Vec::new(),
            app_dirty: true,
            unsaved: false,
            save_error: None,
            log_error: None,
        };
        let all: Vec<usize> = (0..sup.slots.len()).collect();
        if !sup.spawn(&all) {
            // Nothing half-started: kill what did start and fail the app.
            sup.stop_all(AppState::Failed);
            sup.kill_stopping();
        }
        sup.flush();
        Ok(Some(sup))
    }

    /// Starts (or restarts) these slots; false if one could not be started. Their log files
    /// are opened only after the whole batch started: every child inherits (and closes at exec)
    /// the supervisor's descriptors, so fewer open files during the batch make each start
    /// cheaper, which otherwise grows with the number of replicas.
    fn spawn(&mut self, targets: &[usize]) -> bool {
        let all_ok = self.start_batch(targets);
        for &i in targets {
            let slot = &mut self.slots[i];
            if let Some(proc) = slot.proc.as_mut().filter(|p| p.logs.is_none()) {
                let p = &slot.param;
                match open_logs(
                    &[p.stdout.clone(), p.stderr.clone(), p.combined.clone()],
                    false,
                ) {
                    Ok(files) => proc.logs = Some(files),
                    Err(e) => {
                        self.log_error
                            .get_or_insert_with(|| format!("its logs are incomplete: {e}"));
                    }
                }
            }
        }
        all_ok
    }

    fn start_batch(&mut self, targets: &[usize]) -> bool {
        let mut launcher = Launcher::new();
        let mut all_ok = true;
        for &i in targets {
            let result = launcher.launch(&self.slots[i].param, &self.slots[i].env);
            let slot = &mut self.slots[i];
            slot.dirty = true;
            let row = &mut slot.row;
            if row.started.is_some() {
                row.attempt += 1;
            }
            row.started = Some(now());
            (row.ended, row.exit_code, row.signal) = (None, None, None);
            row.msg.clear();
            match result {
                Ok(proc) => {
                    row.state = AppState::Running;
                    row.pid = Some(proc.pid);
                    row.pid_start = sys::proc_start_time(proc.pid);
                    slot.proc = Some(proc);
                }
                Err(e) => {
                    row.state = AppState::Failed;
                    row.pid = None;
                    row.ended = Some(now());
                    row.msg = format!("{}/{} could not start: {e}", row.role, row.replica_id);
                    self.msg = row.msg.clone();
                    self.app_dirty = true;
                    all_ok = false;
                }
            }
        }
        all_ok
    }

    fn run(&mut self) -> Result<()> {
        let final_state = loop {
            self.flush();
            if let Some(state) = self.finished() {
                break state;
            }
            let mut fds: Vec<RawFd> = vec![self.signals.as_raw_fd()];
            let mut owners: Vec<(usize, usize)> = Vec::new();
            for (i, slot) in self.slots.iter().enumerate() {
                if let Some(p) = &slot.proc {
                    for (k, pipe) in p.pipes.iter().enumerate() {
                        if let Some(pipe) = pipe {
                            fds.push(pipe.src.as_raw_fd());
                            owners.push((i, k));
                        }
                    }
                }
            }
            let mut timeout = self
                .stop_deadline
                .map(|d| d.saturating_duration_since(Instant::now()));
            if self.unsaved {
                // Try the ledger again soon, even if no replica has anything to say.
                timeout = Some(timeout.map_or(SAVE_RETRY, |t| t.min(SAVE_RETRY)));
            }
            let ready = sys::poll_readable(&fds, timeout)
                .map_err(|e| Error::io("waiting for replica events", e))?;
            for (n, &(i, k)) in owners.iter().enumerate() {
                if ready[n + 1] {
                    self.read_pipe(i, k);
                }
            }
            if ready[0] {
                for sig in self.signals.read() {
                    if sig == sys::SIGCHLD {
                        // Seen but not reaped: the group is killed while its id is still
                        // reserved by the zombie leader, then the leader is collected.
                        while let Some((pid, exit)) = sys::peek_exited(None) {
                            self.on_exit(pid, exit);
                            sys::reap(pid);
                        }
                    } else {
                        self.cancel();
                    }
                }
            }
            if self.stop_deadline.is_some_and(|d| Instant::now() >= d) {
                self.kill_stopping();
            }
            self.advance();
        };
        let ended = now();
        let mut msg = match final_state {
            AppState::Cancelled => "cancelled by user".to_string(),
            _ => self.msg.clone(),
        };
        for problem in [&self.log_error, &self.save_error].into_iter().flatten() {
            if !msg.is_empty() {
                msg.push_str("; ");
            }
            msg.push_str(problem);
        }
        // The outcome must reach the ledger: keep trying for a while (a full disk may be
        // freed). A failure that lasts (a read-only remount, a revoked permission) is handed to
        // the guard, which records the outcome when it can; this process exits non-zero.
        let deadline = Instant::now() + final_save_timeout();
        loop {
            for s in &mut self.slots {
                s.dirty = true;
            }
            let end = Some((final_state, msg.as_str(), ended));
            match self.save(end) {
                Ok(()) => break,
                Err(e) if Instant::now() >= deadline => {
                    if let Some(mut g) = self.guard.take() {
                        let _ = writeln!(g, "{OUTCOME}{} {msg}", final_state.as_str());
                    }
                    return Err(Error::backend(
                        NAME,
                        format!(
                            "the outcome of {} ({final_state:?}) could not be recorded within \
                             {:?}; its guard records it when the ledger can be written: {e}",
                            self.app_id,
                            final_save_timeout()
                        ),
                    ));
                }
                Err(e) => {
                    note!("torchx supervisor of {}: {e}; retrying", self.app_id);
                    std::thread::sleep(SAVE_RETRY);
                }
            }
        }
        if let Some(mut g) = self.guard.take() {
            let _ = writeln!(g, "done");
        }
        Ok(())
    }

    fn finished(&self) -> Option<AppState> {
        match &self.phase {
            Phase::Running => self
                .slots
                .iter()
                .all(|s| s.row.state == AppState::Succeeded)
                .then_some(AppState::Succeeded),
            Phase::Stopping(state) => self
                .slots
                .iter()
                .all(|s| s.proc.is_none())
                .then_some(*state),
            Phase::Restarting(_) => None,
        }
    }

    /// Saves what changed since the last save. On failure (a full disk, say) nothing is lost:
    /// the changes stay pending, the loop retries every [`SAVE_RETRY`], and the final record
    /// names the problem.
    fn flush(&mut self) {
        match self.save(None) {
            Ok(()) => self.unsaved = false,
            Err(e) => {
                if !self.unsaved {
                    note!("torchx supervisor of {}: {e}; retrying", self.app_id);
                }
                self.save_error.get_or_insert_with(|| {
                    format!("the job ledger could not be written for a while ({e})")
                });
                self.unsaved = true;
            }
        }
    }

    /// Saves, in one transaction, the app's progress (or its end: state, message, time), the
    /// replicas changed since the last save and the finished attempts. Change flags are cleared
    /// only once the transaction committed.
    fn save(&mut self, end: Option<(AppState, &str, f64)>) -> Result<()> {
        let rows: Vec<ReplicaRow> = self
            .slots
            .iter()
            .filter(|s| s.dirty)
            .map(|s| s.row.clone())
            .collect();
        if end.is_none() && rows.is_empty() && self.attempts.is_empty() && !self.app_dirty {
            return Ok(());
        }
        let progress = match end {
            Some((state, msg, ended)) => Progress {
                state,
                msg,
                num_restarts: self.num_restarts,
                ended: Some(ended),
            },
            None => Progress {
                state: AppState::Running,
                msg: &self.msg,
                num_restarts: self.num_restarts,
                ended: None,
            },
        };
        self.ledger
            .save(&self.app_id, &progress, &rows, &self.attempts)?;
        for s in &mut self.slots {
            s.dirty = false;
        }
        self.attempts.clear();
        self.app_dirty = false;
        Ok(())
    }

    fn read_pipe(&mut self, i: usize, k: usize) {
        let Some(proc) = self.slots[i].proc.as_mut() else {
            return;
        };
        pump(&mut proc.pipes[k], k, &mut proc.logs, &mut self.log_error);
    }

    fn on_exit(&mut self, pid: u32, exit: Exit) {
        let Some(i) = self
            .slots
            .iter()
            .position(|s| s.proc.as_ref().is_some_and(|p| p.pid == pid))
        else {
            return; // the guard, or a process we no longer track
        };
        let slot = &mut self.slots[i];
        let Some(mut proc) = slot.proc.take() else {
            return;
        };
        // Whatever the replica left behind in its process group goes with it. The leader is
        // not reaped yet (see `run`), so this group id cannot have been reused.
        sys::signal_group(pid, sys::SIGKILL);
        for k in 0..2 {
            while pump(&mut proc.pipes[k], k, &mut proc.logs, &mut self.log_error) {}
            // A process that escaped the group may hold the pipe open: stop reading anyway.
            close_pipe(&mut proc.pipes[k], &mut proc.logs, &mut self.log_error);
        }
        slot.dirty = true;
        let row = &mut slot.row;
        row.ended = Some(now());
        (row.exit_code, row.signal) = match exit {
            Exit::Code(c) => (Some(c), None),
            Exit::Signal(s) => (None, Some(s)),
        };
        self.attempts.push(AttemptRow {
            role_idx: row.role_idx,
            replica_id: row.replica_id,
            attempt: row.attempt,
            pid: row.pid,
            exit_code: row.exit_code,
            signal: row.signal,
            started: row.started,
            ended: row.ended,
        });
        if exit == Exit::Code(0) {
            row.state = AppState::Succeeded;
            return;
        }
        if proc.stop_sent {
            row.state = AppState::Cancelled;
            row.msg = format!("{}/{} was stopped", row.role, row.replica_id);
            return;
        }
        row.state = AppState::Failed;
        row.msg = exit_message(&row.role, row.replica_id, exit);
        let msg = row.msg.clone();
        let restarting_this = matches!(&self.phase, Phase::Restarting(t) if t.contains(&i));
        if matches!(self.phase, Phase::Stopping(_)) || restarting_this {
            return;
        }
        let role_idx = slot.role_idx;
        let role = &self.roles[role_idx];
        let replica = i - self
            .slots
            .iter()
            .position(|s| s.role_idx == role_idx)
            .unwrap_or(0);
        let decision = on_failure(
            role.policy,
            role.max_retries,
            &mut self.counters,
            role_idx,
            replica,
        );
        if decision != Decision::Fail {
            self.num_restarts += 1;
            self.app_dirty = true;
            note!(
                "torchx supervisor: {msg}; restarting ({decision:?}, restart {} of role {})",
                self.num_restarts,
                role.name
            );
        }
        match decision {
            Decision::Fail => {
                self.msg = msg;
                self.stop_all(AppState::Failed);
            }
            Decision::RestartReplica => {
                if !self.spawn(&[i]) {
                    self.stop_all(AppState::Failed);
                }
            }
            Decision::RestartRole => {
                let targets = (0..self.slots.len())
                    .filter(|&j| self.slots[j].role_idx == role_idx)
                    .collect();
                self.restart(targets);
            }
            Decision::RestartApp => self.restart((0..self.slots.len()).collect()),
        }
    }

    /// Stops `targets` and restarts them once all have exited.
    fn restart(&mut self, mut targets: Vec<usize>) {
        if let Phase::Restarting(existing) = &self.phase {
            targets.extend(existing);
            targets.sort_unstable();
            targets.dedup();
        }
        for &j in &targets {
            self.stop(j);
        }
        self.phase = Phase::Restarting(targets);
    }

    fn stop(&mut self, i: usize) {
        if let Some(p) = self.slots[i].proc.as_mut() {
            if !p.stop_sent {
                p.stop_sent = true;
                sys::signal_group(p.pid, sys::SIGTERM);
                self.stop_deadline.get_or_insert(Instant::now() + GRACE);
            }
        }
    }

    fn stop_all(&mut self, state: AppState) {
        if !matches!(self.phase, Phase::Stopping(_)) {
            self.phase = Phase::Stopping(state);
            self.app_dirty = true;
        }
        for i in 0..self.slots.len() {
            self.stop(i);
        }
    }

    fn cancel(&mut self) {
        self.stop_all(AppState::Cancelled);
    }

    fn kill_stopping(&mut self) {
        for p in self.slots.iter().filter_map(|s| s.proc.as_ref()) {
            if p.stop_sent {
                sys::signal_group(p.pid, sys::SIGKILL);
            }
        }
    }

    /// Moves a restart forward once its targets have all exited.
    fn advance(&mut self) {
        if self
            .slots
            .iter()
            .all(|s| s.proc.as_ref().is_none_or(|p| !p.stop_sent))
        {
            self.stop_deadline = None;
        }
        let Phase::Restarting(targets) = &self.phase else {
            return;
        };
        if targets.iter().any(|&j| self.slots[j].proc.is_some()) {
            return;
        }
        let targets = targets.clone();
        self.phase = Phase::Running;
        if !self.spawn(&targets) {
            self.stop_all(AppState::Failed);
        }
    }
}

/// Copies what is available from pipe `k` (0 stdout, 1 stderr) into its log and, whole lines
/// only, into the combined log. Returns false at end of file (or on error); true if there may be
/// more. The first failed log write (a full disk) is kept in `log_error`; reading goes on so
/// the replica never blocks.
fn pump(
    pipe: &mut Option<Pipe>,
    k: usize,
    logs: &mut Option<[File; 3]>,
    log_error: &mut Option<String>,
) -> bool {
    let Some(p) = pipe.as_mut() else {
        return false;
    };
    let mut buf = [0u8; 65536];
    match p.src.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => {
            p.partial.extend_from_slice(&buf[..n]);
            let whole = p.partial.iter().rposition(|b| *b == b'\n');
            if let Some([out, err, combined]) = logs.as_mut() {
                let log = if k == 0 { out } else { err };
                note_log_error(log.write_all(&buf[..n]), log_error);
                if let Some(last) = whole {
                    note_log_error(combined.write_all(&p.partial[..=last]), log_error);
                }
            }
            if let Some(last) = whole {
                p.partial.drain(..=last);
            }
            return true;
        }
        Err(e) if e.kind() == ErrorKind::Interrupted => return true,
        // Nothing right now: keep the pipe.
        Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
        Err(_) => {}
    }
    close_pipe(pipe, logs, log_error);
    false
}

fn note_log_error(result: std::io::Result<()>, log_error: &mut Option<String>) {
    if let Err(e) = result {
        log_error
            .get_or_insert_with(|| format!("its logs are incomplete: writing them failed ({e})"));
    }
}

/// Closes a pipe; its last unterminated line still belongs in the combined log.
fn close_pipe(
    pipe: &mut Option<Pipe>,
    logs: &mut Option<[File; 3]>,
    log_error: &mut Option<String>,
) {
    if let (Some(p), Some([_, _, combined])) = (pipe.take(), logs.as_mut()) {
        if !p.partial.is_empty() {
            note_log_error(combined.write_all(&p.partial), log_error);
        }
    }
}

/// Opens (creating, with their directories) a replica's stdout, stderr and combined logs.
fn open_logs(paths: &[PathBuf; 3], create_dirs: bool) -> Result<[File; 3]> {
    let open = |p: &PathBuf, create_dir: bool| {
        let dir = p.parent().filter(|_| create_dirs && create_dir);
        dir.map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| OpenOptions::new().create(true).append(true).open(p))
            .map_err(|e| Error::io(format!("opening log {}", p.display()), e))
    };
    // They usually share a directory: create it once.
    let same_dir = |a: &PathBuf, b: &PathBuf| a.parent() == b.parent();
    Ok([
        open(&paths[0], true)?,
        open(&paths[1], !same_dir(&paths[0], &paths[1]))?,
        open(&paths[2], !same_dir(&paths[0], &paths[2]))?,
    ])
}

/// Starts replicas; what stays the same between them (the supervisor's environment, where a
/// program lies on PATH) is looked up once.
struct Launcher {
    base_env: BTreeMap<OsString, OsString>,
    os_path: String,
    resolved: BTreeMap<(String, OsString, PathBuf), PathBuf>,
}

fn cannot_start(program: &str, e: std::io::Error) -> Error {
    Error::backend(NAME, format!("cannot start `{program}`: {e}"))
}

impl Launcher {
    fn new() -> Launcher {
        Launcher {
            base_env: std::env::vars_os().collect(),
            os_path: std::env::var("PATH").unwrap_or_default(),
            resolved: BTreeMap::new(),
        }
    }

    /// Starts one replica as the leader of its own process group, in its working directory,
    /// with stdin on /dev/null and stdout/stderr piped to us. std's `Command` takes the
    /// `posix_spawn` path here (no pre-exec hook), resets the signal mask and SIGPIPE that the
    /// supervisor blocks, and reports exec failures from `spawn` itself. The child is reaped
    /// by the supervisor's `waitpid` loop (dropping a `Child` neither waits nor kills).
    fn launch(&mut self, p: &ReplicaParam, env: &crate::specs::Env) -> Result<Proc> {
        // Created (with their directories) before the start, so a replica never runs without
        // them; opened for writing after its batch started (see `Supervisor::spawn`).
        drop(open_logs(
            &[p.stdout.clone(), p.stderr.clone(), p.combined.clone()],
            true,
        )?);
        let program = p
            .args
            .first()
            .ok_or_else(|| Error::spec("empty command line"))?
            .clone();
        let cannot = |e: std::io::Error| cannot_start(&program, e);
        let mut child_env = self.base_env.clone();
        for (k, v) in env {
            let v = if k == "PATH" {
                join_path([Some(v.as_str()), Some(self.os_path.as_str())])
            } else {
                v.clone()
            };
            child_env.insert(k.into(), v.into());
        }
        child_env
            .entry("PYTHONUNBUFFERED".into())
            .or_insert_with(|| "x".into());
        let path = self
            .resolve(&program, child_env.get(OsStr::new("PATH")), &p.cwd)
            .map_err(cannot)?;
        let mut child = Command::new(&path)
            .arg0(&program)
            .args(&p.args[1..])
            .env_clear()
            .envs(&child_env)
            .current_dir(&p.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(cannot)?;
        let pipe = |src: Option<OwnedFd>| {
            let src = File::from(src?);
            sys::set_nonblocking(&src).ok()?;
            Some(Pipe {
                src,
                partial: Vec::new(),
            })
        };
        Ok(Proc {
            pid: child.id(),
            stop_sent: false,
            pipes: [
                pipe(child.stdout.take().map(OwnedFd::from)),
                pipe(child.stderr.take().map(OwnedFd::from)),
            ],
            logs: None,
        })
    }

    /// Where execve finds `program`: as given when it has a slash (relative to `cwd`, where the
    /// child runs), else the first executable file in the child's PATH, as execvp would search.
    fn resolve(
        &mut self,
        program: &str,
        path: Option<&OsString>,
        cwd: &Path,
    ) -> std::io::Result<PathBuf> {
        if program.contains('/') {
            return Ok(PathBuf::from(program));
        }
        let path = path
            .cloned()
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let key = (program.to_string(), path, cwd.to_path_buf());
        if let Some(found) = self.resolved.get(&key) {
            return Ok(found.clone());
        }
        let found = std::env::split_paths(&key.1)
            .map(|dir| cwd.join(dir).join(program))
            .find(|candidate| {
                std::fs::metadata(candidate)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
        self.resolved.insert(key, found.clone());
        Ok(found)
    }
}

fn spawn_guard(state_dir: &Path, app_id: &str) -> std::io::Result<ChildStdin> {
    // This program is running the supervisor, so it can run the guard too.
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg(GUARD_ARG)
        // Also on its command line: readers find a guard that is recording an outcome.
        .arg(app_id)
        .env("TORCHX_STATE_DIR", state_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no guard stdin"))?;
    writeln!(stdin, "{app_id}")?;
    Ok(stdin)
}

fn gpu_count() -> i64 {
    match Command::new("nvidia-smi")
        .arg("-L")
        .stderr(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count() as i64,
        _ => 0,
    }
}
