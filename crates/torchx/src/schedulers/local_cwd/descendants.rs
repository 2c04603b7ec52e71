//! Every process a replica starts, wherever it goes: torchrun puts its workers in sessions of
//! their own, a daemon double-forks, a wrapper dies and leaves its child. The supervisor is the
//! reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`), so none escapes to init, and
//! follows the process tree (`/proc/<pid>/task/*/children`) from each replica's leader, keeping
//! each process it saw with its start time, so a process stays its replica's after its parent
//! is gone and a reused pid is never signalled. Where procfs lists no children (macOS) nothing
//! is tracked and replicas are reached through their process groups only.

use std::collections::HashMap;

use crate::sys;

/// A process of a replica's, as first seen.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    start: Option<u64>,
    slot: usize,
}

/// The processes of each replica, beyond its leader.
#[derive(Debug, Default)]
pub(super) struct Descendants {
    procs: HashMap<u32, Tracked>,
}

impl Descendants {
    /// Follows the tree again: from each live leader (`(slot, pid)`), and from each process
    /// already known (an orphan is re-parented here, but stays its replica's). A child of this
    /// process that is neither a leader nor in `not_ours` and was never seen is an orphan born
    /// since the last look: it goes to `orphans_of` (the replica whose leader just exited), if
    /// any.
    pub(super) fn refresh(
        &mut self,
        leaders: &[(usize, u32)],
        not_ours: &[u32],
        orphans_of: Option<usize>,
    ) {
        self.procs.retain(|&pid, t| sys::pid_alive(pid, t.start));
        let mut queue: Vec<(u32, usize)> = leaders.iter().map(|&(slot, pid)| (pid, slot)).collect();
        queue.extend(self.procs.iter().map(|(&pid, t)| (pid, t.slot)));
        if let Some(slot) = orphans_of {
            let unknown: Vec<u32> = sys::children_of(std::process::id())
                .into_iter()
                .filter(|p| {
                    !self.procs.contains_key(p)
                        && !not_ours.contains(p)
                        && !leaders.iter().any(|&(_, l)| l == *p)
                })
                .collect();
            for pid in unknown {
                queue.push((pid, slot));
                self.track(pid, slot);
            }
        }
        while let Some((pid, slot)) = queue.pop() {
            for child in sys::children_of(pid) {
                if !self.procs.contains_key(&child) {
                    self.track(child, slot);
                    queue.push((child, slot));
                }
            }
        }
    }

    fn track(&mut self, pid: u32, slot: usize) {
        let start = sys::proc_start_time(pid);
        self.procs.insert(pid, Tracked { start, slot });
    }

    /// The replica a process belongs to, if it is a known descendant.
    pub(super) fn slot_of(&self, pid: u32) -> Option<usize> {
        self.procs.get(&pid).map(|t| t.slot)
    }

    /// Whether any process of `slot` (beyond its leader) is still alive.
    pub(super) fn any_alive(&self, slot: usize) -> bool {
        self.procs
            .iter()
            .any(|(&pid, t)| t.slot == slot && sys::pid_alive(pid, t.start))
    }

    /// Sends `signal` to every live process of `slot`, except members of `group` (which the
    /// caller signals as a group).
    pub(super) fn signal(&self, slot: usize, signal: i32, group: Option<u32>) {
        for (&pid, t) in &self.procs {
            if t.slot != slot || !sys::pid_alive(pid, t.start) {
                continue;
            }
            if group.is_some() && sys::proc_group(pid) == group {
                continue;
            }
            sys::signal_pid(pid, signal);
        }
    }

    /// Kills every process of `slot` and forgets them (their zombies, re-parented here, are
    /// reaped with the other children nobody tracks).
    pub(super) fn kill(&mut self, slot: usize) {
        self.signal(slot, sys::SIGKILL, None);
        self.procs.retain(|_, t| t.slot != slot);
    }

    /// Kills every descendant of this process that is not in `keep` (nor below it): what is
    /// left when the app ends, whoever started it.
    pub(super) fn kill_strays(&mut self, keep: &[u32]) {
        let mut queue: Vec<u32> = sys::children_of(std::process::id())
            .into_iter()
            .filter(|p| !keep.contains(p))
            .collect();
        let mut seen = Vec::new();
        while let Some(pid) = queue.pop() {
            queue.extend(sys::children_of(pid));
            seen.push((pid, sys::proc_start_time(pid)));
        }
        for (pid, start) in seen {
            if sys::pid_alive(pid, start) {
                sys::signal_pid(pid, sys::SIGKILL);
            }
        }
        self.procs.clear();
    }
}
