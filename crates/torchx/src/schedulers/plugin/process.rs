//! Running a plugin program once per operation: the request on stdin, answers read line by line
//! on a thread so that every wait has a deadline (a hung plugin is killed, never waited on).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
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
pub struct Program {
    /// The scheduler name.
    pub scheduler: String,
    /// The executable.
    pub path: PathBuf,
    /// Its arguments (none for a `torchx-scheduler-<name>` program; the host module for a
    /// Python scheduler).
    pub args: Vec<String>,
    /// The deadline of each answer.
    pub timeout: Duration,
}

impl Program {
    /// `path` serving scheduler `scheduler`, with the timeout from `TORCHX_PLUGIN_TIMEOUT`.
    pub fn new(scheduler: &str, path: &Path) -> Result<Program> {
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
        })
    }

    /// The error for `op` naming this plugin.
    pub fn fail(&self, op: &str, what: impl std::fmt::Display) -> Error {
        Error::backend(
            &self.scheduler,
            format!(
                "scheduler plugin {} failed `{op}`: {what}",
                self.path.display()
            ),
        )
    }

    /// Starts `op` with `body`.
    pub fn start(&self, op: &str, body: Value) -> Result<Call> {
        // Its own process group, so that a hung plugin is killed with whatever it started.
        let mut child = Command::new(&self.path)
            .args(&self.args)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.fail(op, format!("cannot start it: {e}")))?;
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
        let stderr = Arc::new(Mutex::new(Vec::new()));
        // Disconnects when the reader reaches the end of stderr.
        let (stderr_open, stderr_closed) = mpsc::channel::<()>();
        if let Some(err) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            let scheduler = self.scheduler.clone();
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
        }
        Ok(Call {
            program: self.clone(),
            op: op.to_string(),
            child: Some(child),
            lines,
            stderr,
            stderr_closed,
        })
    }

    /// Runs `op` and returns its `ok` value. `app_id` names the app in `not_found` errors.
    pub fn call(&self, op: &str, body: Value, app_id: Option<&str>) -> Result<Value> {
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

/// One running operation.
pub struct Call {
    program: Program,
    op: String,
    child: Option<Child>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_closed: Receiver<()>,
}

impl Call {
    /// The last lines of a dead plugin's stderr.
    fn stderr_tail(&self) -> String {
        // Read to its end first (bounded: something the plugin started may hold it open).
        let _ = self.stderr_closed.recv_timeout(Duration::from_secs(1));
        let lines = self.stderr.lock().map(|s| s.join("\n")).unwrap_or_default();
        if lines.trim().is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with:\n{lines}")
        }
    }

    /// The next message, waiting at most `timeout` (None = as long as it takes). `Ok` and
    /// `Line` are returned; an `error` message becomes an `Err`; `None` after the final answer.
    pub fn next(
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
        let Some(mut child) = self.child.take() else {
            return "gone".into();
        };
        match child.wait() {
            Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => s.to_string(),
            },
            Err(e) => e.to_string(),
        }
    }

    /// After the final answer the plugin has nothing more to say: a thread gives it a moment to
    /// exit, then stops it (detached jobs it started live in their own sessions). The caller
    /// does not wait for that.
    fn finish(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
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
}

impl Call {
    /// Stops the plugin and describes how it broke the protocol.
    pub fn protocol_error(&mut self, what: impl std::fmt::Display) -> Error {
        self.abort();
        self.program.fail(&self.op, what)
    }

    /// Kills the plugin now (it hung or broke the protocol).
    fn abort(&mut self) {
        if let Some(child) = self.child.take() {
            kill(child);
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Kills the plugin's process group and reaps the plugin.
fn kill(mut child: Child) {
    // The group this module created for the child.
    crate::sys::signal_group(child.id(), crate::sys::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}
