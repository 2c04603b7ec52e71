//! Running a plugin program: once per operation (a `torchx-scheduler-<name>` program: the
//! request on stdin, answers read line by line on a thread), or, for a Python scheduler, one
//! resident host per scheduler object that serves every operation of the command: requests and
//! answers carry an `id`, a thread routes each answer line to its call (`warm.rs` forks that
//! host from a warm interpreter where it can). Every wait has a deadline (a hung plugin is killed, never waited on).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::protocol::{self, Message};
use crate::error::{Error, Result};

/// How long an operation may take unless `TORCHX_PLUGIN_TIMEOUT` (seconds) says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Lines of a failed plugin's stderr quoted in the error.
const STDERR_TAIL: usize = 20;

/// A plugin program and the scheduler name it serves.
#[derive(Debug, Clone)]
pub(super) struct Program {
    /// The scheduler name.
    pub scheduler: String,
    /// The executable.
    pub path: PathBuf,
    /// Its arguments (none for a `torchx-scheduler-<name>` program; the host module for a
    /// Python scheduler).
    pub args: Vec<String>,
    /// The deadline of each answer.
    pub timeout: Duration,
    /// One resident process serving every operation (the Python host), started on the first;
    /// shared by the clones of this program. None: a process per operation.
    resident: Option<Arc<Mutex<Option<Arc<Session>>>>>,
    /// The Python host's plugin arguments and how long its warm host stays, when it is forked
    /// by one.
    warm: Option<(Vec<String>, Duration)>,
}

impl Program {
    /// `path` serving scheduler `scheduler`, with the timeout from `TORCHX_PLUGIN_TIMEOUT`.
    pub(super) fn new(scheduler: &str, path: &Path) -> Result<Program> {
        let timeout = match std::env::var("TORCHX_PLUGIN_TIMEOUT") {
            Ok(s) => s
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    Error::config(format!(
                        "TORCHX_PLUGIN_TIMEOUT must be a positive number of seconds, got `{s}`"
                    ))
                })?,
            Err(_) => DEFAULT_TIMEOUT,
        };
        Ok(Program {
            scheduler: scheduler.to_string(),
            path: path.to_path_buf(),
            args: Vec::new(),
            timeout,
            resident: None,
            warm: None,
        })
    }

    /// This interpreter hosting a Python scheduler (`plugin`: `<name> [<module:attr>]`): one
    /// host serves every operation (a protocol session: each request and answer carries an
    /// `id`), forked by a warm host unless `TORCHX_PLUGIN_HOST_IDLE` is 0.
    pub(super) fn python_host(mut self, plugin: Vec<String>) -> Result<Program> {
        let host = crate::python::python_main("torchx.cli._scheduler_host");
        self.warm = super::warm::idle()?.map(|idle| (plugin.clone(), idle));
        self.args = [vec!["-c".to_string(), host], plugin].concat();
        self.resident = Some(Arc::new(Mutex::new(None)));
        Ok(self)
    }

    /// The running session, started if there is none (or the last one died).
    fn session(&self, slot: &Mutex<Option<Arc<Session>>>, op: &str) -> Result<Arc<Session>> {
        let mut slot = slot
            .lock()
            .map_err(|_| self.fail(op, "its session lock was poisoned"))?;
        if let Some(session) = slot.as_ref().filter(|s| s.alive()) {
            return Ok(Arc::clone(session));
        }
        let session = Arc::new(Session::spawn(self, op)?);
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    /// The error for `op` naming this plugin.
    pub(super) fn fail(&self, op: &str, what: impl std::fmt::Display) -> Error {
        Error::backend(
            &self.scheduler,
            format!(
                "scheduler plugin {} failed `{op}`: {what}",
                self.path.display()
            ),
        )
    }

    /// The plugin's process, with piped stdio, in its own process group so that a hung plugin
    /// is killed with whatever it started.
    fn spawn(&self, op: &str) -> Result<Child> {
        Command::new(&self.path)
            .args(&self.args)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                self.fail(op, format!("cannot start it: {e}"))
                    .with_source(e)
            })
    }

    /// Starts `op` with `body`.
    pub(super) fn start(&self, op: &str, body: Value) -> Result<Call> {
        if let Some(slot) = &self.resident {
            let session = self.session(slot, op)?;
            return session.call(self, op, body);
        }
        let mut child = self.spawn(op)?;
        let request = protocol::request(op, body).to_string();
        if let Some(mut stdin) = child.stdin.take() {
            std::thread::spawn(move || {
                // A plugin that exits without reading must not kill us with SIGPIPE (the CLI
                // restores its default action): block it in this thread, where it stays pending
                // and dies with the thread.
                crate::sys::block_sigpipe();
                let _ = stdin.write_all(request.as_bytes());
                let _ = stdin.write_all(b"\n");
            });
        }
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let (stderr, stderr_closed) = match child.stderr.take() {
            Some(err) => tail_stderr(err, &self.scheduler),
            None => (Arc::default(), mpsc::channel().1),
        };
        Ok(Call {
            program: self.clone(),
            op: op.to_string(),
            child: Some(Owner::Process(child)),
            lines,
            stderr,
            stderr_closed: Arc::new(Mutex::new(stderr_closed)),
        })
    }

    /// Runs `op` and returns its `ok` value. `app_id` names the app in `not_found` errors.
    pub(super) fn call(&self, op: &str, body: Value, app_id: Option<&str>) -> Result<Value> {
        let mut call = self.start(op, body)?;
        match call.next(Some(self.timeout), app_id)? {
            Some(Message::Ok(v)) => Ok(v),
            Some(m) => Err(self.fail(
                op,
                format!("answered with {m:?}, which only `log_lines` may"),
            )),
            // `next` turns error messages into errors and a missing answer into a crash error.
            None => Err(self.fail(op, "sent no answer")),
        }
    }
}

/// What answers a call: its own process, or a call id of a resident session.
enum Owner {
    Process(Child),
    Session(Arc<Session>, u64),
}

/// One running operation.
pub(super) struct Call {
    program: Program,
    op: String,
    /// None once the final answer was given (or the call failed).
    child: Option<Owner>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_closed: Arc<Mutex<Receiver<()>>>,
}

/// A resident host: requests go to its stdin through a writer thread, answer lines are routed
/// by their `id` to the calls waiting for them.
struct Session {
    host: Mutex<Option<Host>>,
    requests: Mutex<Option<Sender<String>>>,
    routes: Arc<Mutex<HashMap<u64, Sender<String>>>>,
    next_id: AtomicU64,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_closed: Arc<Mutex<Receiver<()>>>,
}

/// A resident host's process: started by this command, or forked by a warm host.
enum Host {
    Spawned(Child),
    Forked(super::warm::Forked),
}

impl Host {
    /// How it ended, None while it runs.
    fn ended(&mut self) -> Option<String> {
        match self {
            Host::Spawned(child) => match child.try_wait() {
                Ok(Some(s)) => Some(describe_status(s)),
                Ok(None) => None,
                Err(e) => Some(e.to_string()),
            },
            Host::Forked(forked) => forked.ended(Duration::ZERO),
        }
    }

    fn kill(self) {
        match self {
            Host::Spawned(child) => kill(child),
            Host::Forked(forked) => forked.kill(),
        }
    }

    /// Gives a host whose stdin closed a moment to exit, then stops it, on a thread.
    fn exit_or_kill(self) {
        match self {
            Host::Spawned(child) => exit_or_kill(child),
            Host::Forked(forked) => {
                std::thread::spawn(move || {
                    if forked.ended(Duration::from_millis(500)).is_none() {
                        forked.kill();
                    }
                });
            }
        }
    }
}

impl Session {
    /// A host forked by the warm host, else a process of its own.
    fn spawn(program: &Program, op: &str) -> Result<Session> {
        let warm = program.warm.as_ref().and_then(|(plugin, idle)| {
            let interpreter = super::warm::Interpreter {
                path: &program.path,
                timeout: program.timeout,
            };
            super::warm::fork(&interpreter, plugin, *idle)
        });
        let (host, mut stdin, stdout, stderr) = match warm {
            Some((forked, pipes)) => (
                Host::Forked(forked),
                Box::new(pipes.stdin) as Box<dyn Write + Send>,
                Box::new(pipes.stdout) as Box<dyn Read + Send>,
                Box::new(pipes.stderr) as Box<dyn Read + Send>,
            ),
            None => {
                let mut child = program.spawn(op)?;
                let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
                let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
                    kill(child);
                    return Err(program.fail(op, "its stdio was not piped"));
                };
                (
                    Host::Spawned(child),
                    Box::new(stdin) as Box<dyn Write + Send>,
                    Box::new(stdout) as Box<dyn Read + Send>,
                    Box::new(stderr) as Box<dyn Read + Send>,
                )
            }
        };
        let (requests, pending) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // As in a one-shot call: a host that died must not kill us with SIGPIPE.
            crate::sys::block_sigpipe();
            for line in pending {
                if stdin.write_all(line.as_bytes()).is_err() || stdin.flush().is_err() {
                    break;
                }
            }
            // Dropping stdin tells the host the session is over.
        });
        let routes: Arc<Mutex<HashMap<u64, Sender<String>>>> = Arc::default();
        let answers = Arc::clone(&routes);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout)
                .lines()
                .map_while(std::result::Result::ok)
            {
                let id = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|v| v.get("id").and_then(Value::as_u64));
                let route = id.and_then(|id| answers.lock().ok()?.get(&id).cloned());
                match route {
                    Some(to) => drop(to.send(line)),
                    None => log::debug!("plugin answer for no waiting call: {line}"),
                }
            }
            // The host is gone: every waiting call sees its channel close.
            if let Ok(mut r) = answers.lock() {
                r.clear();
            }
        });
        let (stderr, stderr_closed) = tail_stderr(stderr, &program.scheduler);
        Ok(Session {
            host: Mutex::new(Some(host)),
            requests: Mutex::new(Some(requests)),
            routes,
            next_id: AtomicU64::new(1),
            stderr,
            stderr_closed: Arc::new(Mutex::new(stderr_closed)),
        })
    }

    fn alive(&self) -> bool {
        match self.host.lock() {
            Ok(mut h) => h.as_mut().is_some_and(|h| h.ended().is_none()),
            Err(_) => false,
        }
    }

    fn call(self: &Arc<Self>, program: &Program, op: &str, body: Value) -> Result<Call> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut request = protocol::request(op, body);
        request["id"] = Value::from(id);
        let (to, lines) = mpsc::channel();
        self.routes
            .lock()
            .map_err(|_| program.fail(op, "its session routes were poisoned"))?
            .insert(id, to);
        let sent = self
            .requests
            .lock()
            .ok()
            .and_then(|r| r.as_ref()?.send(format!("{request}\n")).ok());
        if sent.is_none() {
            self.forget(id);
            return Err(program.fail(op, "its session is closed"));
        }
        Ok(Call {
            program: program.clone(),
            op: op.to_string(),
            child: Some(Owner::Session(Arc::clone(self), id)),
            lines,
            stderr: Arc::clone(&self.stderr),
            stderr_closed: Arc::clone(&self.stderr_closed),
        })
    }

    fn forget(&self, id: u64) {
        if let Ok(mut r) = self.routes.lock() {
            r.remove(&id);
        }
    }

    /// How the host ended, if it did.
    fn status(&self) -> String {
        let Ok(mut host) = self.host.lock() else {
            return "gone".into();
        };
        match host.as_mut().map(Host::ended) {
            Some(Some(ended)) => ended,
            Some(None) => "still running".into(),
            None => "gone".into(),
        }
    }

    /// Kills the host and whatever it started (it hung or broke the protocol).
    fn kill(&self) {
        if let Some(host) = self.host.lock().ok().and_then(|mut h| h.take()) {
            host.kill();
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Drop for Session {
    /// The command is done with the scheduler: closing stdin ends the host, which is given a
    /// moment to exit before it is stopped.
    fn drop(&mut self) {
        if let Ok(mut r) = self.requests.lock() {
            r.take();
        }
        if let Some(host) = self.host.get_mut().ok().and_then(Option::take) {
            host.exit_or_kill();
        }
    }
}

/// Lines of a plugin's stderr (the last [`STDERR_TAIL`]), read on a thread and logged; the
/// receiver disconnects at its end.
fn tail_stderr(
    err: impl Read + Send + 'static,
    scheduler: &str,
) -> (Arc<Mutex<Vec<String>>>, Receiver<()>) {
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (stderr_open, stderr_closed) = mpsc::channel::<()>();
    let sink = Arc::clone(&stderr);
    let scheduler = scheduler.to_string();
    std::thread::spawn(move || {
        let _open = stderr_open;
        for line in BufReader::new(err)
            .lines()
            .map_while(std::result::Result::ok)
        {
            log::info!("{scheduler} plugin: {line}");
            if let Ok(mut s) = sink.lock() {
                if s.len() == STDERR_TAIL {
                    s.remove(0);
                }
                s.push(line);
            }
        }
    });
    (stderr, stderr_closed)
}

fn describe_status(s: std::process::ExitStatus) -> String {
    match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// Gives a plugin that has said everything a moment to exit, then stops it, on a thread (the
/// caller does not wait; detached jobs it started live in their own sessions).
fn exit_or_kill(mut child: Child) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        kill(child);
    });
}

impl Call {
    /// The last lines of a dead plugin's stderr.
    fn stderr_tail(&self) -> String {
        // Read to its end first (bounded: something the plugin started may hold it open).
        if let Ok(closed) = self.stderr_closed.lock() {
            let _ = closed.recv_timeout(Duration::from_secs(1));
        }
        let lines = self.stderr.lock().map(|s| s.join("\n")).unwrap_or_default();
        if lines.trim().is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with:\n{lines}")
        }
    }

    /// The next message, waiting at most `timeout` (None = as long as it takes). `Ok` and
    /// `Line` are returned; an `error` message becomes an `Err`; `None` after the final answer.
    pub(super) fn next(
        &mut self,
        timeout: Option<Duration>,
        app_id: Option<&str>,
    ) -> Result<Option<Message>> {
        // No child: the final answer was given (or the call failed).
        if self.child.is_none() {
            return Ok(None);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let received = match deadline {
                Some(d) => self
                    .lines
                    .recv_timeout(d.saturating_duration_since(Instant::now())),
                None => self
                    .lines
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
            };
            let line = match received {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    self.abort();
                    let t = timeout.unwrap_or_default().as_secs_f64();
                    return Err(self.program.fail(
                        &self.op,
                        format!(
                            "no answer within {t:.0}s, so it was killed (TORCHX_PLUGIN_TIMEOUT sets the limit){}",
                            self.stderr_tail()
                        ),
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.reap();
                    return Err(self.program.fail(
                        &self.op,
                        format!(
                            "it exited ({status}) without a final answer{}",
                            self.stderr_tail()
                        ),
                    ));
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let message = match protocol::parse_message(&line) {
                Ok(m) => m,
                Err(what) => {
                    self.abort();
                    return Err(self.program.fail(&self.op, what));
                }
            };
            match message {
                Message::Line(_) | Message::Streaming => return Ok(Some(message)),
                Message::Ok(_) => {
                    self.finish();
                    return Ok(Some(message));
                }
                Message::Error { kind, message } => {
                    self.finish();
                    return Err(protocol::to_error(
                        &self.program.scheduler,
                        app_id,
                        &kind,
                        message,
                    ));
                }
            }
        }
    }

    fn reap(&mut self) -> String {
        match self.child.take() {
            Some(Owner::Process(mut child)) => match child.wait() {
                Ok(s) => describe_status(s),
                Err(e) => e.to_string(),
            },
            Some(Owner::Session(session, id)) => {
                session.forget(id);
                session.status()
            }
            None => "gone".into(),
        }
    }

    /// The final answer came: a process has nothing more to say; a session serves on.
    fn finish(&mut self) {
        match self.child.take() {
            Some(Owner::Process(child)) => exit_or_kill(child),
            Some(Owner::Session(session, id)) => session.forget(id),
            None => {}
        }
    }
}

impl Call {
    /// Stops the plugin and describes how it broke the protocol.
    pub(super) fn protocol_error(&mut self, what: impl std::fmt::Display) -> Error {
        self.abort();
        self.program.fail(&self.op, what)
    }

    /// Kills the plugin now (it hung or broke the protocol): a resident host too, with every
    /// call it was serving.
    fn abort(&mut self) {
        match self.child.take() {
            Some(Owner::Process(child)) => kill(child),
            Some(Owner::Session(session, _)) => session.kill(),
            None => {}
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        match self.child.take() {
            Some(Owner::Process(child)) => kill(child),
            // A call given up early (a log stream no one reads any more): its answers are
            // dropped; the host serves the other calls.
            Some(Owner::Session(session, id)) => session.forget(id),
            None => {}
        }
    }
}

/// Kills the plugin's process group and reaps the plugin.
fn kill(mut child: Child) {
    // The group this module created for the child.
    crate::sys::signal_group(child.id(), crate::sys::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}
