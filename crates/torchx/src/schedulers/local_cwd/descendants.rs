//! Every process a replica starts, wherever it goes: torchrun puts its workers in sessions of
//! their own, a daemon double-forks, a wrapper dies and leaves its child. The supervisor is the
//! reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`), so none escapes to init, and
//! follows the process tree (`/proc/<pid>/task/*/children`) from each replica's leader, keeping
//! each process it saw with its start time, so a process stays its replica's after its parent
//! is gone and a reused pid is never signalled. Where procfs lists no children (macOS) nothing
//! is tracked and replicas are reached through their process groups only.
//!
//! Without a cgroup, the supervisor also keeps what it tracks in a file ([`tracked_path`]), so
//! that its guard, `status` and `cancel` still reach every process once it is dead
//! ([`kill_tree`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys;

/// The slot of an orphan no replica can be told apart as its own.
const UNATTRIBUTED: usize = usize::MAX;

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
    /// Whether `procs` changed since it was last saved.
    changed: bool,
}

impl Descendants {
    /// Follows the tree again: from each live leader (`(slot, pid)`), and from each process
    /// already known (an orphan is re-parented here, but stays its replica's). A child of this
    /// process that is neither a leader nor in `not_ours` and was never seen is an orphan born
    /// since the last look: it goes to `orphans_of` (the replica whose leader just exited), else
    /// to no replica (it goes with the app).
    pub(super) fn refresh(
        &mut self,
        leaders: &[(usize, u32)],
        not_ours: &[u32],
        orphans_of: Option<usize>,
    ) {
        let before = self.procs.len();
        self.procs.retain(|&pid, t| sys::pid_alive(pid, t.start));
        self.changed |= self.procs.len() != before;
        let mut queue: Vec<(u32, usize)> = leaders.iter().map(|&(slot, pid)| (pid, slot)).collect();
        queue.extend(self.procs.iter().map(|(&pid, t)| (pid, t.slot)));
        // An orphan whose parent died between two looks: the replica whose leader just exited,
        // else nobody's in particular (it still goes with the app, and is recorded with it).
        let slot = orphans_of.unwrap_or(UNATTRIBUTED);
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
        self.changed = true;
    }

    /// Writes what it tracks to `path` (`pid start` lines), if that changed since the last
    /// save: replaced whole, so a reader never sees half a list.
    pub(super) fn save(&mut self, path: &Path) -> std::io::Result<()> {
        if !self.changed {
            return Ok(());
        }
        let mut text = String::new();
        for (pid, t) in &self.procs {
            text.push_str(&format!("{pid} {}\n", t.start.unwrap_or(0)));
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path))?;
        self.changed = false;
        Ok(())
    }

    /// The replica a process belongs to, if it is a known descendant of one.
    pub(super) fn slot_of(&self, pid: u32) -> Option<usize> {
        self.procs
            .get(&pid)
            .map(|t| t.slot)
            .filter(|&s| s != UNATTRIBUTED)
    }

    /// Whether any process of `slot` (beyond its leader) is still alive.
    pub(super) fn any_alive(&self, slot: usize) -> bool {
        self.procs
            .iter()
            .any(|(&pid, t)| t.slot == slot && sys::pid_alive(pid, t.start))
    }

    /// The live processes of `slot` (beyond its leader), in pid order.
    pub(super) fn pids(&self, slot: usize) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .procs
            .iter()
            .filter(|(&pid, t)| t.slot == slot && sys::pid_alive(pid, t.start))
            .map(|(&pid, _)| pid)
            .collect();
        pids.sort_unstable();
        pids
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
        self.changed = true;
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
        self.changed = true;
    }
}

/// Where the supervisor of app `app_id` keeps the processes it tracks, when it has no cgroup.
pub(super) fn tracked_path(state_dir: &Path, app_id: &str) -> PathBuf {
    state_dir.join(super::NAME).join("procs").join(app_id)
}

/// The processes recorded at `path` (pid, start time); none if there is no such file.
pub(super) fn load_tracked(path: &Path) -> Vec<(u32, Option<u64>)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (pid, start) = l.split_once(' ')?;
            let start: u64 = start.trim().parse().ok()?;
            Some((pid.parse().ok()?, (start != 0).then_some(start)))
        })
        .collect()
}

/// Kills `seeds` (pid, start time: a reused pid is not one of them) and every descendant they
/// have, until none is left or `wait` is over: each round stops every live one (a stopped
/// process forks no more, and the kernel lists the children of a stopped process reliably),
/// finds their children, then kills them all. Returns the pids still alive at the end.
pub(super) fn kill_tree(seeds: &[(u32, Option<u64>)], wait: Duration) -> Vec<u32> {
    let deadline = Instant::now() + wait;
    let mut known: HashMap<u32, Option<u64>> = seeds.iter().copied().collect();
    loop {
        let mut queue: Vec<u32> = known
            .iter()
            .filter(|(&pid, &start)| sys::pid_alive(pid, start))
            .map(|(&pid, _)| pid)
            .collect();
        let mut live: Vec<u32> = Vec::new();
        while let Some(pid) = queue.pop() {
            if live.contains(&pid) {
                continue;
            }
            // Only a process tracked or found as a child of one is ever signalled.
            sys::signal_pid(pid, sys::SIGSTOP);
            live.push(pid);
            for child in sys::children_of(pid) {
                known
                    .entry(child)
                    .or_insert_with(|| sys::proc_start_time(child));
                queue.push(child);
            }
        }
        if live.is_empty() {
            return live;
        }
        for &pid in &live {
            sys::signal_pid(pid, sys::SIGKILL);
        }
        if Instant::now() >= deadline {
            std::thread::sleep(Duration::from_millis(20));
            return live
                .into_iter()
                .filter(|&p| sys::pid_alive(p, known.get(&p).copied().flatten()))
                .collect();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree whose root keeps forking (a fork bomb in small) is killed whole from its root
    /// alone, and a reused pid (another start time) is left alone.
    #[test]
    fn kill_tree_converges_on_a_forking_tree() {
        let mut root = std::process::Command::new("sh")
            .args(["-c", "while :; do sleep 30 & sleep 0.01; done"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let children = sys::children_of(root.id());
        assert!(!children.is_empty());
        let stranger = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let seeds = [
            (root.id(), sys::proc_start_time(root.id())),
            (stranger.id(), Some(1)),
        ];
        let left = kill_tree(&seeds, Duration::from_secs(3));
        let _ = root.wait();
        assert!(left.is_empty(), "{left:?}");
        std::thread::sleep(Duration::from_millis(50));
        for c in children {
            assert!(!sys::pid_alive(c, None), "child {c} left");
        }
        let mut stranger = stranger;
        assert!(sys::pid_alive(stranger.id(), None), "a stranger was killed");
        let _ = stranger.kill();
        let _ = stranger.wait();
    }

    #[test]
    fn a_saved_list_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app");
        let mut d = Descendants::default();
        d.track(std::process::id(), 0);
        d.save(&path).unwrap();
        let me = std::process::id();
        assert_eq!(load_tracked(&path), [(me, sys::proc_start_time(me))]);
        assert!(load_tracked(&dir.path().join("none")).is_empty());
    }
}
