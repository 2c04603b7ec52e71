//! Thin wrappers over the few POSIX calls std does not offer, for local_cwd's supervisor and the
//! plugin processes: each `unsafe` block is one plain FFI call (plus the buffers it fills), and
//! this is the library's only module with `unsafe`. Processes are started with std's `Command`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub(crate) use libc::{SIGABRT, SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGSTOP, SIGTERM};

/// True when a process with this pid exists, is not a zombie and (if given) started at `start`
/// ticks, which guards against pid reuse.
pub(crate) fn pid_alive(pid: u32, start: Option<u64>) -> bool {
    let Ok(pid_i) = i32::try_from(pid) else {
        return false;
    };
    if pid_i <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let exists = unsafe { libc::kill(pid_i, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match proc_info(pid) {
        Some(info) => !info.zombie && start.is_none_or(|want| want == info.start),
        // Gone since kill(0), unless the system cannot tell more (neither procfs nor
        // macOS's proc_pidinfo): it exists.
        None => !cfg!(any(target_os = "linux", target_os = "macos")),
    }
}

/// What the system says of a process: whether it is a zombie, when it started (the pid-reuse
/// check: a reused pid starts later) and its process group.
struct ProcInfo {
    zombie: bool,
    start: u64,
    pgid: u32,
}

/// Linux: `/proc/pid/stat` (start time in clock ticks since boot, field 22).
#[cfg(not(target_os = "macos"))]
fn proc_info(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    Some(ProcInfo {
        zombie: *fields.first()? == "Z",
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// macOS: `proc_pidinfo(PROC_PIDTBSDINFO)` (start time in microseconds since the epoch).
#[cfg(target_os = "macos")]
fn proc_info(pid: u32) -> Option<ProcInfo> {
    let pid = i32::try_from(pid).ok()?;
    let size = i32::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).ok()?;
    // SAFETY: an all-zero proc_bsdinfo is a valid value (integers and byte arrays).
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    // SAFETY: proc_pidinfo writes at most `size` bytes, the size of `info`, into it.
    let written = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&raw mut info).cast::<libc::c_void>(),
            size,
        )
    };
    (written == size).then(|| ProcInfo {
        zombie: info.pbi_status == libc::SZOMB,
        start: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
        pgid: info.pbi_pgid,
    })
}

/// When the process started, in the system's own unit: recorded with every pid so that a
/// reused pid is never signalled.
pub(crate) fn proc_start_time(pid: u32) -> Option<u64> {
    proc_info(pid).map(|i| i.start)
}

/// The process group of `pid`.
pub(crate) fn proc_group(pid: u32) -> Option<u32> {
    proc_info(pid).map(|i| i.pgid)
}

/// The children of `pid`, from every thread's `/proc/pid/task/*/children` (Linux); empty
/// where procfs does not list them.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Makes this process the reaper of its orphaned descendants (Linux `PR_SET_CHILD_SUBREAPER`):
/// a process whose parent dies is re-parented here instead of to init, so it stays in reach.
/// False where that is not available.
pub(crate) fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers and touches no memory.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Sends `sig` to the process group `pgid`; false if there is no such group.
pub(crate) fn signal_group(pgid: u32, sig: i32) -> bool {
    match i32::try_from(pgid) {
        // SAFETY: plain kill(2) on a negative pid (a process group); no memory is touched.
        Ok(p) if p > 1 => unsafe { libc::kill(-p, sig) == 0 },
        _ => false,
    }
}

/// Sends `sig` to one process.
pub(crate) fn signal_pid(pid: u32, sig: i32) -> bool {
    match i32::try_from(pid) {
        // SAFETY: plain kill(2); no memory is touched.
        Ok(p) if p > 1 => unsafe { libc::kill(p, sig) == 0 },
        _ => false,
    }
}

/// The real user id.
pub(crate) fn uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// Detaches the calling process from its terminal and process group (a new session).
pub(crate) fn setsid() {
    // SAFETY: setsid touches no memory; failing (already a group leader) is harmless.
    unsafe {
        libc::setsid();
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Exit {
    /// (exit code, signal), as the ledger records them: one of the two is set.
    pub(crate) fn code_and_signal(self) -> (Option<i32>, Option<i32>) {
        match self {
            Exit::Code(c) => (Some(c), None),
            Exit::Signal(s) => (None, Some(s)),
        }
    }
}

/// One exited child (`only`: that one, else any), left a zombie, without blocking: until
/// [`reap`] collects it, its pid — and so its process group id — cannot be reused, so its group
/// can still be signalled safely.
pub(crate) fn peek_exited(only: Option<u32>) -> Option<(u32, Exit)> {
    let (idtype, id): (libc::idtype_t, libc::id_t) = match only {
        Some(pid) => (libc::P_PID, pid),
        None => (libc::P_ALL, 0),
    };
    // SAFETY: an all-zero siginfo_t is a valid value; waitid writes only into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain waitid(2) on any child; WNOWAIT leaves the child waitable.
    let rc = unsafe {
        libc::waitid(
            idtype,
            id,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: waitid filled `info` for a CLD_* event (or left it zeroed: si_pid 0).
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid <= 0 {
        return None;
    }
    let exit = match info.si_code {
        libc::CLD_EXITED => Exit::Code(status),
        libc::CLD_KILLED | libc::CLD_DUMPED => Exit::Signal(status),
        _ => Exit::Code(-1),
    };
    Some((pid as u32, exit))
}

/// Collects child `pid` (after [`peek_exited`] saw it exit).
pub(crate) fn reap(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    let mut status = 0;
    // SAFETY: waitpid writes only to `status`.
    unsafe {
        libc::waitpid(pid, &mut status, libc::WNOHANG);
    }
}

/// Puts a file descriptor in non-blocking mode.
pub(crate) fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; no memory is touched.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes `cmd`'s child exec `program` with `argv` and exactly `env`, with no signal blocked.
/// The supervisor blocks the signals it reads from its signalfd/kqueue and std leaves a
/// spawned child's mask as it is: a replica would otherwise start with SIGTERM, SIGINT and
/// SIGHUP blocked, and only a SIGKILL could stop it. The hook calls `execve` itself, as
/// Python's subprocess does, so a file that is no program fails the spawn with ENOEXEC
/// instead of being run by `/bin/sh` (what `execvp`, std's call, would do). `cmd`'s stdio,
/// working directory and process group still apply: std sets them up before the hook runs.
///
/// With `join_cgroup` (a cgroup's `cgroup.procs`, open for writing), the child moves itself into
/// that cgroup first (writing `0`, "this process"), so nothing it starts is ever outside it.
///
/// Everything the hook uses is prepared before the fork: between fork and exec it only calls
/// async-signal-safe functions (write, sigemptyset, sigprocmask, execve) and allocates nothing,
/// so any caller may use it, threads or not.
pub(crate) fn exec_unmasked(
    cmd: &mut std::process::Command,
    program: &std::path::Path,
    argv: &[&str],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    join_cgroup: Option<&std::fs::File>,
) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let nul = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    };
    let program = CString::new(program.as_os_str().as_bytes()).map_err(|_| nul("the program"))?;
    let argv: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(*a).map_err(|_| nul("an argument")))
        .collect::<io::Result<_>>()?;
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| nul("an environment variable"))
        })
        .collect::<io::Result<_>>()?;
    // The null-terminated pointer arrays execve wants, built here, not after the fork. They
    // are kept as addresses (`usize`, a pointer's size) so the hook stays `Send + Sync`; they
    // point into the CStrings' heap buffers, which moving the CStrings into the hook does not
    // move.
    const _: () = assert!(std::mem::size_of::<usize>() == std::mem::size_of::<*const i8>());
    let addresses = |strings: &[CString]| -> Vec<usize> {
        strings
            .iter()
            .map(|s| s.as_ptr() as usize)
            .chain([0])
            .collect()
    };
    let (arg_ptrs, env_ptrs) = (addresses(&argv), addresses(&envp));
    // The child inherits the descriptor (std opens files close-on-exec: it is gone after exec);
    // a duplicate owned by the hook keeps it open until the spawn, whatever the caller does.
    let cgroup = join_cgroup.map(std::fs::File::try_clone).transpose()?;
    // SAFETY: between fork and exec the hook only calls write, sigemptyset, sigprocmask and
    // execve (async-signal-safe) and allocates nothing. write reads one byte of a static
    // string from a descriptor the hook owns (`cgroup`). execve reads `program` and the two
    // null-terminated arrays of addresses of NUL-terminated strings, all owned by the hook
    // (`argv` and `envp` are moved in to keep the strings alive). It returns only on failure,
    // which the hook reports to std (and so to the parent's `spawn`).
    unsafe {
        cmd.pre_exec(move || {
            let _keep_alive = (&argv, &envp);
            if let Some(procs) = &cgroup {
                if libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            libc::execve(
                program.as_ptr(),
                arg_ptrs.as_ptr().cast::<*const libc::c_char>(),
                env_ptrs.as_ptr().cast::<*const libc::c_char>(),
            );
            Err(io::Error::last_os_error())
        });
    }
    Ok(())
}

/// Blocks `signals` and SIGPIPE for this (single-threaded) process, restoring SIGPIPE's default
/// action first (which replicas inherit), so that a write to a closed pipe fails with EPIPE
/// instead of killing us and the blocked signals wait to be read from a descriptor.
fn block_for_reading(signals: &[i32]) -> io::Result<libc::sigset_t> {
    // SAFETY: the sigsets are initialised by sigemptyset before use; signal and sigprocmask
    // are plain calls on them.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        let mut blocked = set;
        libc::sigaddset(&mut blocked, libc::SIGPIPE);
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if libc::sigprocmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Signals delivered through a file descriptor instead of handlers: a signalfd on Linux, a
/// kqueue with `EVFILT_SIGNAL` filters elsewhere (macOS, the BSDs). Either is readable by
/// [`poll_readable`] when a signal is pending.
pub(crate) struct SignalFd(OwnedFd);

#[cfg(target_os = "linux")]
impl SignalFd {
    /// Blocks `signals` (see `block_for_reading`) and returns a descriptor to read them.
    pub(crate) fn new(signals: &[i32]) -> io::Result<SignalFd> {
        let set = block_for_reading(signals)?;
        // SAFETY: signalfd reads the initialised sigset and returns a new descriptor we own.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor owned by no one else.
        Ok(SignalFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The pending signals (drained).
    pub(crate) fn read(&self) -> Vec<i32> {
        let mut out = Vec::new();
        loop {
            // SAFETY: reading into a properly sized, zeroed siginfo struct.
            let (n, info) = unsafe {
                let mut info: libc::signalfd_siginfo = std::mem::zeroed();
                let size = std::mem::size_of::<libc::signalfd_siginfo>();
                let n = libc::read(
                    self.0.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                );
                (n, info)
            };
            if n <= 0 {
                return out;
            }
            out.push(info.ssi_signo as i32);
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl SignalFd {
    /// Blocks `signals` (see `block_for_reading`) and returns a kqueue that reports them: its
    /// signal filters record a delivery attempt even while the signal is blocked.
    pub(crate) fn new(signals: &[i32]) -> io::Result<SignalFd> {
        block_for_reading(signals)?;
        // SAFETY: kqueue returns a new descriptor we own.
        let kq = unsafe { libc::kqueue() };
        if kq < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: kq is a fresh descriptor owned by no one else.
        let kq = SignalFd(unsafe { OwnedFd::from_raw_fd(kq) });
        // SAFETY: fcntl on our own descriptor.
        unsafe { libc::fcntl(kq.0.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        let changes: Vec<libc::kevent> = signals
            .iter()
            .map(|&sig| libc::kevent {
                ident: sig as libc::uintptr_t,
                filter: libc::EVFILT_SIGNAL,
                flags: libc::EV_ADD,
                fflags: 0,
                data: 0,
                udata: std::ptr::null_mut(),
            })
            .collect();
        // SAFETY: registers `changes` (a valid array of its length); no events are returned.
        let n = unsafe {
            libc::kevent(
                kq.0.as_raw_fd(),
                changes.as_ptr(),
                changes.len() as libc::c_int,
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(kq)
    }

    /// The pending signals (drained).
    pub(crate) fn read(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        loop {
            // SAFETY: a zeroed kevent array for the kernel to fill; a zero timeout never blocks.
            let (n, events) = unsafe {
                let mut events: [libc::kevent; 8] = std::mem::zeroed();
                let n = libc::kevent(
                    self.0.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    events.as_mut_ptr(),
                    events.len() as libc::c_int,
                    &zero,
                );
                (n, events)
            };
            if n <= 0 {
                return out;
            }
            out.extend(events[..n as usize].iter().map(|e| e.ident as i32));
        }
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable (or hung up), or the timeout passes. Returns, per fd,
/// whether it is ready.
pub(crate) fn poll_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: pfds is a valid array of pollfd of the given length.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}

/// Blocks SIGPIPE for the calling thread, so a write to a closed pipe is an `EPIPE` error.
pub(crate) fn block_sigpipe() {
    // SAFETY: plain signal-mask calls on a zeroed, initialised sigset of this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::process::CommandExt;

    #[test]
    fn pid_liveness_checks_the_start_time_and_zombies() {
        let me = std::process::id();
        let start = proc_start_time(me).expect("own start time");
        assert!(pid_alive(me, Some(start)));
        assert!(pid_alive(me, None));
        assert!(!pid_alive(me, Some(start + 1)), "a reused pid is not ours");
        assert!(!pid_alive(0, None));
        assert!(!pid_alive(u32::MAX, None));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Until reaped it is a zombie: dead for our purposes.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pid_alive(pid, None) {
            assert!(std::time::Instant::now() < deadline, "`true` never exited");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert!(!pid_alive(pid, None));
    }

    #[test]
    fn signals_reach_a_whole_process_group() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        assert!(signal_group(pgid, SIGKILL));
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert!(!signal_group(1, SIGKILL), "never the init group");
        assert!(!signal_pid(0, SIGKILL), "never our own group");
    }

    #[test]
    fn poll_reports_readable_pipes_and_times_out() {
        let (r, mut w) = std::io::pipe().unwrap();
        set_nonblocking(&r).unwrap();
        let fds = [r.as_raw_fd()];
        assert_eq!(
            poll_readable(&fds, Some(Duration::from_millis(1))).unwrap(),
            [false]
        );
        w.write_all(b"x").unwrap();
        assert_eq!(poll_readable(&fds, None).unwrap(), [true]);
    }

    /// A replica's leader has exited and left a process in its group: seen (not reaped), the
    /// leader keeps its pid — the group's id — reserved, so the group is signalled while it is
    /// certainly still that replica's; then the leader is collected.
    #[test]
    fn an_exited_leader_keeps_its_group_reserved_until_reaped() {
        let out = tempfile::tempdir().unwrap();
        let pidfile = out.path().join("straggler");
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("sleep 60 & echo $! > {}", pidfile.display()))
            .process_group(0)
            .spawn()
            .unwrap();
        let leader = child.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let (pid, exit) = loop {
            if let Some(seen) = peek_exited(Some(leader)) {
                break seen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the leader did not exit"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!((pid, exit), (leader, Exit::Code(0)));
        // Still a zombie: its pid is not free for anyone else.
        let stat = std::fs::read_to_string(format!("/proc/{leader}/stat")).unwrap();
        assert_eq!(
            stat[stat.rfind(')').unwrap() + 2..].split(' ').next(),
            Some("Z")
        );
        let straggler: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(signal_group(leader, SIGKILL));
        reap(leader);
        assert!(!std::path::Path::new(&format!("/proc/{leader}")).exists());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pid_alive(straggler, None) {
            assert!(
                std::time::Instant::now() < deadline,
                "the straggler survived"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(child); // already collected: dropping a Child neither waits nor kills
    }
}
