//! What the detached processes of groups and pipelines rely on in the state directory, which
//! may be shared by several hosts (an NFS home): records that a crash never leaves half
//! written or lost ([`write_record`]), and the liveness of the process that holds one
//! ([`Submitter`]), judged by its pid only on its own host and, anywhere else, by the lock it
//! keeps while it lives.
//!
//! On a shared directory this holds as far as the file system's locks reach other hosts
//! (NFSv4, or NFSv3 with `lockd`; not a `nolock` mount), which ARCHITECTURE.md says.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Writes `bytes` to `path` so that a reader sees the old record or the new one, never a
/// mix, and a crash of this process or of the machine right after never loses it: a
/// temporary file of a name no other writer uses, private (0600) from its first byte,
/// synced, renamed over `path`, then the directory synced.
pub fn write_record(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let io = |e| Error::io(format!("writing the record {}", path.display()), e);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::arg(format!("{} names no file", path.display())));
    };
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}.{}.{n}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        crate::scheduler::random_id()
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    // The rename itself survives a crash once the directory is synced.
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}

/// Takes the exclusive lock on `path` (created if missing) without waiting: `None` when
/// another process holds it. The lock lasts while the returned file (or a copy of its
/// descriptor in a child) is open, and ends with the process, however it ends.
pub fn try_lock(path: &Path) -> Result<Option<File>> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::io(format!("locking {}", path.display()), e))
        }
    }
}

/// Whether some process holds the lock on `path` (a missing file is held by none).
pub fn lock_held(path: &Path) -> bool {
    match File::options().append(true).open(path) {
        Ok(file) => matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// A machine as one boot of it: its host name and the kernel's boot id. A process recorded
/// under another boot of the same host ended with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// The host name (of this UTS namespace).
    pub name: String,
    /// `/proc/sys/kernel/random/boot_id`, where there is one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot: String,
}

impl Host {
    /// This machine, now.
    pub fn this() -> &'static Host {
        static THIS: OnceLock<Host> = OnceLock::new();
        THIS.get_or_init(|| {
            let read = |p: &str| {
                std::fs::read_to_string(p)
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            };
            let mut name = read("/proc/sys/kernel/hostname");
            if name.is_empty() {
                name = std::env::var("HOSTNAME").unwrap_or_default();
            }
            Host {
                name,
                boot: read("/proc/sys/kernel/random/boot_id"),
            }
        })
    }
}

/// A process that holds a record (a pipeline's holder, a step's or a group's submitter): its
/// pid and start time, and the host it runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitter {
    /// Its pid.
    pub pid: u32,
    /// Its start time (clock ticks since boot, where known): a reused pid is not it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// Where it runs (absent in records of older versions: this host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
}

impl Submitter {
    /// The process `pid` of this host.
    pub fn of(pid: u32) -> Submitter {
        Submitter {
            pid,
            start: crate::sys::proc_start_time(pid),
            host: Some(Host::this().clone()),
        }
    }

    /// This process.
    pub fn this_process() -> Submitter {
        Submitter::of(std::process::id())
    }

    /// Whether it still runs. On its own host, by its pid and start time; under a later boot
    /// of its host, no; on another host its pid means nothing here, so by whether `lock` (the
    /// lock it keeps while it lives) is held.
    pub fn alive(&self, lock: &Path) -> bool {
        let this = Host::this();
        match &self.host {
            Some(h) if h.name != this.name => lock_held(lock),
            Some(h) if !h.boot.is_empty() && !this.boot.is_empty() && h.boot != this.boot => false,
            _ => crate::sys::pid_alive(self.pid, self.start),
        }
    }

    /// Where it runs, for a message: `pid N` or `pid N on HOST`.
    pub fn describe(&self) -> String {
        match &self.host {
            Some(h) if h.name != Host::this().name => format!("pid {} on {}", self.pid, h.name),
            _ => format!("pid {}", self.pid),
        }
    }
}

/// Fault injection for the crash tests: where `TORCHX_FAILPOINTS` names `point` (a comma
/// list), the first process of the state directory `state_dir` to reach it kills itself with
/// SIGKILL (as the OOM killer would), leaving a mark in `<state_dir>/failpoints/` so that the
/// process that replaces it goes on. Unset (always, outside tests), it costs one environment
/// lookup.
pub fn failpoint(state_dir: &Path, point: &str) {
    let Some(points) = std::env::var_os("TORCHX_FAILPOINTS") else {
        return;
    };
    if !points
        .to_string_lossy()
        .split(',')
        .any(|p| p.trim() == point)
    {
        return;
    }
    let dir = state_dir.join("failpoints");
    let _ = std::fs::create_dir_all(&dir);
    let first = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(point))
        .is_ok();
    if first {
        crate::sys::signal_pid(std::process::id(), crate::sys::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_record_is_replaced_whole_private_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_record(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["record.json"]);
        assert!(write_record(&dir.path().join("no/such/dir/r.json"), b"x").is_err());
    }

    #[test]
    fn a_lock_is_seen_held_until_its_file_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("holder.lock");
        assert!(!lock_held(&path));
        let lock = try_lock(&path).unwrap().expect("free");
        assert!(lock_held(&path));
        assert!(try_lock(&path).unwrap().is_none());
        drop(lock);
        assert!(!lock_held(&path));
    }

    #[test]
    fn a_process_elsewhere_is_judged_by_its_lock_and_a_past_boot_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let lock_path = dir.path().join("holder.lock");
        let me = Submitter::this_process();
        assert!(me.alive(&lock_path), "this process, by its pid");
        assert_eq!(me.describe(), format!("pid {}", me.pid));

        // Another host: this pid (alive here) means nothing; the lock decides.
        let mut elsewhere = me.clone();
        elsewhere.host = Some(Host {
            name: format!("{}-other", Host::this().name),
            boot: "b".into(),
        });
        assert!(!elsewhere.alive(&lock_path));
        let lock = try_lock(&lock_path).unwrap().unwrap();
        assert!(elsewhere.alive(&lock_path));
        drop(lock);
        assert!(elsewhere.describe().ends_with("-other"));

        // This host under an earlier boot: over, even with this very pid alive now.
        if !Host::this().boot.is_empty() {
            let mut rebooted = me.clone();
            rebooted.host = Some(Host {
                name: Host::this().name.clone(),
                boot: "an-earlier-boot".into(),
            });
            assert!(!rebooted.alive(&lock_path));
        }
        // A record of an older version (no host): this host.
        let old: Submitter = serde_json::from_str(&format!("{{\"pid\": {}}}", me.pid)).unwrap();
        assert!(old.alive(&lock_path));
    }
}
