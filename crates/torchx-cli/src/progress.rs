//! Progress of a long wait on stderr: on a terminal one live line, redrawn in place; on a pipe
//! (a log, CI) a plain line whenever what it says changes, so a log keeps every step without
//! a line per poll.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use torchx::specs::AppState;

/// The progress of a group's tasks (an array, a sweep) or a pipeline's steps.
pub struct GroupProgress {
    handle: String,
    /// What its parts are called: "tasks", "steps".
    parts: &'static str,
    started: Instant,
    live: bool,
    /// What the last line said (without times), to print a pipe's lines on change only.
    last: Option<String>,
}

impl GroupProgress {
    /// Progress of the group (or pipeline) `handle` made of `parts` ("tasks", "steps"), on
    /// stderr.
    pub fn new(handle: &str, parts: &'static str) -> GroupProgress {
        GroupProgress {
            handle: handle.to_string(),
            parts,
            started: Instant::now(),
            live: std::io::stderr().is_terminal(),
            last: None,
        }
    }

    /// Shows the tasks' states: counts per state, time so far and, once some finished, an
    /// estimate of the time left at the pace so far.
    pub fn update(&mut self, states: &[AppState]) {
        let done = states.iter().filter(|s| s.is_terminal()).count();
        let counts: Vec<String> = torchx::group::counts(states)
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect();
        let what = format!(
            "{}: {done}/{} {} done ({})",
            self.handle,
            states.len(),
            self.parts,
            counts.join(", ")
        );
        let elapsed = self.started.elapsed();
        let mut times = format!("{} elapsed", duration(elapsed));
        if done > 0 && done < states.len() {
            let left = elapsed.mul_f64((states.len() - done) as f64 / done as f64);
            times.push_str(&format!(", about {} left", duration(left)));
        }
        let mut err = std::io::stderr().lock();
        if self.live {
            let _ = write!(err, "\r\x1b[2K{what} | {times}");
            let _ = err.flush();
        } else if self.last.as_deref() != Some(what.as_str()) {
            let _ = writeln!(err, "{what} | {times}");
        }
        self.last = Some(what);
    }

    /// Ends the live line, so what follows starts on a line of its own.
    pub fn finish(&mut self) {
        if self.live && self.last.is_some() {
            eprintln!();
        }
    }

    /// How long it has been since the wait started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// How long `d` is, as `list` shows durations.
pub fn duration(d: Duration) -> String {
    crate::output::duration(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(Duration::from_millis(4200)), "4.2s");
        assert_eq!(duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(duration(Duration::from_secs(3720)), "1h02m");
    }
}
