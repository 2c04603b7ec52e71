//! Running a scheduler's command-line tools (sbatch, bsub, ...): a timeout that kills a hung
//! command, both pipes drained on threads, and errors that say which tool is missing.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The output of a finished command.
pub(crate) struct Output {
    /// Exit status 0.
    pub ok: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// Its stdout if it succeeded, else a Backend error of `scheduler` naming the command
    /// and what it said.
    pub(crate) fn stdout_if_ok(
        self,
        scheduler: &str,
        program: &str,
        args: &[&str],
    ) -> Result<String> {
        if self.ok {
            return Ok(self.stdout);
        }
        Err(Error::backend(
            scheduler,
            format!(
                "`{program} {}` failed: {}",
                args.join(" "),
                self.stderr.trim()
            ),
        ))
    }
}

/// Runs `program args` with extra `envs`, killing it after `timeout`. `hint` follows the
/// "not installed" error (e.g. "is this a Slurm login node?").
pub(crate) fn run(
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
        .process_group(0)
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
            .with_source(e)
        })?;
    // Read both pipes on threads so a chatty command cannot block on a full pipe.
    let (tx, rx) = mpsc::channel();
    let drain = |k: usize, pipe: Option<Box<dyn Read + Send>>| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            let _ = tx.send((k, s));
        });
    };
    drain(
        0,
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    drain(
        1,
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    // The command leads its own process group: on a timeout everything it started goes too.
    let group = child.id();
    let command = || format!("`{program} {}`", args.join(" "));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                crate::sys::signal_group(group, crate::sys::SIGKILL);
                let _ = child.wait();
                return Err(Error::timeout(format!(
                    "{} did not answer within {}s ({hint})",
                    command(),
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
    // Its output ends when every process holding the pipes closed them; one it left running
    // in the background cannot hold the call past the deadline. (The group's id stays
    // reserved while that process is in it, so the kill reaches only the command's own.)
    let mut outputs = [None, None];
    while outputs.iter().any(Option::is_none) {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((k, s)) => outputs[k] = Some(s),
            Err(_) => {
                crate::sys::signal_group(group, crate::sys::SIGKILL);
                return Err(Error::timeout(format!(
                    "{} exited, but a process it left running held its output open past {}s \
                     ({hint})",
                    command(),
                    timeout.as_secs()
                )));
            }
        }
    }
    let [stdout, stderr] = outputs.map(Option::unwrap_or_default);
    Ok(Output {
        ok: status.success(),
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_exit_status() {
        let out = run(
            "t",
            "sh",
            &["-c", "echo out; echo err >&2; exit 3"],
            &[],
            Duration::from_secs(10),
            "",
        )
        .unwrap();
        assert!(!out.ok);
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str()),
            ("out\n", "err\n")
        );
    }

    /// A command that hangs, and one that exits leaving a process holding its stdout: both
    /// end at the deadline, with everything they started killed.
    #[test]
    fn the_timeout_covers_the_command_and_its_pipes() {
        for script in ["sleep 30", "sleep 30 & echo started"] {
            let begun = Instant::now();
            let err = run(
                "t",
                "sh",
                &["-c", script],
                &[],
                Duration::from_secs(1),
                "hint",
            )
            .err()
            .unwrap_or_else(|| panic!("{script}: no timeout"));
            assert_eq!(err.kind(), crate::error::ErrorKind::Timeout, "{err}");
            assert!(
                begun.elapsed() < Duration::from_secs(10),
                "{script}: {:?}",
                begun.elapsed()
            );
        }
    }

    #[test]
    fn a_missing_program_is_named() {
        let err = run(
            "t",
            "no-such-tool-xyz",
            &[],
            &[],
            Duration::from_secs(1),
            "is it installed?",
        )
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains("`no-such-tool-xyz` is not installed or not on PATH (is it installed?)"),
            "{err}"
        );
    }
}
