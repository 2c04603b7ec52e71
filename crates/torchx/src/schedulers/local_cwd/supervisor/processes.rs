//! The supervisor's hold on its replicas' processes: signals (to a process, its workers, its
//! whole tree or its container), the process trees it follows, killing a replica and the hang
//! watch's stop.

use std::io::Write;
use std::time::{Duration, Instant};

use super::containers::{container_pids, signal_container};
use super::Supervisor;
use crate::schedulers::local_cwd::machine::Event;
use crate::schedulers::local_cwd::{now, watchdog};
use crate::sys::{self, Exit};

impl Supervisor {
    /// Handles every replica that exited. Each is seen before it is reaped: its process group
    /// (whatever the replica left behind in it goes with it) is killed while the unreaped
    /// leader still reserves the group id, so the id cannot have been reused; then it is
    /// collected, its pipes drained, and the machine told.
    ///
    /// A leader that exits in its replica's checkpoint window while other processes of the
    /// replica live (a wrapper killed by the signal its trainer handles) is reaped alone: the
    /// attempt ends when the rest have ([`Supervisor::end_drained`]), or at the time limit.
    pub(super) fn collect_exits(&mut self) {
        while let Some((pid, exit)) = sys::peek_exited(None) {
            let slot = self.replicas.iter().position(|r| {
                r.leader_exit.is_none() && r.proc.as_ref().is_some_and(|p| p.pid == pid)
            });
            let Some(i) = slot else {
                // The guard, `docker kill`, or a replica's orphan, whose exit may ask for a
                // requeue.
                if let Some(owner) = self.descendants.slot_of(pid) {
                    let r = &mut self.replicas[owner];
                    let code = self.machine.requeue_exit_code(owner);
                    if r.recovery && exit == Exit::Code(code) {
                        r.orphan_asked_requeue = true;
                    }
                }
                sys::reap(pid);
                continue;
            };
            let container = self.replicas[i].param.container.is_some();
            self.refresh_tree((!container).then_some(i));
            let r = &mut self.replicas[i];
            if let (true, Some(signal)) = (r.sent_to_leader, r.leader_forwards) {
                if exit == Exit::Signal(signal) {
                    // It died of the signal instead of forwarding it (a torch without
                    // --signals-to-handle): its workers get it from us.
                    r.sent_to_leader = false;
                    self.signal_all(i, signal);
                }
            }
            let exit = match (&self.replicas[i].param.container, exit) {
                // `docker run` exits 128+N when its container died of signal N.
                (Some(_), Exit::Code(c)) if (129..160).contains(&c) => Exit::Signal(c - 128),
                _ => exit,
            };
            if self.machine.checkpointing(i) && self.replica_alive(i) {
                note!(
                    "torchx supervisor: replica {i}'s main process ended ({exit:?}) while its \
                     processes checkpoint; waiting for them"
                );
                self.replicas[i].leader_exit = Some(exit);
                sys::reap(pid);
                continue;
            }
            sys::signal_group(pid, sys::SIGKILL);
            self.kill_replica(i);
            sys::reap(pid);
            self.ended(i, exit);
        }
        self.end_drained();
    }

    /// Sends `signal` to every process of replica `slot`: its container, or its process group
    /// (while its leader is unreaped, the group id is its own) and each of its processes in
    /// other groups and sessions (torchrun's workers). A checkpoint signal its leader forwards
    /// goes to the leader alone (each worker gets it once); should the leader die of it, the
    /// rest get it then ([`Supervisor::collect_exits`]).
    pub(super) fn signal(&mut self, slot: usize, signal: i32) {
        self.refresh_tree(None);
        let shutting_down = self.replicas[slot].had_workers && !self.workers_alive(slot);
        let r = &mut self.replicas[slot];
        if let (Some(p), Some(forwarded), None) = (&r.proc, r.leader_forwards, r.leader_exit) {
            if forwarded == signal {
                if shutting_down {
                    // Its workers all ended: torchrun is shutting down, and the signal would
                    // only turn their success into its failure.
                    note!("torchx supervisor: replica {slot}'s workers have ended; signal {signal} not sent");
                    return;
                }
                sys::signal_pid(p.pid, signal);
                r.sent_to_leader = true;
                return;
            }
        }
        self.signal_all(slot, signal);
    }

    /// Whether replica `slot` has processes beyond its leader (torchrun's workers).
    pub(super) fn workers_alive(&self, slot: usize) -> bool {
        let Some(leader) = self.replicas[slot].proc.as_ref().map(|p| p.pid) else {
            return false;
        };
        match &self.cgroup {
            Some(c) => c.pids(Some(slot)).iter().any(|&p| p != leader),
            None => self.descendants.any_alive(slot),
        }
    }

    /// Sends `signal` to every process of replica `slot` (see [`Supervisor::signal`]).
    pub(super) fn signal_all(&mut self, slot: usize, signal: i32) {
        let r = &self.replicas[slot];
        match (&r.proc, &r.param.container, &self.cgroup) {
            (Some(_), Some(name), _) => signal_container(name, signal),
            // Each process of the replica exactly once, in whatever session.
            (Some(_), None, Some(cgroup)) => cgroup.signal(Some(slot), signal),
            (Some(p), None, None) => {
                let group = r.leader_exit.is_none().then_some(p.pid);
                if let Some(pgid) = group {
                    sys::signal_group(pgid, signal);
                }
                self.descendants.signal(slot, signal, group);
            }
            (None, _, _) => {}
        }
    }

    /// Follows the replicas' process trees again; `orphans_of`: the replica an unknown orphan
    /// belongs to (the one whose leader just exited).
    pub(super) fn refresh_tree(&mut self, orphans_of: Option<usize>) {
        let leaders: Vec<(usize, u32)> = self
            .replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.leader_exit.is_none() && r.param.container.is_none())
            .filter_map(|(i, r)| Some((i, r.proc.as_ref()?.pid)))
            .collect();
        self.descendants
            .refresh(&leaders, &[self.guard_pid], orphans_of);
        // A torchrun whose workers were seen and are gone is shutting down ([`Self::signal`]).
        for i in 0..self.replicas.len() {
            let r = &self.replicas[i];
            if r.leader_forwards.is_some() && !r.had_workers && self.workers_alive(i) {
                self.replicas[i].had_workers = true;
            }
        }
        if let Some(path) = &self.tracked {
            if let Err(e) = self.descendants.save(path) {
                note!(
                    "torchx supervisor of {}: cannot record its processes: {e}",
                    self.app_id
                );
            }
        }
        self.tree_seen = Instant::now();
    }

    /// The live processes of replica `i`: its leader, then the rest in pid order; for a
    /// container (local_docker), the processes the engine says run in it.
    pub(super) fn pids_of(&self, i: usize) -> Vec<u32> {
        if let Some(name) = &self.replicas[i].param.container {
            return container_pids(name);
        }
        let leader = self.replicas[i].proc.as_ref().map(|p| p.pid);
        let rest = match &self.cgroup {
            Some(c) => {
                let mut pids = c.pids(Some(i));
                pids.sort_unstable();
                pids
            }
            None => self.descendants.pids(i),
        };
        leader
            .into_iter()
            .chain(rest.into_iter().filter(|p| Some(*p) != leader))
            .collect()
    }

    /// Whether any process of replica `i` beyond its (exited) leader still runs.
    pub(super) fn replica_alive(&self, i: usize) -> bool {
        match &self.cgroup {
            Some(c) => c.populated(Some(i)),
            None => self.descendants.any_alive(i),
        }
    }

    /// Kills every process of replica `i` (its attempt ended): nothing of it may run beside
    /// the next attempt, nor ask for a requeue of it.
    pub(super) fn kill_replica(&mut self, i: usize) {
        self.descendants.kill(i);
        if let Some(c) = &self.cgroup {
            let left = c.kill(Some(i), KILL_WAIT);
            if !left.is_empty() {
                note!("torchx supervisor: replica {i}'s processes {left:?} outlived SIGKILL");
            }
        }
    }

    /// Each watched replica that made no progress for its hang timeout: the stack of each of
    /// its processes goes to `stacks.<attempt>` beside its logs, then the machine stops it.
    pub(super) fn watch_for_hangs(&mut self) {
        for i in 0..self.replicas.len() {
            let may_hang = self.machine.may_hang(i) && self.replicas[i].leader_exit.is_none();
            let Some(watch) = self.replicas[i].watch.as_mut().filter(|_| may_hang) else {
                continue;
            };
            if !watch.hung_now() {
                continue;
            }
            self.refresh_tree(None);
            let stacks = watchdog::capture(&self.pids_of(i));
            let r = &self.replicas[i];
            if !r.recovery {
                watchdog::abort_for_faulthandler(&stacks);
            }
            let attempt = self.machine.slots()[i].attempt;
            if let Some(dir) = r.param.stdout.parent() {
                let file = dir.join(format!("stacks.{attempt}"));
                if let Err(e) = std::fs::write(&file, watchdog::render(&r.name, &stacks)) {
                    note!("torchx supervisor: cannot write {}: {e}", file.display());
                }
            }
            let detail = watchdog::summary(&stacks);
            let actions = self
                .machine
                .on_event(now(), Event::Hung { slot: i, detail });
            self.apply(actions);
        }
    }
}

/// Whether torchrun, told through the role's environment (`PET_SIGNALS_TO_HANDLE`), forwards
/// `signal` to its workers.
pub(super) fn torchrun_forwards(env: &crate::specs::Env, signal: crate::specs::Signal) -> bool {
    let name = format!("SIG{}", signal.name());
    env.get(crate::specs::TORCHRUN_SIGNALS_ENV)
        .is_some_and(|signals| signals.split(',').any(|s| s.trim() == name))
}

/// How long a kill waits for a replica's processes to be gone.
pub(super) const KILL_WAIT: Duration = Duration::from_secs(2);
