//! Thin wrappers over the few POSIX calls std does not offer.
#![allow(unsafe_code)]

/// True when a process with this pid exists (and, if given, started at `start` ticks).
pub fn pid_alive(pid: u32, start: Option<u64>) -> bool {
    let Ok(pid_i) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let exists = unsafe { libc::kill(pid_i, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match (start, proc_start_time(pid)) {
        (Some(want), Some(got)) => want == got && !is_zombie(pid),
        _ => !is_zombie(pid),
    }
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn is_zombie(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().map(String::as_str) == Some("Z"))
}

/// The process start time in clock ticks since boot (field 22 of /proc/pid/stat).
pub fn proc_start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Sends `sig` to the process group `pgid`; false if there is no such group.
pub fn signal_group(pgid: u32, sig: i32) -> bool {
    let Ok(pgid) = i32::try_from(pgid) else {
        return false;
    };
    if pgid <= 1 {
        return false;
    }
    // SAFETY: plain kill(2) on a negative pid (a process group); no memory is touched.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// The real user id.
pub fn uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

pub use libc::{SIGKILL, SIGTERM};
