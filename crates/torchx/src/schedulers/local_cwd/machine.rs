//! The supervisor's decisions, without I/O: which replicas to start, signal and kill, and how
//! the app ends, as a function of events (a batch of replicas started, one exited, a cancel,
//! time passing). The supervisor (`supervisor.rs`) turns [`Action`]s into processes and signals
//! and feeds what happens back as [`Event`]s; everything here is table-tested.
//!
//! The recovery contract lives here too, for roles that opted in (any recovery option): an
//! attempt's time limit (the checkpoint signal first, SIGTERM at the limit, SIGKILL after the
//! grace period), requeues on the requeue exit code, on a request made through
//! `TORCHX_REQUEUE_FILE` (whatever the exit code) or on a preemption (a replica killed by a
//! SIGTERM the supervisor did not send), counted apart from the retry budget. A role that did
//! not opt in ends as TorchX's would: every non-zero exit and every kill is a failure; so is a
//! bare SIGKILL in a role that did (what the kernel's out-of-memory killer sends).

use super::state::{exit_message, on_failure, Decision, RetryCounters};
use crate::specs::{
    AppState, EndReason, RetryPolicy, DEFAULT_MAX_REQUEUES, DEFAULT_REQUEUE_EXIT_CODE,
};
use crate::sys::{Exit, SIGKILL, SIGTERM};

/// The retry and recovery settings of one role.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RolePolicy {
    /// The role's name, for messages.
    pub name: String,
    /// What a restart restarts (also the scope of the requeue count).
    pub retry_policy: RetryPolicy,
    /// Restarts after failures.
    pub max_retries: u32,
    /// Restarts after requeues and preemptions.
    pub max_requeues: u32,
    /// The exit code that asks for a requeue.
    pub requeue_exit_code: i32,
    /// Wall-clock seconds one attempt may run.
    pub time_limit: Option<f64>,
    /// The signal sent this many seconds before the time limit.
    pub checkpoint_signal: Option<(i32, f64)>,
    /// Whether the role opted into the recovery contract: without it, nothing is requeued.
    pub recovery: bool,
    /// Seconds without progress after which a replica is hung (the supervisor watches; the
    /// machine only decides what a hang means).
    pub hang_timeout: Option<f64>,
}

impl RolePolicy {
    /// A role with this retry budget and the default recovery settings.
    pub(super) fn new(
        name: impl Into<String>,
        retry_policy: RetryPolicy,
        max_retries: u32,
    ) -> Self {
        RolePolicy {
            name: name.into(),
            retry_policy,
            max_retries,
            max_requeues: DEFAULT_MAX_REQUEUES,
            requeue_exit_code: DEFAULT_REQUEUE_EXIT_CODE,
            time_limit: None,
            checkpoint_signal: None,
            recovery: false,
            hang_timeout: None,
        }
    }
}

/// Something that happened to the app.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Event {
    /// The batch of an [`Action::Start`] was launched: per slot, `None` or why it could not be.
    Launched(Vec<(usize, Option<String>)>),
    /// A replica's process exited (and, in a checkpoint window, the rest of its processes).
    Exited {
        /// Its slot.
        slot: usize,
        /// How.
        exit: Exit,
        /// A process of the replica asked for a requeue whatever the exit code (it created
        /// `TORCHX_REQUEUE_FILE`, or a process that outlived its parent exited with the
        /// requeue code).
        requeue_asked: bool,
        /// The engine says it was killed for using too much memory.
        oom: bool,
    },
    /// A user cancelled the app (or the supervisor was asked to stop).
    Cancel,
    /// Replica `slot` made no progress for its role's hang timeout; its stacks are captured.
    Hung {
        /// Its slot.
        slot: usize,
        /// What its stacks say, for the message (`rank 0 in all_reduce`), or empty.
        detail: String,
    },
    /// Time passed: deadlines due by now fire.
    Tick,
}

/// What the supervisor must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Action {
    /// Start a new attempt of each of these slots, then report them in one [`Event::Launched`].
    Start(Vec<usize>),
    /// Send `signal` to the slot's process group.
    Signal {
        /// The slot.
        slot: usize,
        /// The signal number.
        signal: i32,
    },
    /// An attempt ended: record it.
    Ended(AttemptEnd),
    /// A line for the supervisor's own log.
    Note(String),
}

/// One finished attempt of a replica.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AttemptEnd {
    /// The slot.
    pub slot: usize,
    /// Its attempt number (0 first).
    pub attempt: u32,
    /// When it started.
    pub started: Option<f64>,
    /// When it ended.
    pub ended: f64,
    /// How its process ended.
    pub exit: Exit,
    /// Why.
    pub reason: EndReason,
}

/// Why the supervisor stops a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// It outlived its time limit.
    TimeLimit,
    /// It hung (and, under the recovery contract, did not end within its checkpoint window).
    Hang,
    /// Its restart scope restarts.
    Restart,
    /// The app ends (cancelled or failed).
    End,
}

/// One replica as the machine sees it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Slot {
    /// Its role's index.
    pub role: usize,
    /// Its index within the role.
    pub replica: usize,
    /// State of the current attempt.
    pub state: AppState,
    /// The current attempt's number: 0 first, +1 per start after that.
    pub attempt: u32,
    /// When the current attempt started.
    pub started: Option<f64>,
    /// When it ended.
    pub ended: Option<f64>,
    /// How it ended.
    pub exit: Option<Exit>,
    /// Why it ended that way (an exit, a launch error, who stopped it).
    pub msg: String,
    running: bool,
    stop: Option<Stop>,
    signal_at: Option<f64>,
    limit_at: Option<f64>,
    kill_at: Option<f64>,
    /// The checkpoint signal was sent in this attempt: its processes may be saving.
    checkpointing: bool,
    /// This attempt hung: what its stacks said (see [`Event::Hung`]).
    hung: Option<String>,
    changed: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Running,
    /// Waiting for these slots to stop, then starting them again.
    Restarting(Vec<usize>),
    /// Stopping everything; the app ends in this state.
    Stopping(AppState),
}

/// The state of one app's replicas and what comes next.
#[derive(Debug, Clone)]
pub(super) struct Machine {
    roles: Vec<RolePolicy>,
    slots: Vec<Slot>,
    retries: RetryCounters,
    requeues: RetryCounters,
    num_restarts: u32,
    phase: Phase,
    msg: String,
    grace: f64,
}

impl Machine {
    /// An app of these roles with this many replicas each; `grace` is how long a stopped
    /// replica gets between SIGTERM and SIGKILL. Nothing runs until [`Machine::begin`].
    pub(super) fn new(roles: Vec<(RolePolicy, usize)>, grace: f64) -> Machine {
        let replicas: Vec<usize> = roles.iter().map(|(_, n)| *n).collect();
        let slots = replicas
            .iter()
            .enumerate()
            .flat_map(|(role, &n)| {
                (0..n).map(move |replica| Slot {
                    role,
                    replica,
                    state: AppState::Pending,
                    attempt: 0,
                    started: None,
                    ended: None,
                    exit: None,
                    msg: String::new(),
                    running: false,
                    stop: None,
                    signal_at: None,
                    limit_at: None,
                    kill_at: None,
                    checkpointing: false,
                    hung: None,
                    changed: true,
                })
            })
            .collect();
        Machine {
            roles: roles.into_iter().map(|(r, _)| r).collect(),
            slots,
            retries: RetryCounters::new(replicas.iter().copied()),
            requeues: RetryCounters::new(replicas.iter().copied()),
            num_restarts: 0,
            phase: Phase::Running,
            msg: String::new(),
            grace,
        }
    }

    /// The first action: start every replica.
    pub(super) fn begin(&self) -> Vec<Action> {
        vec![Action::Start((0..self.slots.len()).collect())]
    }

    /// The replicas.
    pub(super) fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The number the next attempt of slot `i` gets.
    pub(super) fn next_attempt(&self, i: usize) -> u32 {
        let slot = &self.slots[i];
        slot.attempt + u32::from(slot.started.is_some())
    }

    /// Restarts so far (after failures and requeues).
    pub(super) fn num_restarts(&self) -> u32 {
        self.num_restarts
    }

    /// Why the app is failing or failed (empty while nothing did).
    pub(super) fn message(&self) -> &str {
        &self.msg
    }

    /// The slots changed since the last call (their state, attempt, times or message).
    pub(super) fn take_changed(&mut self) -> Vec<usize> {
        let mut changed = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if std::mem::take(&mut s.changed) {
                changed.push(i);
            }
        }
        changed
    }

    /// The app's final state once nothing runs any more, else `None`.
    pub(super) fn finished(&self) -> Option<AppState> {
        match &self.phase {
            Phase::Running => self
                .slots
                .iter()
                .all(|s| s.state == AppState::Succeeded)
                .then_some(AppState::Succeeded),
            Phase::Stopping(state) => self.slots.iter().all(|s| !s.running).then_some(*state),
            Phase::Restarting(_) => None,
        }
    }

    /// When the next [`Event::Tick`] is due, if any deadline is pending.
    pub(super) fn next_deadline(&self) -> Option<f64> {
        self.slots
            .iter()
            .filter(|s| s.running)
            .flat_map(|s| [s.signal_at, s.limit_at, s.kill_at])
            .flatten()
            .min_by(f64::total_cmp)
    }

    /// Applies `event`, which happened at `now` (seconds), and says what to do.
    pub(super) fn on_event(&mut self, now: f64, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        match event {
            Event::Launched(results) => self.launched(now, results, &mut actions),
            Event::Exited {
                slot,
                exit,
                requeue_asked,
                oom,
            } => self.exited(now, slot, exit, requeue_asked, oom, &mut actions),
            Event::Cancel => self.stop_all(now, AppState::Cancelled, &mut actions),
            Event::Hung { slot, detail } => self.hung(now, slot, detail, &mut actions),
            Event::Tick => self.tick(now, &mut actions),
        }
        self.advance(&mut actions);
        actions
    }

    fn launched(&mut self, now: f64, results: Vec<(usize, Option<String>)>, out: &mut Vec<Action>) {
        let mut all_ok = true;
        for (i, error) in results {
            let role = &self.roles[self.slots[i].role];
            let slot = &mut self.slots[i];
            if slot.started.is_some() {
                slot.attempt += 1;
            }
            slot.started = Some(now);
            (slot.ended, slot.exit, slot.stop, slot.kill_at) = (None, None, None, None);
            slot.checkpointing = false;
            slot.hung = None;
            slot.msg.clear();
            slot.changed = true;
            match error {
                None => {
                    slot.state = AppState::Running;
                    slot.running = true;
                    slot.limit_at = role.time_limit.map(|t| now + t);
                    slot.signal_at = match (role.time_limit, role.checkpoint_signal) {
                        (Some(t), Some((_, before))) => Some(now + (t - before).max(0.0)),
                        _ => None,
                    };
                }
                Some(e) => {
                    slot.state = AppState::Failed;
                    slot.running = false;
                    slot.ended = Some(now);
                    slot.msg = format!("{}/{} could not start: {e}", role.name, slot.replica);
                    self.msg = slot.msg.clone();
                    all_ok = false;
                }
            }
        }
        if !all_ok {
            // Nothing half-started: stop what did start and fail the app.
            self.stop_all(now, AppState::Failed, out);
        }
    }

    /// The exit code that asks for a requeue in slot `i`'s role.
    pub(super) fn requeue_exit_code(&self, i: usize) -> i32 {
        self.slots.get(i).map_or(DEFAULT_REQUEUE_EXIT_CODE, |s| {
            self.roles[s.role].requeue_exit_code
        })
    }

    /// Whether slot `i` runs and may yet be found hung (it is not being stopped, and did not
    /// hang already in this attempt).
    pub(super) fn may_hang(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| s.running && s.stop.is_none() && s.hung.is_none())
    }

    /// Whether slot `i` was sent its checkpoint signal in this attempt and still runs: a
    /// wrapper (`sh -c`, torchrun) that dies of the signal may leave the processes that save.
    pub(super) fn checkpointing(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| s.running && s.checkpointing)
    }

    fn exited(
        &mut self,
        now: f64,
        i: usize,
        exit: Exit,
        requeue_asked: bool,
        oom: bool,
        out: &mut Vec<Action>,
    ) {
        let Some(slot) = self.slots.get_mut(i).filter(|s| s.running) else {
            return;
        };
        let role = &self.roles[slot.role];
        slot.running = false;
        slot.changed = true;
        slot.ended = Some(now);
        slot.exit = Some(exit);
        (slot.signal_at, slot.limit_at, slot.kill_at) = (None, None, None);
        let name = format!("{}/{}", role.name, slot.replica);
        let stopped = matches!(slot.stop, Some(Stop::Restart | Stop::End));
        let requeue_asked = role.recovery && requeue_asked;
        let reason = match exit {
            Exit::Code(0) if !requeue_asked && slot.hung.is_none() => EndReason::Succeeded,
            _ if stopped => EndReason::Cancelled,
            _ if oom => EndReason::Oom,
            // However it then ended, a hung attempt ended because it hung.
            _ if slot.hung.is_some() => EndReason::Hung,
            _ if requeue_asked => EndReason::Requeued,
            Exit::Code(c) if role.recovery && c == role.requeue_exit_code => EndReason::Requeued,
            _ if slot.stop == Some(Stop::TimeLimit) => EndReason::Timeout,
            // A preemption notice is a SIGTERM; a bare SIGKILL is what the out-of-memory
            // killer sends, and a failure.
            Exit::Signal(s) if role.recovery && s == SIGTERM => EndReason::Preempted,
            _ => EndReason::Failed,
        };
        (slot.state, slot.msg) = match reason {
            EndReason::Succeeded => (AppState::Succeeded, String::new()),
            EndReason::Cancelled => (AppState::Cancelled, format!("{name} was stopped")),
            EndReason::Timeout => (
                AppState::Failed,
                format!(
                    "{name} exceeded its time limit of {} and was stopped",
                    seconds(role.time_limit.unwrap_or_default())
                ),
            ),
            EndReason::Hung => (
                AppState::Failed,
                format!(
                    "{name} hung: no progress (output or heartbeat) for {}{}; its stacks: \
                     `torchx log --stacks`",
                    seconds(role.hang_timeout.unwrap_or_default()),
                    slot.hung
                        .as_deref()
                        .filter(|d| !d.is_empty())
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default()
                ),
            ),
            EndReason::Oom => (
                AppState::Failed,
                format!(
                    "{} (out of memory)",
                    exit_message(&role.name, slot.replica as u32, exit)
                ),
            ),
            EndReason::Requeued if requeue_asked => (
                AppState::Failed,
                format!("{name} asked to be requeued (TORCHX_REQUEUE_FILE)"),
            ),
            EndReason::Requeued => (
                AppState::Failed,
                format!(
                    "{name} asked to be requeued (exit code {})",
                    role.requeue_exit_code
                ),
            ),
            EndReason::Preempted => (
                AppState::Failed,
                format!(
                    "{} (preempted)",
                    exit_message(&role.name, slot.replica as u32, exit)
                ),
            ),
            _ => (
                AppState::Failed,
                exit_message(&role.name, slot.replica as u32, exit),
            ),
        };
        out.push(Action::Ended(AttemptEnd {
            slot: i,
            attempt: slot.attempt,
            started: slot.started,
            ended: now,
            exit,
            reason,
        }));
        let restarting_this = matches!(&self.phase, Phase::Restarting(t) if t.contains(&i));
        if matches!(reason, EndReason::Succeeded | EndReason::Cancelled)
            || matches!(self.phase, Phase::Stopping(_))
            || restarting_this
        {
            return;
        }
        let (role_idx, replica) = (slot.role, slot.replica);
        let msg = slot.msg.clone();
        // Under the recovery contract a hung attempt is started again from its checkpoint, as
        // after a time limit; otherwise a hang is a failure.
        let requeue = reason.is_requeue() || (reason == EndReason::Hung && role.recovery);
        let (budget, counters, what) = if requeue {
            (role.max_requeues, &mut self.requeues, "requeue")
        } else {
            (role.max_retries, &mut self.retries, "restart")
        };
        let decision = on_failure(role.retry_policy, budget, counters, role_idx, replica);
        if decision == Decision::Fail {
            self.msg = if requeue && budget > 0 {
                format!("{msg}; no requeues left (max_requeues={budget})")
            } else {
                msg
            };
            self.stop_all(now, AppState::Failed, out);
            return;
        }
        self.num_restarts += 1;
        out.push(Action::Note(format!(
            "torchx supervisor: {msg}; {what} ({decision:?}, restart {} of role {})",
            self.num_restarts, role.name
        )));
        let targets = match decision {
            Decision::RestartReplica => vec![i],
            Decision::RestartRole => (0..self.slots.len())
                .filter(|&j| self.slots[j].role == role_idx)
                .collect(),
            _ => (0..self.slots.len()).collect(),
        };
        self.restart(now, targets, out);
    }

    /// Stops `targets` and starts them again once all have exited.
    fn restart(&mut self, now: f64, mut targets: Vec<usize>, out: &mut Vec<Action>) {
        if let Phase::Restarting(existing) = &self.phase {
            targets.extend(existing);
            targets.sort_unstable();
            targets.dedup();
        }
        for &j in &targets {
            self.stop(now, j, Stop::Restart, out);
        }
        self.phase = Phase::Restarting(targets);
    }

    fn stop_all(&mut self, now: f64, state: AppState, out: &mut Vec<Action>) {
        if !matches!(self.phase, Phase::Stopping(_)) {
            self.phase = Phase::Stopping(state);
        }
        for i in 0..self.slots.len() {
            self.stop(now, i, Stop::End, out);
        }
    }

    /// SIGTERM now, SIGKILL after the grace period. A later reason replaces an earlier one (a
    /// cancel during a time-limit stop is a cancel) without signalling again.
    fn stop(&mut self, now: f64, i: usize, why: Stop, out: &mut Vec<Action>) {
        let slot = &mut self.slots[i];
        if !slot.running {
            return;
        }
        if slot.stop.is_none() {
            out.push(Action::Signal {
                slot: i,
                signal: SIGTERM,
            });
            slot.kill_at = Some(now + self.grace);
        }
        if slot.stop != Some(Stop::End) {
            slot.stop = Some(why);
        }
    }

    /// Slot `i` hung. Under the recovery contract it gets its checkpoint signal first (the
    /// role's, else the default) and the grace period to save and exit; otherwise, or if it
    /// does not, it is stopped. Either way the attempt ends as `hung`.
    fn hung(&mut self, now: f64, i: usize, detail: String, out: &mut Vec<Action>) {
        let Some(slot) = self
            .slots
            .get_mut(i)
            .filter(|s| s.running && s.stop.is_none())
        else {
            return;
        };
        let role = &self.roles[slot.role];
        out.push(Action::Note(format!(
            "torchx supervisor: {}/{} made no progress for {}{}; stopping it",
            role.name,
            slot.replica,
            seconds(role.hang_timeout.unwrap_or_default()),
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({detail})")
            }
        )));
        slot.hung = Some(detail);
        if role.recovery {
            let signal = role.checkpoint_signal.map_or(
                crate::specs::DEFAULT_CHECKPOINT_SIGNAL.signal.number(),
                |(s, _)| s,
            );
            slot.checkpointing = true;
            slot.signal_at = None;
            slot.limit_at = Some(now + self.grace);
            out.push(Action::Signal { slot: i, signal });
        } else {
            self.stop(now, i, Stop::Hang, out);
        }
    }

    fn tick(&mut self, now: f64, out: &mut Vec<Action>) {
        let due = |at: &mut Option<f64>| at.take_if(|t| *t <= now).is_some();
        for i in 0..self.slots.len() {
            let role = &self.roles[self.slots[i].role];
            let (signal, time_limit) = (role.checkpoint_signal, role.time_limit);
            let slot = &mut self.slots[i];
            if !slot.running {
                continue;
            }
            if due(&mut slot.signal_at) {
                if let Some((signal, _)) = signal {
                    slot.checkpointing = true;
                    out.push(Action::Signal { slot: i, signal });
                }
            }
            if due(&mut slot.limit_at) {
                if slot.hung.is_some() {
                    // A hung replica's checkpoint window closed.
                    self.stop(now, i, Stop::Hang, out);
                } else {
                    out.push(Action::Note(format!(
                        "torchx supervisor: {}/{} reached its time limit of {}; stopping it",
                        role.name,
                        slot.replica,
                        seconds(time_limit.unwrap_or_default())
                    )));
                    self.stop(now, i, Stop::TimeLimit, out);
                }
            }
            let slot = &mut self.slots[i];
            if due(&mut slot.kill_at) {
                out.push(Action::Signal {
                    slot: i,
                    signal: SIGKILL,
                });
            }
        }
    }

    /// Starts a restart's targets once they have all exited.
    fn advance(&mut self, out: &mut Vec<Action>) {
        let Phase::Restarting(targets) = &self.phase else {
            return;
        };
        if targets.iter().any(|&j| self.slots[j].running) {
            return;
        }
        out.push(Action::Start(targets.clone()));
        self.phase = Phase::Running;
    }
}

/// `90s`, `1.5s`: a duration for messages.
fn seconds(s: f64) -> String {
    format!("{}s", (s * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests;
