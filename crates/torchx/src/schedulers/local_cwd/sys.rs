//! Thin wrappers over the few POSIX calls std does not offer. The only module allowed `unsafe`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub use libc::{SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGTERM};

/// True when a process with this pid exists, is not a zombie and (if given) started at `start`
/// ticks, which guards against pid reuse.
pub fn pid_alive(pid: u32, start: Option<u64>) -> bool {
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
    match stat_fields(pid) {
        Some(f) => {
            let zombie = f.first().map(String::as_str) == Some("Z");
            let same = match (start, f.get(19).and_then(|s| s.parse::<u64>().ok())) {
                (Some(want), Some(got)) => want == got,
                _ => true,
            };
            same && !zombie
        }
        None => false,
    }
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The process start time in clock ticks since boot (field 22 of /proc/pid/stat).
pub fn proc_start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Sends `sig` to the process group `pgid`; false if there is no such group.
pub fn signal_group(pgid: u32, sig: i32) -> bool {
    match i32::try_from(pgid) {
        // SAFETY: plain kill(2) on a negative pid (a process group); no memory is touched.
        Ok(p) if p > 1 => unsafe { libc::kill(-p, sig) == 0 },
        _ => false,
    }
}

/// Sends `sig` to one process.
pub fn signal_pid(pid: u32, sig: i32) -> bool {
    match i32::try_from(pid) {
        // SAFETY: plain kill(2); no memory is touched.
        Ok(p) if p > 1 => unsafe { libc::kill(p, sig) == 0 },
        _ => false,
    }
}

/// The real user id.
pub fn uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// Detaches the calling process from its terminal and process group (a new session).
pub fn setsid() {
    // SAFETY: setsid touches no memory; failing (already a group leader) is harmless.
    unsafe {
        libc::setsid();
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Reaps one exited child without blocking.
pub fn reap_any() -> Option<(u32, Exit)> {
    let mut status = 0;
    // SAFETY: waitpid writes only to `status`.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid <= 0 {
        return None;
    }
    let exit = if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        // Stopped/continued are not reported without WUNTRACED/WCONTINUED.
        Exit::Code(-1)
    };
    Some((pid as u32, exit))
}

/// Puts a file descriptor in non-blocking mode.
pub fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
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

/// Signals delivered through a file descriptor instead of handlers.
pub struct SignalFd(OwnedFd);

impl SignalFd {
    /// Blocks `signals` for this (single-threaded) process and returns a descriptor to read them.
    /// SIGPIPE is blocked too (with its default action restored, which replicas inherit), so a
    /// write to a closed pipe fails with EPIPE instead of killing us.
    pub fn new(signals: &[i32]) -> io::Result<SignalFd> {
        // SAFETY: the sigset is initialised by sigemptyset before use; signalfd returns a new
        // descriptor that we own.
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
            let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(SignalFd(OwnedFd::from_raw_fd(fd)))
        }
    }

    /// The pending signals (drained).
    pub fn read(&self) -> Vec<i32> {
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

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable (or hung up), or the timeout passes. Returns, per fd,
/// whether it is ready.
pub fn poll_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
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

/// A command line ready for `execve`, built before forking so that the child only makes
/// async-signal-safe calls.
pub struct ExecPlan {
    path: std::ffi::CString,
    argv: Vec<std::ffi::CString>,
    envp: Vec<std::ffi::CString>,
    cwd: std::ffi::CString,
}

impl ExecPlan {
    /// `path` is the program as execve takes it (already searched in PATH; relative paths
    /// resolve against `cwd`). Fails on a NUL byte in any string.
    pub fn new(
        path: &std::ffi::OsStr,
        argv: &[&std::ffi::OsStr],
        env: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
        cwd: &std::path::Path,
    ) -> io::Result<ExecPlan> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let c = |b: Vec<u8>| {
            std::ffi::CString::new(b).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a NUL byte in the command or its environment",
                )
            })
        };
        Ok(ExecPlan {
            path: c(path.as_bytes().to_vec())?,
            argv: argv
                .iter()
                .map(|a| c(a.as_bytes().to_vec()))
                .collect::<io::Result<_>>()?,
            envp: env
                .into_iter()
                .map(|(k, v)| {
                    let mut kv = k.into_vec();
                    kv.push(b'=');
                    kv.extend(v.into_vec());
                    c(kv)
                })
                .collect::<io::Result<_>>()?,
            cwd: c(cwd.as_os_str().as_bytes().to_vec())?,
        })
    }
}

/// A child started by [`spawn`] that is on its way to `execve`. It owns what the child reads
/// until then (the command line and the child's stack).
pub struct Launch {
    pub pid: u32,
    exec_error: OwnedFd,
    _child_memory: Box<ChildMemory>,
}

/// Everything the child touches before it execs, prepared by the parent.
struct ChildMemory {
    _plan: ExecPlan,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    path: *const libc::c_char,
    cwd: *const libc::c_char,
    fds: [RawFd; 3],
    exec_error: RawFd,
    stack: Vec<u8>,
}

// Enough for child_main's few frames; pages are only touched as the child uses them.
const CHILD_STACK: usize = 32 * 1024;

/// Starts `plan` as a child in its own process group, in `plan.cwd`, with `stdin`, `stdout`,
/// `stderr` as fds 0-2 and default signal handling. The three descriptors must be close-on-exec
/// (as every descriptor std opens is).
///
/// Why not std's Command (posix_spawn) or fork: posix_spawn's vfork blocks the caller until
/// the child has exec'd, and fork copies the caller's page tables; both made launching 200
/// replicas take 0.5-0.6 ms each in the supervisor. A `clone(CLONE_VM)` child shares our memory
/// without stopping us (like vfork, minus the wait), so the replicas' execs overlap; the
/// memory it reads lives in the returned [`Launch`] until [`Launch::finish`] has seen the exec.
pub fn spawn(plan: ExecPlan, stdin: RawFd, stdout: RawFd, stderr: RawFd) -> io::Result<Launch> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by pipe2 and are owned nowhere else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = plan.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut memory = Box::new(ChildMemory {
        path: plan.path.as_ptr(),
        cwd: plan.cwd.as_ptr(),
        _plan: plan,
        argv,
        envp,
        fds: [stdin, stdout, stderr],
        exec_error: write_end.as_raw_fd(),
        stack: Vec::with_capacity(CHILD_STACK),
    });
    // The stack grows down from its (16-byte aligned) end.
    let top = memory.stack.as_mut_ptr() as usize + CHILD_STACK;
    let top = (top & !15) as *mut libc::c_void;
    let arg = std::ptr::addr_of_mut!(*memory).cast::<libc::c_void>();
    // SAFETY: the child runs `child_main` on its own stack and only reads `memory`, which the
    // returned Launch keeps alive and unchanged until the child has exec'd or exited; without
    // CLONE_FILES it gets its own copy of our descriptor table.
    let pid = unsafe { libc::clone(child_main, top, libc::CLONE_VM | libc::SIGCHLD, arg) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    drop(write_end);
    Ok(Launch {
        pid: pid as u32,
        exec_error: read_end,
        _child_memory: memory,
    })
}

/// The child between clone and execve: it shares our memory (including the thread's `errno`),
/// so it makes raw system calls only, on memory prepared by the parent; no allocation, no
/// unwinding, no libc wrappers that might write `errno`.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the ChildMemory that `spawn`'s Launch keeps alive; see `spawn`.
    unsafe {
        let m = &*arg.cast::<ChildMemory>();
        let empty: u64 = 0; // the kernel's sigset_t
        let mut ret = raw::call4(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as usize,
            &empty as *const u64 as usize,
            0,
            8,
        );
        if ret >= 0 {
            ret = raw::call4(libc::SYS_setpgid, 0, 0, 0, 0);
        }
        if ret >= 0 {
            ret = raw::call4(libc::SYS_chdir, m.cwd as usize, 0, 0, 0);
        }
        for (target, &fd) in m.fds.iter().enumerate() {
            if ret >= 0 {
                // dup3 onto itself is an error; clearing close-on-exec does the same job.
                ret = if fd as usize == target {
                    raw::call4(libc::SYS_fcntl, fd as usize, libc::F_SETFD as usize, 0, 0)
                } else {
                    raw::call4(libc::SYS_dup3, fd as usize, target, 0, 0)
                };
            }
        }
        if ret >= 0 {
            ret = raw::call4(
                libc::SYS_execve,
                m.path as usize,
                m.argv.as_ptr() as usize,
                m.envp.as_ptr() as usize,
                0,
            );
        }
        let errno = (-ret) as i32;
        let bytes = errno.to_ne_bytes();
        raw::call4(
            libc::SYS_write,
            m.exec_error as usize,
            bytes.as_ptr() as usize,
            4,
            0,
        );
        raw::call4(libc::SYS_exit_group, 127, 0, 0, 0);
        127
    }
}

/// System calls without libc: the result, or minus the error number.
mod raw {
    #[cfg(target_arch = "x86_64")]
    pub unsafe fn call4(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the caller passes a valid system call and arguments.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d,
                lateout("rcx") _, lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(target_arch = "aarch64")]
    pub unsafe fn call4(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the caller passes a valid system call and arguments.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") n,
                inlateout("x0") a as isize => ret,
                in("x1") b, in("x2") c, in("x3") d,
                options(nostack),
            );
        }
        ret
    }
}

impl Launch {
    /// Waits for the child to exec (or fail to): Ok once it runs the program, the exec's error
    /// otherwise (the child then exits 127).
    pub fn finish(self) -> io::Result<u32> {
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: reading into the unfilled tail of a local buffer.
            let n = unsafe {
                libc::read(
                    self.exec_error.as_raw_fd(),
                    buf[got..].as_mut_ptr().cast(),
                    buf.len() - got,
                )
            };
            if n == 0 {
                break;
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            got += n as usize;
        }
        match got {
            0 => Ok(self.pid),
            4 => Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf))),
            _ => Err(io::Error::other("the child failed before exec")),
        }
    }
}
