//! One step's submission, as its holder and the process that submits it see it: what the
//! pipeline gives the step ([`StepContext`]) and what the submission did ([`Submission`]),
//! both typed. The submitting process (`torchx __pipeline-step <pipeline> <step>`, in the
//! CLI: it resolves the step's run options as `torchx run` does) runs in a process of its own
//! so that a submission in flight outlives a holder that dies; it writes its outcome to
//! `steps/<step>.json` and keeps `steps/<step>.out` locked while it lives.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{PipelineRecord, SCHEME};
use crate::error::{Error, Result};
use crate::specs::Env;

/// The hidden subcommand of `torchx` that submits one step of a pipeline.
pub const STEP_ARG: &str = "__pipeline-step";

/// What a pipeline gives one of its steps' jobs: the environment every role gets
/// (`TORCHX_PIPELINE_DIR`, `TORCHX_PIPELINE_HANDLE`, each upstream step's handle) and, on
/// local containers, the host directory mounted at its own path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepContext {
    /// Environment for every role of the step's job.
    pub env: Env,
    /// A host directory every role mounts at the same path.
    pub mount: Option<String>,
}

/// What a step's submission did, as the submitting process writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Submission {
    /// It was told to go on: from here a job may have been submitted.
    Going,
    /// It submitted the job (or group) with this handle.
    Submitted {
        /// The handle.
        handle: String,
    },
    /// It submitted nothing, for this reason.
    Failed {
        /// Why.
        error: String,
    },
}

impl PipelineRecord {
    /// The files of `step`'s submission: its outcome, and its output (locked by the submitting
    /// process while it lives, which a holder on another host can see) and errors.
    pub fn submission_paths(&self, state_dir: &Path, step: &str) -> Result<SubmissionPaths> {
        crate::specs::check_path_component("step name", step)?;
        let dir = self.dir(state_dir)?.join("steps");
        Ok(SubmissionPaths {
            outcome: dir.join(format!("{step}.json")),
            out: dir.join(format!("{step}.out")),
            err: dir.join(format!("{step}.err")),
        })
    }
}

/// See [`PipelineRecord::submission_paths`].
#[derive(Debug, Clone)]
pub struct SubmissionPaths {
    /// [`Submission`] as JSON.
    pub outcome: PathBuf,
    /// The submitting process's output, locked while it lives.
    pub out: PathBuf,
    /// The submitting process's error output.
    pub err: PathBuf,
}

impl SubmissionPaths {
    /// The outcome written so far (`None`: the process never went on).
    pub fn read(&self) -> Result<Option<Submission>> {
        let text = match std::fs::read_to_string(&self.outcome) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("reading {}", self.outcome.display()), e)),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::backend(
                SCHEME,
                format!(
                    "the submission record {} is unreadable: {e}",
                    self.outcome.display()
                ),
            )
            .with_source(e)
        })
    }

    /// Records `outcome` (atomically and durably: it decides whether the step is submitted
    /// again).
    pub fn write(&self, outcome: &Submission) -> Result<()> {
        let text = serde_json::to_vec(outcome).map_err(|e| {
            Error::backend(SCHEME, format!("cannot serialise a submission: {e}")).with_source(e)
        })?;
        crate::durable::write_record(&self.outcome, &text)
    }

    /// Forgets an earlier submission's outcome (before the step is submitted again).
    pub fn clear(&self) -> Result<()> {
        match std::fs::remove_file(&self.outcome) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("removing {}", self.outcome.display()), e))
            }
            _ => Ok(()),
        }
    }

    /// The last lines of the submitting process's error output, for a message.
    pub fn error_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.err).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submission_round_trips_and_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let paths = SubmissionPaths {
            outcome: dir.path().join("s.json"),
            out: dir.path().join("s.out"),
            err: dir.path().join("s.err"),
        };
        assert_eq!(paths.read().unwrap(), None);
        for outcome in [
            Submission::Going,
            Submission::Submitted {
                handle: "local_cwd://t/a-1".into(),
            },
            Submission::Failed { error: "no".into() },
        ] {
            paths.write(&outcome).unwrap();
            assert_eq!(paths.read().unwrap(), Some(outcome));
        }
        paths.clear().unwrap();
        paths.clear().unwrap();
        assert_eq!(paths.read().unwrap(), None);
        std::fs::write(&paths.outcome, "{").unwrap();
        assert!(paths.read().is_err());
    }
}
