//! Warm Python hosts (`torchx.cli._warm_host`): a Python scheduler plugin's interpreter, with
//! TorchX and the plugin imported, kept between commands behind a Unix socket in a private
//! per-user directory. A command connects, hands over the three pipes of a host's stdio
//! (SCM_RIGHTS) with its environment and working directory, and the warm host forks the host
//! that serves the command's session: a fork instead of Python's start-up and imports.
//!
//! The socket is named after everything the imports can depend on (this CLI's version, the
//! interpreter, the plugin, the environment less the shell's bookkeeping variables); the warm
//! host itself answers `stale` when a file it imported or a plugin directory changed. Anything
//! that goes wrong here falls back to a cold host (a warm host may only make a command faster).
//! `TORCHX_PLUGIN_HOST_IDLE` (seconds, default 600; 0 turns warm hosts off) is how long an
//! unused warm host stays.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, IoSlice, PipeReader, PipeWriter};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{Error, Result};

const DEFAULT_IDLE_SECONDS: u64 = 600;
/// Variables a shell changes between commands that no import reads.
const VOLATILE: [&str; 4] = ["_", "PWD", "OLDPWD", "SHLVL"];
/// `sun_path` holds 108 bytes on Linux (104 on macOS).
const MAX_SOCKET_PATH: usize = 100;

/// The interpreter a warm host runs: its executable and how long an answer may take (the
/// plugin program's).
pub(super) struct Interpreter<'a> {
    /// The executable.
    pub path: &'a Path,
    /// The deadline of each answer.
    pub timeout: Duration,
}

/// How long an unused warm host stays, None when warm hosts are off.
pub(super) fn idle() -> Result<Option<Duration>> {
    let Ok(s) = std::env::var("TORCHX_PLUGIN_HOST_IDLE") else {
        return Ok(Some(Duration::from_secs(DEFAULT_IDLE_SECONDS)));
    };
    let seconds = s
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| {
            Error::config(format!(
                "TORCHX_PLUGIN_HOST_IDLE must be a number of seconds (0 turns warm plugin hosts off), got `{s}`"
            ))
        })?;
    Ok((seconds > 0.0).then(|| Duration::from_secs_f64(seconds)))
}

/// A host forked by a warm host for this command.
#[derive(Debug)]
pub(super) struct Forked {
    pid: u32,
    /// The warm host's connection: it says here how the host ended.
    conn: Mutex<BufReader<UnixStream>>,
    ended: Mutex<Option<String>>,
}

/// The command's ends of a host's stdio.
pub(super) struct Pipes {
    pub stdin: PipeWriter,
    pub stdout: PipeReader,
    pub stderr: PipeReader,
}

impl Forked {
    /// How the host ended, waiting at most `wait` to hear it; None while it runs.
    pub(super) fn ended(&self, wait: Duration) -> Option<String> {
        let mut ended = self.ended.lock().ok()?;
        if ended.is_none() {
            let mut conn = self.conn.lock().ok()?;
            // A zero timeout is refused by std: a microsecond is a poll.
            let _ = conn
                .get_ref()
                .set_read_timeout(Some(wait.max(Duration::from_micros(1))));
            let mut line = String::new();
            *ended = match conn.read_line(&mut line) {
                Ok(0) => Some("gone".into()),
                Ok(_) => Some(describe_exit(&line)),
                Err(e) if is_timeout(&e) => None,
                Err(e) => Some(e.to_string()),
            };
        }
        ended.clone()
    }

    /// Kills the host and whatever it started (its own process group), if it still runs.
    pub(super) fn kill(&self) {
        if self.ended(Duration::ZERO).is_none() {
            crate::sys::signal_group(self.pid, crate::sys::SIGKILL);
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn describe_exit(line: &str) -> String {
    match serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("exit")?.as_i64())
    {
        Some(code) if code < 0 => format!("killed by signal {}", -code),
        Some(code) => format!("exit code {code}"),
        None => "gone".into(),
    }
}

/// A host for `program` forked by its warm host (started if none serves), or None: warm hosts
/// are off or unavailable, and the caller starts a cold one.
pub(super) fn fork(
    program: &Interpreter<'_>,
    plugin: &[String],
    idle: Duration,
) -> Option<(Forked, Pipes)> {
    let env = environment()?;
    let socket = socket_path(program, plugin, &env)?;
    let cwd = std::env::current_dir().ok()?;
    let hello = format!("{}\n", json!({ "env": env, "cwd": cwd }));
    for _ in 0..2 {
        let conn = match UnixStream::connect(&socket) {
            Ok(conn) => conn,
            Err(_) => {
                start(program, plugin, &socket, idle)?;
                UnixStream::connect(&socket).ok()?
            }
        };
        match handover(program, conn, &hello) {
            Ok(Some(forked)) => return Some(forked),
            // Stale: it stopped listening; the next round starts a fresh one.
            Ok(None) => continue,
            Err(e) => {
                log::debug!("warm plugin host at {}: {e}", socket.display());
                return None;
            }
        }
    }
    None
}

/// Every variable, if all are Unicode (else no warm host: the hello is JSON).
fn environment() -> Option<Vec<(String, String)>> {
    std::env::vars_os()
        .map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn socket_path(
    program: &Interpreter<'_>,
    plugin: &[String],
    env: &[(String, String)],
) -> Option<PathBuf> {
    let mut hasher = DefaultHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    program.path.hash(&mut hasher);
    plugin.hash(&mut hasher);
    let mut kept: Vec<_> = env
        .iter()
        .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
        .collect();
    kept.sort();
    kept.hash(&mut hasher);
    let path = private_dir()?.join(format!("host-{:016x}.sock", hasher.finish()));
    (path.as_os_str().len() <= MAX_SOCKET_PATH).then_some(path)
}

/// `$XDG_RUNTIME_DIR/torchx`, else `<tmp>/torchx-<uid>`: created 0700, and used only if it is
/// a directory of ours that no one else can enter (others could otherwise serve our commands).
fn private_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(runtime) if runtime.is_absolute() => runtime.join("torchx"),
        _ => std::env::temp_dir().join(format!("torchx-{}", crate::sys::uid())),
    };
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == crate::sys::uid() && meta.mode() & 0o077 == 0).then_some(dir)
}

/// Starts a warm host on `socket` and waits until it listens.
fn start(
    program: &Interpreter<'_>,
    plugin: &[String],
    socket: &Path,
    idle: Duration,
) -> Option<()> {
    let mut child = Command::new(program.path)
        .arg("-c")
        .arg(crate::python::python_main("torchx.cli._warm_host"))
        .arg(socket)
        .arg(idle.as_secs_f64().to_string())
        .args(plugin)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let out = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let said = rx.recv_timeout(program.timeout).unwrap_or_default();
    if said.trim() == "ready" {
        return Some(());
    }
    log::debug!("no warm plugin host: it said `{}`", said.trim());
    // It made itself a session leader: its group is its pid.
    crate::sys::signal_group(child.id(), crate::sys::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Hands the stdio of a new host to the warm host on `conn`: the forked host, or None if the
/// warm host is stale.
fn handover(
    program: &Interpreter<'_>,
    conn: UnixStream,
    hello: &str,
) -> std::io::Result<Option<(Forked, Pipes)>> {
    let (stdin_r, stdin) = std::io::pipe()?;
    let (stdout, stdout_w) = std::io::pipe()?;
    let (stderr, stderr_w) = std::io::pipe()?;
    send_with_fds(
        &conn,
        hello.as_bytes(),
        &[stdin_r.as_fd(), stdout_w.as_fd(), stderr_w.as_fd()],
    )?;
    // The host holds its ends now: ours must close for end-of-file to reach either side.
    drop((stdin_r, stdout_w, stderr_w));
    conn.set_read_timeout(Some(program.timeout))?;
    let mut conn = BufReader::new(conn);
    let mut line = String::new();
    conn.read_line(&mut line)?;
    let answer: Value = serde_json::from_str(&line)
        .map_err(|e| std::io::Error::other(format!("answered `{}`: {e}", line.trim())))?;
    if answer.get("stale").and_then(Value::as_bool) == Some(true) {
        return Ok(None);
    }
    let pid = answer
        .get("pid")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 1)
        .ok_or_else(|| std::io::Error::other(format!("answered `{}`", line.trim())))?;
    let forked = Forked {
        pid,
        conn: Mutex::new(conn),
        ended: Mutex::new(None),
    };
    Ok(Some((
        forked,
        Pipes {
            stdin,
            stdout,
            stderr,
        },
    )))
}

/// Writes `bytes` to `conn` with `fds` attached to the first of them.
fn send_with_fds(
    conn: &UnixStream,
    bytes: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>; 3],
) -> std::io::Result<()> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("no room for the descriptors"));
    }
    // A warm host that died must not kill the command with SIGPIPE: MSG_NOSIGNAL where it
    // exists, else (macOS) the socket's SO_NOSIGPIPE.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = SendFlags::NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = {
        rustix::net::sockopt::set_socket_nosigpipe(conn, true)?;
        SendFlags::empty()
    };
    let mut sent = sendmsg(conn, &[IoSlice::new(bytes)], &mut control, flags)?;
    while sent < bytes.len() {
        match rustix::net::send(conn, &bytes[sent..], flags)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => sent += n,
        }
    }
    Ok(())
}
