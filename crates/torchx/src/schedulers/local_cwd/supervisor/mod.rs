//! The supervisor: one detached process per app (`torchx __supervise`, in its own session) that
//! owns the replicas. It starts them, copies their output into the log files, records every
//! start and exit in the ledger, applies the retry policy and stops everything on cancel.
//!
//! It is single-threaded: one `poll` loop over a signalfd (SIGCHLD, SIGTERM, SIGINT, SIGHUP) and
//! the replicas' pipes. Each replica leads its own process group, and owns every process it
//! starts, in whatever session (`descendants.rs`): signals, stops and kills reach them all, and
//! in a checkpoint window a replica whose leader (a wrapper) died goes on until the processes
//! that save are done. A companion guard process
//! (`torchx __guard`, holding a pipe only the supervisor writes to) notices if the supervisor is
//! killed and kills the replicas' process groups, so no replica outlives a dead supervisor; if
//! the guard is killed too, the next `status`/`list`/`log` of the app does the same.

mod containers;
mod processes;

use self::containers::{quiet_docker, remove_container};
use self::processes::{torchrun_forwards, KILL_WAIT};

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::after::{wait_for_dependencies, Waited};
use super::cgroup::AppCgroup;
use super::descendants::{tracked_path, Descendants};
use super::guard::{left_behind, DONE, GUARD_ARG, OUTCOME, SAVE_RETRY};
use super::launch::{Launcher, Proc};
use super::ledger::{AttemptRow, Ledger, Progress, ReplicaRow};
use super::machine::{Action, Event, Machine, RolePolicy};
use super::plan::gpu_count;
use super::render::{cuda_assignments, PopenRequest, ReplicaParam, REQUEUE_FILE_ENV};
use super::watchdog::{self, Watch, HEARTBEAT_FILE_ENV};
use super::{now, GRACE, NAME};
use crate::error::{Error, Result};
use crate::schedulers::create_private_dir;
use crate::specs::AppState;
use crate::sys::{self, Exit, SignalFd};

/// How often the supervisor follows its replicas' process trees while they run: a process
/// seen once stays its replica's after its parent is gone.
const TREE_REFRESH: Duration = Duration::from_secs(1);

/// The hidden subcommand that runs [`supervisor_main`].
pub(super) const SUPERVISE_ARG: &str = "__supervise";

/// Entry point of `torchx __supervise`: reads the app id from stdin, reports `ready` or
/// `failed: <why>` on stdout once the replicas are started, then supervises them to the end.
pub(super) fn supervisor_main() -> i32 {
    let mut app_id = String::new();
    let _ = std::io::stdin().lock().read_line(&mut app_id);
    let app_id = app_id.trim().to_string();
    if app_id.is_empty() {
        note!("torchx {SUPERVISE_ARG}: expected an app id on stdin");
        return 2;
    }
    // Out of the submitter's session: terminal signals go to `torchx run`, which cancels.
    sys::setsid();
    // The replicas' orphans come to us, not to init: they stay in reach (`descendants.rs`).
    sys::become_subreaper();
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
    let startup_error = sup.machine.message().to_string();
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

/// One replica as the supervisor holds it: what to start, its ledger row and its process.
struct Replica {
    param: ReplicaParam,
    env: crate::specs::Env,
    row: ReplicaRow,
    proc: Option<Proc>,
    /// Whether its role opted into the recovery contract.
    recovery: bool,
    /// Its leader exited (how) in a checkpoint window and was reaped: the attempt ends when
    /// the rest of its processes have.
    leader_exit: Option<Exit>,
    /// A process of this attempt that outlived its parent exited with the requeue code.
    orphan_asked_requeue: bool,
    /// This attempt's `TORCHX_REQUEUE_FILE` (one per attempt: a request belongs to the attempt
    /// whose processes made it, never to a later one).
    requeue_file: Option<PathBuf>,
    /// The checkpoint signal, where its leader (torchrun told to) forwards it to its workers:
    /// it is then sent to the leader alone, so that each worker gets it once.
    leader_forwards: Option<i32>,
    /// This attempt's checkpoint signal went to the leader alone.
    sent_to_leader: bool,
    /// Whether processes beyond its leader (torchrun's workers) were seen in this attempt.
    had_workers: bool,
    /// `role/replica`, for its stacks.
    name: String,
    /// Its role's `hang_timeout`.
    hang_timeout: Option<Duration>,
    /// This attempt's hang watch, with a hang timeout.
    watch: Option<Watch>,
    dirty: bool,
}

/// The I/O half of one app's supervision: processes, signals, pipes and the ledger. Every
/// decision is the [`Machine`]'s.
struct Supervisor {
    ledger: Ledger,
    app_id: String,
    machine: Machine,
    replicas: Vec<Replica>,
    signals: SignalFd,
    guard: Option<ChildStdin>,
    /// The guard's pid: a child that is not a replica's.
    guard_pid: u32,
    /// The cgroup every process of the replicas lives in, where the machine lets us make one:
    /// then it alone says what a replica's processes are.
    cgroup: Option<AppCgroup>,
    /// Every process of every replica beyond its leader, followed through the process tree
    /// (where there is no cgroup, and for the requeue exit codes of orphans).
    descendants: Descendants,
    /// Without a cgroup: where `descendants` is kept for the guard and readers to find.
    tracked: Option<PathBuf>,
    /// When the process trees were last followed.
    tree_seen: Instant,
    /// Finished attempts not saved yet.
    attempts: Vec<AttemptRow>,
    /// The app's message and restart count as last saved.
    saved_progress: Option<(String, u32)>,
    /// The last ledger write failed: changes are pending.
    unsaved: bool,
    /// The first ledger write failure, for the final record.
    save_error: Option<String>,
    /// The first failed write to a log file, for the final record.
    log_error: Option<String>,
}

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
        let mut signals = SignalFd::new(&[sys::SIGCHLD, sys::SIGTERM, sys::SIGINT, sys::SIGHUP])
            .map_err(|e| Error::io("creating the supervisor's signalfd", e))?;
        let mut ledger = Ledger::open(state_dir)?;
        let corrupt = |what: &str, e: String| {
            Error::backend(
                NAME,
                format!("the ledger's {what} of {app_id} is unreadable: {e}"),
            )
        };
        let request: PopenRequest = ledger
            .request_json(app_id)?
            .ok_or_else(|| Error::app_not_found(app_id, " in the job ledger"))
            .and_then(|j| {
                serde_json::from_str(&j).map_err(|e| corrupt("request", e.to_string()))
            })?;
        let me = std::process::id();
        if !request.after.is_empty() {
            // Its logs exist (empty) while it waits: a follower (`torchx run`, `log --tail`)
            // finds them, and ends quietly if it never runs.
            for r in request.roles.iter().flat_map(|r| &r.replicas) {
                let paths = [r.stdout.clone(), r.stderr.clone(), r.combined.clone()];
                super::launch::open_logs(&paths, true)?;
            }
            match wait_for_dependencies(&mut ledger, app_id, &request.after, &mut signals, || {
                report("ready")
            })? {
                Waited::Go => {}
                Waited::Ended => return Ok(None),
            }
        }
        let cgroup = AppCgroup::create(app_id);
        let claimed = ledger.claim(
            app_id,
            me,
            sys::proc_start_time(me),
            cgroup.as_ref().map(AppCgroup::path),
        );
        if !matches!(claimed, Ok(true)) {
            if let Some(c) = &cgroup {
                c.kill_and_remove(Duration::ZERO);
            }
            return claimed.map(|_| None);
        }
        let (guard_pid, guard) = spawn_guard(state_dir, app_id)
            .map_err(|e| Error::io("starting the supervisor's guard process", e))?;
        let cuda = if request.auto_set_cuda_visible_devices {
            cuda_assignments(&request, gpu_count())
        } else {
            None
        };
        let mut rows = ledger.replicas(app_id)?.into_iter();
        let mut replicas = Vec::new();
        for (ri, role) in request.roles.iter().enumerate() {
            for (i, p) in role.replicas.iter().enumerate() {
                let mut env = p.env.clone();
                if let Some(ids) = cuda.as_ref().and_then(|c| c.get(ri)).and_then(|r| r.get(i)) {
                    env.insert("CUDA_VISIBLE_DEVICES".into(), ids.clone());
                }
                let row = rows
                    .next()
                    .ok_or_else(|| corrupt("replicas", "fewer rows than replicas".into()))?;
                replicas.push(Replica {
                    param: p.clone(),
                    env,
                    row,
                    proc: None,
                    recovery: role.recovery,
                    leader_exit: None,
                    orphan_asked_requeue: false,
                    requeue_file: None,
                    // A container's own shell sees to it (`attempt_timer.rs`).
                    leader_forwards: role
                        .checkpoint_signal
                        .filter(|s| p.container.is_none() && torchrun_forwards(&p.env, s.signal))
                        .map(|s| s.signal.number()),
                    sent_to_leader: false,
                    had_workers: false,
                    name: format!("{}/{i}", role.role),
                    hang_timeout: role.hang_timeout.map(Duration::from_secs),
                    watch: None,
                    dirty: true,
                });
            }
        }
        let roles = request
            .roles
            .iter()
            .map(|r| {
                let policy = RolePolicy {
                    max_requeues: r.max_requeues,
                    requeue_exit_code: r.requeue_exit_code,
                    time_limit: r.time_limit.map(|t| t as f64),
                    checkpoint_signal: r
                        .checkpoint_signal
                        .map(|s| (s.signal.number(), s.seconds as f64)),
                    recovery: r.recovery,
                    hang_timeout: r.hang_timeout.map(|t| t as f64),
                    ..RolePolicy::new(r.role.clone(), r.retry_policy, r.max_retries)
                };
                (policy, r.replicas.len())
            })
            .collect();
        let machine = Machine::new(roles, GRACE.as_secs_f64());
        let begin = machine.begin();
        let mut sup = Supervisor {
            ledger,
            app_id: app_id.to_string(),
            machine,
            replicas,
            signals,
            guard: Some(guard),
            guard_pid,
            tracked: cgroup
                .is_none()
                .then(|| tracked_path(state_dir, app_id))
                .filter(|p| p.parent().is_some_and(|d| create_private_dir(d).is_ok())),
            cgroup,
            descendants: Descendants::default(),
            tree_seen: Instant::now(),
            attempts: Vec::new(),
            saved_progress: None,
            unsaved: false,
            save_error: None,
            log_error: None,
        };
        sup.apply(begin);
        sup.flush();
        Ok(Some(sup))
    }

    /// Carries out the machine's actions, and those that follow from them (a start reports its
    /// launch), then copies what changed into the ledger rows.
    fn apply(&mut self, actions: Vec<Action>) {
        let mut queue = VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Start(targets) => {
                    let launched = self.launch(&targets);
                    queue.extend(self.machine.on_event(now(), Event::Launched(launched)));
                }
                Action::Signal { slot, signal } => self.signal(slot, signal),
                Action::Ended(end) => {
                    let row = &self.replicas[end.slot].row;
                    let (exit_code, signal) = end.exit.code_and_signal();
                    self.attempts.push(AttemptRow {
                        role_idx: row.role_idx,
                        replica_id: row.replica_id,
                        attempt: end.attempt,
                        pid: row.pid,
                        exit_code,
                        signal,
                        started: end.started,
                        ended: Some(end.ended),
                        reason: Some(end.reason),
                    });
                }
                Action::Note(line) => note!("{line}"),
            }
        }
        for i in self.machine.take_changed() {
            let slot = &self.machine.slots()[i];
            let r = &mut self.replicas[i];
            let row = &mut r.row;
            row.state = slot.state;
            row.attempt = slot.attempt;
            row.started = slot.started;
            row.ended = slot.ended;
            (row.exit_code, row.signal) = slot.exit.map_or((None, None), Exit::code_and_signal);
            row.msg.clone_from(&slot.msg);
            r.dirty = true;
        }
    }

    /// Starts a new attempt of each target. Their log files are opened only after the whole
    /// batch started: every child inherits (and closes at exec) the supervisor's descriptors,
    /// so fewer open files during the batch make each start cheaper, which otherwise grows
    /// with the number of replicas.
    fn launch(&mut self, targets: &[usize]) -> Vec<(usize, Option<String>)> {
        let mut launcher = Launcher::new();
        let mut launched = Vec::with_capacity(targets.len());
        for &i in targets {
            let r = &mut self.replicas[i];
            let mut env = r.env.clone();
            let attempt = self.machine.next_attempt(i);
            if r.recovery {
                env.insert("TORCHX_ATTEMPT".into(), attempt.to_string());
            }
            r.orphan_asked_requeue = false;
            r.leader_exit = None;
            r.sent_to_leader = false;
            r.had_workers = false;
            r.requeue_file = r.param.requeue_file.as_deref().map(|file| {
                let file = attempt_file(file, attempt);
                prepare_requeue_file(&file);
                env.insert(REQUEUE_FILE_ENV.into(), file.display().to_string());
                file
            });
            let heartbeat = r.param.heartbeat_file.as_deref().map(|file| {
                let file = attempt_file(file, attempt);
                watchdog::prepare_heartbeat(&file);
                env.insert(HEARTBEAT_FILE_ENV.into(), file.display().to_string());
                file
            });
            r.watch = r.hang_timeout.map(|t| Watch::new(t, heartbeat));
            if let (Some(name), true) = (&r.param.container, attempt > 0) {
                // Removed when the last attempt ended, unless that failed: the name would
                // still be taken.
                quiet_docker(&["rm", "-f", name]);
            }
            let join = match &self.cgroup {
                Some(c) => match c.join_file(i) {
                    Ok(file) => Some(file),
                    Err(e) => {
                        r.row.pid = None;
                        launched.push((i, Some(format!("cannot make its cgroup: {e}"))));
                        continue;
                    }
                },
                None => None,
            };
            match launcher.launch(&r.param, &env, join.as_ref()) {
                Ok(proc) => {
                    r.row.pid = Some(proc.pid);
                    r.row.pid_start = sys::proc_start_time(proc.pid);
                    r.proc = Some(proc);
                    launched.push((i, None));
                }
                Err(e) => {
                    r.row.pid = None;
                    launched.push((i, Some(e.to_string())));
                }
            }
        }
        for &i in targets {
            let r = &mut self.replicas[i];
            if let Some(proc) = r.proc.as_mut() {
                proc.open_logs(&r.param, &mut self.log_error);
            }
        }
        launched
    }

    fn run(&mut self) -> Result<()> {
        let final_state = loop {
            self.flush();
            if let Some(state) = self.machine.finished() {
                break state;
            }
            let mut fds: Vec<RawFd> = vec![self.signals.as_raw_fd()];
            let mut owners: Vec<(usize, usize)> = Vec::new();
            for (i, r) in self.replicas.iter().enumerate() {
                for (fd, k) in r.proc.iter().flat_map(Proc::pipe_fds) {
                    fds.push(fd);
                    owners.push((i, k));
                }
            }
            let mut timeout = self
                .machine
                .next_deadline()
                .map(|at| Duration::from_secs_f64((at - now()).max(0.0)));
            if self.unsaved {
                // Try the ledger again soon, even if no replica has anything to say.
                timeout = Some(timeout.map_or(SAVE_RETRY, |t| t.min(SAVE_RETRY)));
            }
            if self.replicas.iter().any(|r| r.proc.is_some()) {
                let next = TREE_REFRESH.saturating_sub(self.tree_seen.elapsed());
                timeout = Some(timeout.map_or(next, |t| t.min(next)));
            }
            for w in self.replicas.iter().filter_map(|r| r.watch.as_ref()) {
                timeout = Some(timeout.map_or(w.left(), |t| t.min(w.left())));
            }
            let ready = sys::poll_readable(&fds, timeout)
                .map_err(|e| Error::io("waiting for replica events", e))?;
            for (n, &(i, k)) in owners.iter().enumerate() {
                if ready[n + 1] {
                    let r = &mut self.replicas[i];
                    if let Some(proc) = r.proc.as_mut() {
                        if proc.pump(k, &mut self.log_error) {
                            if let Some(w) = r.watch.as_mut() {
                                w.progressed();
                            }
                        }
                    }
                }
            }
            if ready[0] {
                for sig in self.signals.read() {
                    if sig == sys::SIGCHLD {
                        self.collect_exits();
                    } else {
                        let actions = self.machine.on_event(now(), Event::Cancel);
                        self.apply(actions);
                    }
                }
            }
            if self.tree_seen.elapsed() >= TREE_REFRESH {
                self.refresh_tree(None);
                self.end_drained();
            }
            let actions = self.machine.on_event(now(), Event::Tick);
            self.apply(actions);
            self.watch_for_hangs();
        };
        // Whatever a replica left that nothing could tie to it goes with the app.
        self.descendants.kill_strays(&[self.guard_pid]);
        if let Some(path) = &self.tracked {
            let _ = std::fs::remove_file(path);
        }
        let left = self
            .cgroup
            .as_ref()
            .map_or_else(Vec::new, |c| c.kill_and_remove(KILL_WAIT));
        let ended = now();
        let mut msg = match final_state {
            AppState::Cancelled => "cancelled by user".to_string(),
            _ => self.machine.message().to_string(),
        };
        for problem in [&self.log_error, &self.save_error].into_iter().flatten() {
            if !msg.is_empty() {
                msg.push_str("; ");
            }
            msg.push_str(problem);
        }
        msg.push_str(&left_behind(&left));
        // The outcome must reach the ledger: keep trying for a while (a full disk may be
        // freed). A failure that lasts (a read-only remount, a revoked permission) is handed to
        // the guard, which records the outcome when it can; this process exits non-zero.
        let deadline = Instant::now() + final_save_timeout();
        loop {
            for r in &mut self.replicas {
                r.dirty = true;
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
            let _ = writeln!(g, "{DONE}");
        }
        Ok(())
    }

    /// Ends the attempts whose leader exited in a checkpoint window once nothing of them runs.
    fn end_drained(&mut self) {
        for i in 0..self.replicas.len() {
            if let Some(exit) = self.replicas[i].leader_exit {
                if !self.replica_alive(i) {
                    self.ended(i, exit);
                }
            }
        }
    }

    /// Replica `i`'s attempt ended (its processes are gone): drains its pipes and tells the
    /// machine, with whether it asked for a requeue.
    fn ended(&mut self, i: usize, exit: Exit) {
        let r = &mut self.replicas[i];
        r.leader_exit = None;
        if let Some(mut proc) = r.proc.take() {
            proc.drain(&mut self.log_error);
        }
        let requeue_asked =
            r.orphan_asked_requeue || r.requeue_file.as_deref().is_some_and(Path::exists);
        // A container the kernel killed ends as SIGKILL (or `docker run`'s 137).
        let killed = matches!(exit, Exit::Signal(9) | Exit::Code(137));
        let oom = r
            .param
            .container
            .as_deref()
            .is_some_and(|name| remove_container(name, killed));
        let actions = self.machine.on_event(
            now(),
            Event::Exited {
                slot: i,
                exit,
                requeue_asked,
                oom,
            },
        );
        self.apply(actions);
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
            .replicas
            .iter()
            .filter(|r| r.dirty)
            .map(|r| r.row.clone())
            .collect();
        let num_restarts = self.machine.num_restarts();
        let progress_now = (self.machine.message().to_string(), num_restarts);
        let progress_changed = self.saved_progress.as_ref() != Some(&progress_now);
        if end.is_none() && rows.is_empty() && self.attempts.is_empty() && !progress_changed {
            return Ok(());
        }
        let (state, msg, ended) = match end {
            Some((state, msg, ended)) => (state, msg, Some(ended)),
            None => (AppState::Running, progress_now.0.as_str(), None),
        };
        let progress = Progress {
            state,
            msg,
            num_restarts: i64::from(num_restarts),
            ended,
        };
        self.ledger
            .save(&self.app_id, &progress, &rows, &self.attempts)?;
        for r in &mut self.replicas {
            r.dirty = false;
        }
        self.attempts.clear();
        self.saved_progress = Some(progress_now);
        Ok(())
    }
}

/// Attempt `attempt`'s name of a replica's requeue file: `<file>.<attempt>`.
fn attempt_file(file: &Path, attempt: u32) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(format!(".{attempt}"));
    PathBuf::from(name)
}

/// Makes sure a replica's `TORCHX_REQUEUE_FILE` does not exist when an attempt starts (a
/// request does not carry over) and that its directory (the replica's log directory) does.
fn prepare_requeue_file(file: &Path) {
    let _ = std::fs::remove_file(file);
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
}

fn spawn_guard(state_dir: &Path, app_id: &str) -> std::io::Result<(u32, ChildStdin)> {
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
    Ok((child.id(), stdin))
}
