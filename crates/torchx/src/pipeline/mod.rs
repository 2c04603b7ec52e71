//! Pipelines: the steps of a pipeline file ([`PipelineSpec`]) run on their own
//! schedulers, each once the steps it runs after have ended as it requires. What was
//! submitted is recorded in `$TORCHX_STATE_DIR/pipelines/<id>/record.json`; a pipeline's
//! handle is `pipeline://<session>/<id>`.
//!
//! A small detached process, the pipeline's *holder* (`torchx __pipeline <handle>`: a `main`
//! around [`Runner::hold_pipeline`](crate::Runner::hold_pipeline)), submits the steps, each in
//! a process of its own ([`Submission`]): it alone writes the record, under an exclusive lock on
//! `holder.lock` that it keeps while it lives. Each submission is recorded before it is made
//! and its outcome after, so a holder that dies (even by SIGKILL) is replaced by the next
//! command that reads the pipeline ([`PipelineRecord::needs_holder`]) without any step being
//! submitted twice. Queries only read; cancel marks the pipeline (`cancel`) and cancels what
//! was submitted.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod submission;

pub use submission::{StepContext, Submission, SubmissionPaths, STEP_ARG};

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

/// What a lost job's message starts with (see [`PipelineRecord::observe`]).
pub const LOST: &str = "lost";

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
    /// How each job it waits on ended (its steps' and outside jobs, by handle), once its holder
    /// saw it over: kept, as the job may be purged from its scheduler later.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ended: BTreeMap<String, Ended>,
    /// When its holder first found each job unknown to its scheduler (by handle), until it is
    /// known again or, after [`lost_after`], recorded as lost.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown_since: BTreeMap<String, f64>,
}

/// How a job ended, as a pipeline's holder recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ended {
    /// Its final state.
    pub state: AppState,
    /// Its scheduler's message then.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
    /// Never seen over: its scheduler stopped knowing it (deleted, purged), so it counts as
    /// FAILED (how it ended is not known).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
}

impl Ended {
    /// As a status.
    pub fn status(&self) -> AppStatus {
        let mut s = AppStatus::new(self.state);
        s.msg.clone_from(&self.msg);
        s
    }
}

/// How long a job a pipeline waits on may be unknown to its scheduler before the holder
/// records it lost: `$TORCHX_PIPELINE_LOST_AFTER` seconds, else 120 (a scheduler may not
/// list a job it has just accepted for a while, and not at all once it purged it).
pub fn lost_after() -> Duration {
    std::env::var("TORCHX_PIPELINE_LOST_AFTER")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(120), Duration::from_secs_f64)
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
            created: crate::group::now(),
            cwd: cwd.display().to_string(),
            steps,
            holder: None,
            parent: None,
            held_job: false,
            ended: BTreeMap::new(),
            unknown_since: BTreeMap::new(),
        }
    }

    /// How the job `handle` ended, if its holder recorded it.
    pub fn ended_status(&self, handle: &str) -> Option<AppStatus> {
        self.ended.get(handle).map(Ended::status)
    }

    /// Records what the holder found of the job `handle` at `now`: its status (`None`: its
    /// scheduler does not know it). Over: kept as it ended. Unknown for `grace`: lost. True if
    /// the record changed.
    pub fn observe(
        &mut self,
        handle: &str,
        status: Option<&AppStatus>,
        now: f64,
        grace: Duration,
    ) -> bool {
        match status {
            Some(s) if s.is_terminal() => {
                self.unknown_since.remove(handle);
                let ended = Ended {
                    state: s.state,
                    msg: s.msg.clone(),
                    lost: false,
                };
                self.ended.insert(handle.to_string(), ended);
                true
            }
            Some(_) => self.unknown_since.remove(handle).is_some(),
            None => {
                let Some(&since) = self.unknown_since.get(handle) else {
                    self.unknown_since.insert(handle.to_string(), now);
                    return true;
                };
                if now - since < grace.as_secs_f64() {
                    return false;
                }
                self.unknown_since.remove(handle);
                let ended = Ended {
                    state: AppState::Failed,
                    msg: format!(
                        "{LOST}: its scheduler has not known it for {:.0}s (deleted or purged \
                         before it was seen to end), so how it ended is not known",
                        now - since
                    ),
                    lost: true,
                };
                self.ended.insert(handle.to_string(), ended);
                true
            }
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

    /// Writes the record (atomically: a reader never sees half of it), creating its
    /// directories.
    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let dir = self.dir(state_dir)?;
        for d in [dir.clone(), dir.join("steps"), dir.join("shared")] {
            crate::schedulers::create_private_dir(&d)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| {
            Error::backend(SCHEME, format!("cannot serialise the pipeline: {e}")).with_source(e)
        })?;
        crate::durable::write_record(&dir.join("record.json"), text.as_bytes())
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

    /// Whether a holder has work left: a step only it can move on ([`StepRecord::is_open`]),
    /// or, unless the pipeline was cancelled, a step's job not yet seen over (its end is kept
    /// in the record, which outlives the job on its scheduler).
    pub fn holder_has_work(&self, cancelled: bool) -> bool {
        self.steps.iter().any(|s| {
            s.is_open()
                || (!cancelled
                    && matches!(&s.phase, Phase::Submitted { handle } if !self.ended.contains_key(handle)))
        })
    }

    /// Whether a holder has work left ([`holder_has_work`](Self::holder_has_work)) and none is
    /// at work (on any host: [`Submitter::alive`] with the holder's lock): the next command
    /// that reads the pipeline starts one.
    pub fn needs_holder(&self, state_dir: &Path) -> bool {
        let work = self.holder_has_work(self.cancel_requested(state_dir));
        let lock = self.dir(state_dir).map(|d| d.join(HOLDER_LOCK));
        work && !matches!((&self.holder, lock), (Some(h), Ok(lock)) if h.alive(&lock))
    }
}

/// The pipeline `handle` names (see [`PipelineRecord::find`]), with a holder started again if
/// it needs one and has none (the last one died): what every reader of a pipeline calls (the
/// Runner, the CLI, the dashboard, Python through either).
pub fn find(handle: &str) -> Result<Option<PipelineRecord>> {
    let record = PipelineRecord::find(handle)?;
    if let Some(r) = &record {
        if r.needs_holder(&crate::schedulers::default_state_dir()) {
            // A reader still reads when no holder can be started here (a program that is not
            // `torchx` and was not told where it is): the next reader that can will.
            if let Err(e) = start_holder(r) {
                log::warn!("{handle}: its holder is gone and cannot be started here: {e}");
            }
        }
    }
    Ok(record)
}

/// Starts a holder for `record` in the background, `torchx __pipeline <handle>` in its own
/// process group (one that finds another at work leaves at once). Its output goes to the
/// pipeline's `holder.log`.
pub fn start_holder(record: &PipelineRecord) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let state_dir = crate::schedulers::default_state_dir();
    let log_path = record.dir(&state_dir)?.join("holder.log");
    let log = File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::io(format!("opening {}", log_path.display()), e))?;
    let err_log = log
        .try_clone()
        .map_err(|e| Error::io("duplicating the holder's log", e))?;
    std::process::Command::new(crate::schedulers::local_cwd::torchx_exe()?)
        .args([HOLD_ARG, &record.handle()])
        .env("TORCHX_STATE_DIR", &state_dir)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err_log)
        // Its own process group: Ctrl-C at the terminal, or the end of the shell, stops not it.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("starting the pipeline's holder", e))?;
    Ok(())
}

/// The hidden subcommand of `torchx` that holds a pipeline.
pub const HOLD_ARG: &str = "__pipeline";

/// The lock a pipeline's holder keeps while it lives, in the pipeline's directory.
const HOLDER_LOCK: &str = "holder.lock";

/// The holder's exclusive lock on a pipeline, held while the file is open. `None` when
/// another process holds it.
pub fn try_lock_holder(state_dir: &Path, record: &PipelineRecord) -> Result<Option<File>> {
    let dir = record.dir(state_dir)?;
    crate::schedulers::create_private_dir(&dir)?;
    crate::durable::try_lock(&dir.join(HOLDER_LOCK))
}

/// Each step's state from its phase and, for submitted steps, `job` (their job's status;
/// `None`: unknown to its scheduler). A waiting step says which step it waits for; a step that
/// can no longer run is CANCELLED (what the holder records as it sees it).
pub fn step_states(
    record: &PipelineRecord,
    job: impl Fn(&str) -> Option<AppStatus>,
) -> Vec<StepState> {
    // What the holder recorded of a job's end holds even once its scheduler forgot the job.
    let job = |h: &str| record.ended_status(h).or_else(|| job(h));
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
                        match record.ended.get(&dep.step) {
                            Some(e) if e.lost => not_run_lost(dep),
                            _ => not_run_after(
                                dep,
                                job(&dep.step).map_or(AppState::Unknown, |s| s.state),
                            ),
                        },
                    ),
                    (Verdict::Impossible, Some(dep)) => {
                        (AppState::Cancelled, not_run_because(dep, &out))
                    }
                    _ => (AppState::Pending, "about to be submitted".to_string()),
                }
            }
            Phase::Submitting { .. } => (AppState::Submitted, "being submitted".to_string()),
            Phase::Submitted { handle } => match job(handle) {
                // Cancelled by its failover, not yet submitted to the next scheduler.
                Some(s) if s.state.is_terminal() && step.is_open() => (
                    AppState::Pending,
                    format!(
                        "moving: {handle} did not start within {}s",
                        step.failover.as_ref().map_or(0, |f| f.after_secs)
                    ),
                ),
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
    match upstream.iter().find(|s| s.name == dep.step) {
        Some(s) if s.msg.starts_with(LOST) => not_run_lost(dep),
        Some(s) => not_run_after(dep, s.state),
        None => not_run_after(dep, AppState::Unknown),
    }
}

/// Why a step will not run: `dep`'s job was lost ([`PipelineRecord::observe`]).
pub fn not_run_lost(dep: &StepDependency) -> String {
    format!(
        "not started: {} was lost (its scheduler no longer knows it and it was never seen to \
         end), it runs after it is {}",
        step_or_job(&dep.step),
        dep.condition.wanted()
    )
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
        assert!(r.needs_holder(dir.path()));
        r.save(dir.path()).unwrap();
        assert!(r.shared_dir(dir.path()).unwrap().is_dir());
        assert_eq!(
            PipelineRecord::load(dir.path(), &r.id).unwrap(),
            Some(r.clone())
        );
        assert_eq!(PipelineRecord::list(dir.path()), [r.clone()]);
        r.holder = Some(Submitter::this_process());
        assert!(!r.needs_holder(dir.path()));
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
        assert!(!r.needs_holder(dir.path()));
        assert!(PipelineRecord::load(dir.path(), "../x").is_err());
    }

    /// A holder on another host is judged by its lock, never by a pid that means nothing here.
    #[test]
    fn a_holder_elsewhere_needs_no_replacement_while_it_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = record(DIAMOND);
        r.save(dir.path()).unwrap();
        let mut elsewhere = Submitter::this_process();
        elsewhere.host = Some(crate::durable::Host {
            name: "another-login-node".into(),
            boot: String::new(),
        });
        r.holder = Some(elsewhere);
        assert!(
            r.needs_holder(dir.path()),
            "no lock held: that holder is gone"
        );
        let lock = try_lock_holder(dir.path(), &r).unwrap().unwrap();
        assert!(!r.needs_holder(dir.path()));
        drop(lock);
    }

    /// What a holder saw end is kept (a purged job still counts as it ended); a job unknown to
    /// its scheduler for the grace period is lost, and what runs after it says so.
    #[test]
    fn ended_jobs_are_kept_and_an_unknown_one_is_lost_after_the_grace() {
        let mut r = record(DIAMOND);
        submitted(&mut r, 0);
        let a = r.steps[0].phase.handle().unwrap().to_string();
        let grace = Duration::from_secs(10);
        let running = AppStatus::new(AppState::Running);
        assert!(!r.observe(&a, Some(&running), 0.0, grace));
        assert!(r.observe(&a, None, 1.0, grace), "first seen unknown");
        assert!(!r.observe(&a, None, 5.0, grace));
        assert!(r.observe(&a, Some(&running), 6.0, grace), "known again");
        assert!(r.unknown_since.is_empty());
        assert!(r.observe(&a, None, 7.0, grace));
        assert!(r.observe(&a, None, 17.0, grace), "lost");
        let states = step_states(&r, |_| None);
        assert_eq!(states[0].state, AppState::Failed);
        assert!(states[0].msg.starts_with(LOST), "{}", states[0].msg);
        assert!(
            not_run_because(&r.steps[1].after[0], &states).contains("step a was lost"),
            "{}",
            not_run_because(&r.steps[1].after[0], &states)
        );

        // Seen over, then purged: it ended as it was seen to.
        let mut r = record(DIAMOND);
        submitted(&mut r, 0);
        let mut done = AppStatus::new(AppState::Succeeded);
        done.msg = "exit 0".into();
        assert!(r.observe(&a, Some(&done), 0.0, grace));
        let states = step_states(&r, |_| None);
        assert_eq!(
            (states[0].state, states[0].msg.as_str()),
            (AppState::Succeeded, "exit 0")
        );
        assert_eq!(states[1].msg, "about to be submitted");
        // (A time that prints exactly: serde_json without `float_roundtrip` may read the last
        // digit of another back.)
        r.created = 1.5;
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<PipelineRecord>(&text).unwrap(), r);
    }
}
