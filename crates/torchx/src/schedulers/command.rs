//! Running a scheduler's command-line tools (sbatch, bsub, ...): a timeout that kills a hung
//! command, both pipes drained on threads, and errors that say which tool is missing.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The output of a finished command.
pub struct Output {
    /// Exit status 0.
    pub ok: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `program args` with extra `envs`, killing it after `timeout`. `hint` follows the
/// "not installed" error (e.g. "is this a Slurm login node?").
pub fn run(
    scheduler: &str,
    program: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    timeout: Duration,
    hint: &str,
) -> Result<Output> {
    let mut child = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::backend(
                scheduler,
                match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("`{program}` is not installed or not on PATH ({hint})")
                    }
                    _ => format!("cannot run `{program}`: {e}"),
                },
            )
        })?;
    // Read both pipes on threads so a chatty command cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out_reader = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_reader = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout(format!(
                    "`{program} {}` did not answer within {}s ({hint})",
                    args.join(" "),
                    timeout.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                return Err(Error::backend(
                    scheduler,
                    format!("waiting for `{program}`: {e}"),
                ))
            }
        }
    };
    Ok(Output {
        ok: status.success(),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}
