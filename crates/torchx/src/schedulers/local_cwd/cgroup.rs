//! A cgroup v2 per app, one child per replica, made under the supervisor's own cgroup where the
//! machine lets it (root anywhere; a user under systemd in their delegated service). A process
//! cannot leave its cgroup by forking, changing session or losing its parent, so every process a
//! replica starts stays in it: stopping a replica is one write (`cgroup.kill`), "is anything
//! left" one read (`cgroup.events`), and both work from any process, whether or not the
//! supervisor lives (the guard, `status`, `cancel`: the path is in the ledger).
//!
//! Where no cgroup v2 is writable (a container with a read-only `/sys/fs/cgroup`, macOS), there
//! is none, and replicas are followed through their process trees (`descendants.rs`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys;

/// The name of an app's cgroup under the supervisor's: `torchx-<app id>`.
const PREFIX: &str = "torchx-";

/// An app's cgroup (`<dir>`) and its replicas' (`<dir>/<slot>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AppCgroup {
    dir: PathBuf,
}

impl AppCgroup {
    /// Creates the app's cgroup under this process's own; `None` where cgroup v2 is not mounted
    /// here or not writable by us.
    pub(super) fn create(app_id: &str) -> Option<AppCgroup> {
        // An app id is ours (name-suffix), but never let one be more than one path component.
        if app_id.is_empty() || app_id.contains('/') || app_id.starts_with('.') {
            return None;
        }
        let dir = own_cgroup_dir()?.join(format!("{PREFIX}{app_id}"));
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        let cgroup = AppCgroup { dir };
        // Writable is not enough: a process must be able to join a child (it may not where the
        // hierarchy is threaded, or delegation stops above us). Checked once, with a child that
        // is removed again.
        let probe = cgroup.replica_dir(usize::MAX);
        let joinable = fs::create_dir(&probe).is_ok() && probe.join("cgroup.procs").exists();
        let _ = fs::remove_dir(&probe);
        if !joinable {
            let _ = fs::remove_dir(&cgroup.dir);
            return None;
        }
        Some(cgroup)
    }

    /// The cgroup recorded at `path` (by the app's supervisor, in the ledger).
    pub(super) fn at(path: &str) -> AppCgroup {
        AppCgroup {
            dir: PathBuf::from(path),
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.dir
    }

    fn replica_dir(&self, slot: usize) -> PathBuf {
        self.dir.join(slot.to_string())
    }

    fn dir_of(&self, slot: Option<usize>) -> PathBuf {
        slot.map_or_else(|| self.dir.clone(), |s| self.replica_dir(s))
    }

    /// Replica `slot`'s `cgroup.procs`, opened for writing (its cgroup created if need be): a
    /// child writes `0` to it before it execs, so it starts inside (`sys::exec_unmasked`).
    pub(super) fn join_file(&self, slot: usize) -> io::Result<File> {
        let dir = self.replica_dir(slot);
        match fs::create_dir(&dir) {
            Err(e) if e.kind() != ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
    }

    /// Every process in replica `slot`'s cgroup (or the whole app's, `None`), nested cgroups
    /// included.
    pub(super) fn pids(&self, slot: Option<usize>) -> Vec<u32> {
        let mut pids = Vec::new();
        let mut dirs = vec![self.dir_of(slot)];
        while let Some(dir) = dirs.pop() {
            if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
                pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
            dirs.extend(subdirs(&dir));
        }
        pids
    }

    /// Whether any process is left in replica `slot`'s cgroup (or the app's), nested cgroups
    /// included. A cgroup that is gone holds nothing.
    pub(super) fn populated(&self, slot: Option<usize>) -> bool {
        fs::read_to_string(self.dir_of(slot).join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|l| l.trim() == "populated 1"))
    }

    /// Sends `signal` to every process of replica `slot` (or the app). A pid is signalled
    /// microseconds after the kernel listed it in the cgroup: to belong to someone else by then
    /// it would have to exit and the pid space (`pid_max`) wrap around in between.
    pub(super) fn signal(&self, slot: Option<usize>, signal: i32) {
        for pid in self.pids(slot) {
            sys::signal_pid(pid, signal);
        }
    }

    /// SIGKILLs every process of replica `slot` (or the app) and waits, at most `wait`, until
    /// none is left. Returns the pids still there then (none, unless the kernel is slow to
    /// reap or the cgroup cannot be written).
    ///
    /// `cgroup.kill` (Linux 5.14) kills the whole subtree at once, forks in flight included.
    /// Without it the cgroup is frozen, so that nothing forks while it is read, and each
    /// process killed, until nothing is left.
    pub(super) fn kill(&self, slot: Option<usize>, wait: Duration) -> Vec<u32> {
        let dir = self.dir_of(slot);
        let deadline = Instant::now() + wait;
        loop {
            if !self.populated(slot) {
                return Vec::new();
            }
            if write_flag(&dir, "cgroup.kill").is_err() {
                let frozen = write_flag(&dir, "cgroup.freeze").is_ok();
                self.signal(slot, sys::SIGKILL);
                if frozen {
                    // A frozen process dies of SIGKILL all the same: thawed so the cgroup can
                    // be used (and removed) afterwards.
                    let _ = fs::write(dir.join("cgroup.freeze"), "0");
                }
            }
            if Instant::now() >= deadline {
                return self.pids(slot);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills what is left (see [`AppCgroup::kill`]) and removes the app's cgroups, deepest
    /// first. Returns the pids that could not be killed (their cgroups are kept).
    pub(super) fn kill_and_remove(&self, wait: Duration) -> Vec<u32> {
        let left = self.kill(None, wait);
        if left.is_empty() {
            remove_tree(&self.dir);
        }
        left
    }
}

fn write_flag(dir: &Path, file: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(dir.join(file))
        .and_then(|mut f| f.write_all(b"1"))
}

/// The child cgroups of `dir` (a cgroup's directories are its children; its files are its
/// interface).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes an empty cgroup and its children, deepest first (`rmdir` is how a cgroup is
/// removed; a populated one refuses, and is left).
fn remove_tree(dir: &Path) {
    for child in subdirs(dir) {
        remove_tree(&child);
    }
    let _ = fs::remove_dir(dir);
}

/// This process's cgroup v2 directory: its path in `/proc/self/cgroup` (`0::/path`) under the
/// mount point of the cgroup2 file system (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a
/// hybrid machine).
fn own_cgroup_dir() -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount_point) = cgroup2_mount(&mounts)?;
    let relative = Path::new(path).strip_prefix(&root).ok()?;
    Some(mount_point.join(relative))
}

/// The root and mount point of the first cgroup2 mount in a `mountinfo` text. Its fields: id,
/// parent, dev, root, mount point, options, optional fields, `-`, type, source, options.
fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split(' ').next()? != "cgroup2" {
            return None;
        }
        let mut fields = before.split(' ');
        let root = fields.nth(3)?;
        let mount_point = fields.next()?;
        Some((
            PathBuf::from(unescape(root)),
            PathBuf::from(unescape(mount_point)),
        ))
    })
}

/// mountinfo writes a space, tab, newline and backslash in a path as `\040`, `\011`, `\012` and
/// `\134`.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_on_pure_and_hybrid_machines() {
        let pure = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            cgroup2_mount(pure),
            Some(("/".into(), "/sys/fs/cgroup".into()))
        );
        let hybrid = "25 24 0:22 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n\
                      26 25 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                      35 25 0:32 /a\\040b /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(("/a b".into(), "/sys/fs/cgroup/unified".into()))
        );
        assert_eq!(
            cgroup2_mount("26 25 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"),
            None
        );
    }

    #[test]
    fn an_app_id_is_one_path_component() {
        for bad in ["", "a/b", "..", ".hidden"] {
            assert_eq!(AppCgroup::create(bad), None, "{bad:?}");
        }
    }

    /// Where this machine lets us (root, cgroup v2), a process that double-forks into its own
    /// session is still found and killed through its replica's cgroup, and the cgroups are
    /// removed.
    #[test]
    fn a_replica_cgroup_holds_and_kills_a_double_forked_daemon() {
        let app = format!("cgtest-{}", std::process::id());
        let Some(cg) = AppCgroup::create(&app) else {
            eprintln!("no writable cgroup v2 here: the cgroup test does not apply");
            return;
        };
        let join = cg.join_file(0).unwrap();
        let mut cmd = std::process::Command::new("/bin/sh");
        // The daemon (setsid, parent gone) sleeps; its pid is printed for the check.
        let argv = [
            "sh",
            "-c",
            "setsid sh -c 'sleep 300 >/dev/null 2>&1 & echo $!' </dev/null",
        ];
        let env: Vec<_> = std::env::vars_os().collect();
        sys::exec_unmasked(&mut cmd, Path::new("/bin/sh"), &argv, &env, Some(&join)).unwrap();
        let out = cmd.output().unwrap();
        let daemon: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(sys::pid_alive(daemon, None));
        assert!(cg.populated(Some(0)) && cg.populated(None));
        assert!(cg.pids(None).contains(&daemon), "{:?}", cg.pids(None));
        assert_eq!(
            cg.kill_and_remove(Duration::from_secs(5)),
            Vec::<u32>::new()
        );
        // Killed: a zombie until init reaps it, never running again.
        let state = fs::read_to_string(format!("/proc/{daemon}/stat")).unwrap_or_default();
        assert!(state.is_empty() || state.contains(") Z"), "{state}");
        assert!(!cg.path().exists());
    }
}
