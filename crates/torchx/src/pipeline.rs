//! Pipelines: the steps of a pipeline file ([`PipelineSpec`]) run on their own
//! schedulers, each once the steps it runs after have ended as it requires. What was
//! submitted is recorded in `$TORCHX_STATE_DIR/pipelines/<id>/record.json`; a pipeline's
//! handle is `pipeline://<session>/<id>`.
//!
//! A small detached process, the pipeline's *holder* (`torchx __pipeline <handle>`, in the
//! CLI), submits the steps: it alone writes the record, under an exclusive lock on
//! `holder.lock` that it keeps while it lives. Each submission is recorded before it is made
//! and its outcome after, so a holder that dies (even by SIGKILL) is replaced by the next
//! command that reads the pipeline ([`PipelineRecord::needs_holder`]) without any step being
//! submitted twice. Queries only read; cancel marks the pipeline (`cancel`) and cancels what
//! was submitted.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::group::Submitter;
pub use crate::specs::pipeline::{
    is_pipeline, step_verdict, upstream_env_var, PipelineSpec, Step, StepDependency,
};
use crate::specs::{AppState, AppStatus, Verdict};

/// The scheme of pipeline handles.
pub const SCHEME: &str = "pipeline";

/// Whether `handle` names a pipeline (`pipeline://session/id`).
pub fn is_pipeline_handle(handle: &str) -> bool {
    handle
        .strip_prefix(SCHEME)
        .is_some_and(|rest| rest.starts_with("://"))
}

/// Why a step that a cancel stopped before its submission did not run.
pub const CANCELLED_BEFORE_START: &str = "the pipeline was cancelled before it started";

/// Where a step is in its life, as the holder recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for the steps it runs after.
    Waiting,
    /// A `torchx run` is submitting it; `go` once that process was told to go on.
    Submitting {
        /// The submitting process.
        submitter: Submitter,
    },
    /// Submitted as `handle`.
    Submitted {
        /// The job's (or group's) handle.
        handle: String,
    },
    /// Succeeded in the pipeline this one reruns; not run again.
    Reused {
        /// The job's handle there.
        handle: String,
    },
    /// Never started, and never will: why.
    NotRun {
        /// Why.
        why: String,
        /// Because of a job outside the pipeline (which then did not do what it had to).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        outside: bool,
    },
    /// Its submission failed: the error.
    SubmitFailed {
        /// What `torchx run` said.
        error: String,
    },
}

impl Phase {
    /// The step's job, if it has one.
    pub fn handle(&self) -> Option<&str> {
        match self {
            Phase::Submitted { handle } | Phase::Reused { handle } => Some(handle),
            _ => None,
        }
    }
}

/// One step as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Its name.
    pub name: String,
    /// The scheduler it runs on.
    pub scheduler: String,
    /// The steps it runs after.
    pub after: Vec<StepDependency>,
    /// The `torchx run` arguments that submit it.
    pub run_args: Vec<String>,
    /// Where its containers see `TORCHX_PIPELINE_DIR`, if not at the host's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_dir: Option<String>,
    /// `run -s auto:... --failover_after`: where it goes next if it is still pending then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<Failover>,
    /// Where it is.
    #[serde(flatten)]
    pub phase: Phase,
}

impl StepRecord {
    /// Whether only a holder can move it on: waiting, being submitted, or submitted with a
    /// failover left that has not started yet.
    pub fn is_open(&self) -> bool {
        match &self.phase {
            Phase::Waiting | Phase::Submitting { .. } => true,
            Phase::Submitted { .. } => self.failover.as_ref().is_some_and(|f| !f.next.is_empty()),
            _ => false,
        }
    }
}

/// A job that moves to the next scheduler whose plan was ok when it has not started within
/// `after_secs` of its submission (`torchx run -s auto:S1,S2 --failover_after 10m`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failover {
    /// How long a submission may stay pending.
    pub after_secs: u64,
    /// The schedulers still to try, in order: (scheduler, its `torchx run` arguments).
    pub next: Vec<(String, Vec<String>)>,
    /// When the current submission was made (seconds since the epoch).
    #[serde(default)]
    pub submitted_at: f64,
    /// The handles it left, cancelled while pending, in order.
    #[serde(default)]
    pub moved_from: Vec<String>,
    /// The job the holder asked to cancel to move it, until the cancel is confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelling: Option<String>,
}

/// A pipeline as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineRecord {
    /// `<name>-<unique>`.
    pub id: String,
    /// The session of its handle.
    pub session: String,
    /// Its name.
    pub name: String,
    /// When it was submitted (seconds since the epoch).
    pub created: f64,
    /// The directory its steps are submitted from.
    pub cwd: String,
    /// Its steps, each after those it depends on.
    pub steps: Vec<StepRecord>,
    /// Its holder, while one is at work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Submitter>,
    /// The pipeline this one reruns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A job held for `--after` dependencies its scheduler cannot hold (its one step gets no
    /// pipeline environment).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_job: bool,
}

/// A step's state now, and why where it says something.
#[derive(Debug, Clone, PartialEq)]
pub struct StepState {
    /// The step.
    pub name: String,
    /// Its scheduler.
    pub scheduler: String,
    /// Its state.
    pub state: AppState,
    /// Its job's handle.
    pub handle: Option<String>,
    /// Why it waits, why it did not run, or its job's status message.
    pub msg: String,
}

/// The pipelines directory of a state directory.
pub fn pipelines_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pipelines")
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl PipelineRecord {
    /// A new record of `spec`'s steps, all waiting (the steps ordered, each after those it
    /// depends on).
    pub fn new(
        spec: &crate::specs::pipeline::PipelineSpec,
        session: &str,
        default_scheduler: &str,
        cwd: &Path,
    ) -> PipelineRecord {
        let steps = spec
            .ordered()
            .into_iter()
            .map(|s| StepRecord {
                name: s.name.clone(),
                scheduler: s
                    .scheduler
                    .clone()
                    .unwrap_or_else(|| default_scheduler.to_string()),
                after: s.after.clone(),
                run_args: s.run_args.clone(),
                pipeline_dir: s.pipeline_dir.clone(),
                failover: None,
                phase: Phase::Waiting,
            })
            .collect();
        PipelineRecord {
            id: format!("{}-{}", spec.name, crate::scheduler::random_id()),
            session: session.to_string(),
            name: spec.name.clone(),
            created: now(),
            cwd: cwd.display().to_string(),
            steps,
            holder: None,
            parent: None,
            held_job: false,
        }
    }

    /// Its handle.
    pub fn handle(&self) -> String {
        crate::specs::make_app_handle(SCHEME, &self.session, &self.id)
    }

    /// Its directory.
    pub fn dir(&self, state_dir: &Path) -> Result<PathBuf> {
        crate::specs::check_path_component("pipeline id", &self.id)?;
        Ok(pipelines_dir(state_dir).join(&self.id))
    }

    /// `TORCHX_PIPELINE_DIR` on this machine: the directory its steps share.
    pub fn shared_dir(&self, state_dir: &Path) -> Result<PathBuf> {
        Ok(self.dir(state_dir)?.join("shared"))
    }

    /// Where `step`'s submission writes its output (`out`) and errors (`err`).
    pub fn submission_file(&self, state_dir: &Path, step: &str, ext: &str) -> Result<PathBuf> {
        crate::specs::check_path_component("step name", step)?;
        Ok(self
            .dir(state_dir)?
            .join("steps")
            .join(format!("{step}.{ext}")))
    }

    /// Writes the record (atomically: a reader never sees half of it), creating its
    /// directories.
    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let dir = self.dir(state_dir)?;
        for d in [dir.clone(), dir.join("steps"), dir.join("shared")] {
            crate::schedulers::create_private_dir(&d)?;
        }
        let path = dir.join("record.json");
        let tmp = dir.join("record.json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| {
            Error::backend(SCHEME, format!("cannot serialise the pipeline: {e}")).with_source(e)
        })?;
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| Error::io(format!("writing the pipeline record {}", path.display()), e))
    }

    /// The pipeline `id`, if recorded.
    pub fn load(state_dir: &Path, id: &str) -> Result<Option<PipelineRecord>> {
        crate::specs::check_path_component("pipeline id", id)?;
        let path = pipelines_dir(state_dir).join(id).join("record.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::io(
                    format!("reading the pipeline record {}", path.display()),
                    e,
                ))
            }
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::backend(
                SCHEME,
                format!("the pipeline record {} is unreadable: {e}", path.display()),
            )
            .with_source(e)
        })
    }

    /// The pipeline a handle names: `None` for any other handle, NotFound for a pipeline with
    /// no record here.
    pub fn find(handle: &str) -> Result<Option<PipelineRecord>> {
        if !is_pipeline_handle(handle) {
            return Ok(None);
        }
        let h = crate::specs::parse_app_handle(handle)?;
        let state_dir = crate::schedulers::default_state_dir();
        match PipelineRecord::load(&state_dir, h.app_id())? {
            Some(p) => Ok(Some(p)),
            None => Err(Error::not_found(
                "pipeline",
                handle,
                " (no record of it in this machine's torchx state directory)",
            )),
        }
    }

    /// Every recorded pipeline, newest first.
    pub fn list(state_dir: &Path) -> Vec<PipelineRecord> {
        let mut all: Vec<PipelineRecord> = std::fs::read_dir(pipelines_dir(state_dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("record.json")).ok())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect();
        all.sort_by(|a, b| b.created.total_cmp(&a.created));
        all
    }

    /// Whether a cancel was asked for.
    pub fn cancel_requested(&self, state_dir: &Path) -> bool {
        self.dir(state_dir).is_ok_and(|d| d.join("cancel").exists())
    }

    /// Whether steps are left that only a holder can move on ([`StepRecord::is_open`]) and no
    /// holder is at work: the next command that reads the pipeline starts one.
    pub fn needs_holder(&self) -> bool {
        let open = self.steps.iter().any(StepRecord::is_open);
        open && !self.holder.is_some_and(|h| h.alive())
    }
}

/// The holder's exclusive lock on a pipeline, held while the file is open. `None` when
/// another process holds it.
pub fn try_lock_holder(state_dir: &Path, record: &PipelineRecord) -> Result<Option<File>> {
    let dir = record.dir(state_dir)?;
    crate::schedulers::create_private_dir(&dir)?;
    let path = dir.join("holder.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::io(format!("locking {}", path.display()), e))
        }
    }
}

/// Each step's state from its phase and, for submitted steps, `job` (their job's status;
/// `None`: unknown to its scheduler). A waiting step says which step it waits for; a step that
/// can no longer run is CANCELLED (what the holder records as it sees it).
pub fn step_states(
    record: &PipelineRecord,
    job: impl Fn(&str) -> Option<AppStatus>,
) -> Vec<StepState> {
    let mut out: Vec<StepState> = Vec::with_capacity(record.steps.len());
    for step in &record.steps {
        let (state, msg) = match &step.phase {
            Phase::Waiting => {
                let upstream = |name: &str| {
                    let state = if name.contains("://") {
                        job(name).map(|s| s.state)
                    } else {
                        out.iter().find(|s| s.name == name).map(|s| s.state)
                    };
                    state.filter(|s| s.is_terminal())
                };
                match step_verdict(&step.after, upstream) {
                    (Verdict::Waiting, Some(dep)) => (
                        AppState::Pending,
                        format!(
                            "waiting for {} to be {}",
                            step_or_job(&dep.step),
                            dep.condition.wanted()
                        ),
                    ),
                    (Verdict::Impossible, Some(dep)) if dep.is_external() => (
                        AppState::Cancelled,
                        not_run_after(dep, job(&dep.step).map_or(AppState::Unknown, |s| s.state)),
                    ),
                    (Verdict::Impossible, Some(dep)) => {
                        (AppState::Cancelled, not_run_because(dep, &out))
                    }
                    _ => (AppState::Pending, "about to be submitted".to_string()),
                }
            }
            Phase::Submitting { .. } => (AppState::Submitted, "being submitted".to_string()),
            Phase::Submitted { handle } => match job(handle) {
                Some(s) => match step.failover.as_ref().filter(|f| !f.moved_from.is_empty()) {
                    Some(f) => (
                        s.state,
                        format!(
                            "moved here after {}s pending on {}{}",
                            f.after_secs,
                            f.moved_from.join(", then "),
                            if s.msg.is_empty() {
                                String::new()
                            } else {
                                format!("; {}", s.msg)
                            }
                        ),
                    ),
                    None => (s.state, s.msg),
                },
                None => (
                    AppState::Unknown,
                    format!("{handle}: its scheduler no longer knows it"),
                ),
            },
            Phase::Reused { handle } => (
                AppState::Succeeded,
                format!(
                    "succeeded as {handle} in {}",
                    record.parent.as_deref().unwrap_or("an earlier run")
                ),
            ),
            Phase::NotRun { why, .. } => (AppState::Cancelled, why.clone()),
            Phase::SubmitFailed { error } => (AppState::Failed, error.clone()),
        };
        out.push(StepState {
            name: step.name.clone(),
            scheduler: step.scheduler.clone(),
            state,
            handle: step.phase.handle().map(String::from),
            msg,
        });
    }
    out
}

/// Why a step will not run: the dependency that cannot be met, and how its step ended.
pub fn not_run_because(dep: &StepDependency, upstream: &[StepState]) -> String {
    let ended = upstream
        .iter()
        .find(|s| s.name == dep.step)
        .map_or(AppState::Unknown, |s| s.state);
    not_run_after(dep, ended)
}

/// Why a step will not run: `dep` ended `ended`.
pub fn not_run_after(dep: &StepDependency, ended: AppState) -> String {
    format!(
        "not started: {} ended {ended}, it runs after it is {}",
        step_or_job(&dep.step),
        dep.condition.wanted()
    )
}

fn step_or_job(name: &str) -> String {
    if name.contains("://") {
        name.to_string()
    } else {
        format!("step {name}")
    }
}

/// The pipeline's state from its steps': while any step is not over, RUNNING once one has
/// started (PENDING before); then FAILED if a step failed (or could not be submitted),
/// CANCELLED if one was cancelled once submitted or the pipeline was, else SUCCEEDED (a step
/// that did not run because its condition was not met does not count against it).
pub fn pipeline_state(record: &PipelineRecord, steps: &[StepState], cancelled: bool) -> AppState {
    if steps.iter().any(|s| !s.state.is_terminal()) {
        let started = steps
            .iter()
            .any(|s| s.state == AppState::Running || (s.state.is_terminal() && s.handle.is_some()));
        return if started {
            AppState::Running
        } else {
            AppState::Pending
        };
    }
    let submitted_cancelled = record.steps.iter().zip(steps).any(|(r, s)| {
        (r.phase.handle().is_some() && s.state == AppState::Cancelled)
            || matches!(r.phase, Phase::NotRun { outside: true, .. })
    });
    if steps.iter().any(|s| s.state == AppState::Failed) {
        AppState::Failed
    } else if cancelled || submitted_cancelled {
        AppState::Cancelled
    } else {
        AppState::Succeeded
    }
}

/// How long `cancel` waits for a pipeline's holder to stop.
pub(crate) const HOLDER_STOP: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::pipeline::PipelineSpec;

    fn record(text: &str) -> PipelineRecord {
        let spec = PipelineSpec::parse(text).unwrap();
        PipelineRecord::new(&spec, "torchx", "local_cwd", Path::new("/tmp"))
    }

    const DIAMOND: &str = "name: d\nsteps:\n  - {name: a, component: x}\n  \
        - {name: b, component: x, after: [a]}\n  - {name: c, component: x, after: ['a:notok']}\n";

    fn submitted(r: &mut PipelineRecord, step: usize) {
        r.steps[step].phase = Phase::Submitted {
            handle: format!("local_cwd://torchx/{}", r.steps[step].name),
        };
    }

    #[test]
    fn states_of_steps_and_pipeline() {
        let mut r = record(DIAMOND);
        assert!(r.handle().starts_with("pipeline://torchx/d-"));
        assert!(is_pipeline_handle(&r.handle()));
        for other in [
            "slurm://torchx/1",
            "pipelines://torchx/1",
            "pipeline:/x",
            "~g",
        ] {
            assert!(!is_pipeline_handle(other), "{other}");
        }
        let states = step_states(&r, |_| None);
        assert_eq!(states[1].msg, "waiting for step a to be SUCCEEDED");
        assert_eq!(pipeline_state(&r, &states, false), AppState::Pending);

        submitted(&mut r, 0);
        let running = |s: AppState| move |_: &str| Some(AppStatus::new(s));
        let states = step_states(&r, running(AppState::Running));
        assert_eq!(pipeline_state(&r, &states, false), AppState::Running);

        // a succeeded: b may go, c never will (and does not count against the pipeline).
        let states = step_states(&r, running(AppState::Succeeded));
        assert_eq!(states[1].msg, "about to be submitted");
        assert_eq!(states[2].state, AppState::Cancelled);
        assert!(
            states[2].msg.contains("step a ended SUCCEEDED"),
            "{}",
            states[2].msg
        );
        submitted(&mut r, 1);
        r.steps[2].phase = Phase::NotRun {
            why: states[2].msg.clone(),
            outside: false,
        };
        let states = step_states(&r, running(AppState::Succeeded));
        assert_eq!(pipeline_state(&r, &states, false), AppState::Succeeded);
        assert_eq!(pipeline_state(&r, &states, true), AppState::Cancelled);

        let states = step_states(&r, running(AppState::Failed));
        assert_eq!(pipeline_state(&r, &states, false), AppState::Failed);
        r.steps[1].phase = Phase::SubmitFailed {
            error: "no such partition".into(),
        };
        let states = step_states(&r, |_| Some(AppStatus::new(AppState::Succeeded)));
        assert_eq!(pipeline_state(&r, &states, false), AppState::Failed);
    }

    #[test]
    fn records_round_trip_and_need_a_holder_while_steps_wait() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = record(DIAMOND);
        r.created = 1.5;
        assert!(r.needs_holder());
        r.save(dir.path()).unwrap();
        assert!(r.shared_dir(dir.path()).unwrap().is_dir());
        assert_eq!(
            PipelineRecord::load(dir.path(), &r.id).unwrap(),
            Some(r.clone())
        );
        assert_eq!(PipelineRecord::list(dir.path()), [r.clone()]);
        r.holder = Some(Submitter::this_process());
        assert!(!r.needs_holder());
        let lock = try_lock_holder(dir.path(), &r).unwrap();
        assert!(lock.is_some());
        assert!(try_lock_holder(dir.path(), &r).unwrap().is_none());
        drop(lock);
        assert!(try_lock_holder(dir.path(), &r).unwrap().is_some());
        for s in &mut r.steps {
            s.phase = Phase::NotRun {
                why: "x".into(),
                outside: false,
            };
        }
        r.holder = None;
        assert!(!r.needs_holder());
        assert!(PipelineRecord::load(dir.path(), "../x").is_err());
    }
}
