//! A pipeline's holder, `torchx __pipeline <handle>`: the one process that writes the
//! pipeline's record (under its lock) and submits its steps, each with `torchx run`, recorded
//! before it may go on and settled from its output files after.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use clap::Args;
use torchx::group::Submitter;
use torchx::pipeline::step_verdict;
use torchx::pipeline::{
    not_run_after, not_run_because, not_run_lost, step_states, try_lock_holder, Phase,
    PipelineRecord, StepState, CANCELLED_BEFORE_START,
};
use torchx::specs::{AppState, AppStatus, Verdict};
use torchx::{Error, Result, Runner};

use crate::exit_codes;

use super::{handles, step_env_args, torchx_run};

#[derive(Debug, Args)]
pub struct HoldPipelineArgs {
    /// The pipeline handle.
    pub pipeline_handle: String,
}

/// What a step's `torchx run` writes to its error output once it was told to go on: after
/// it, a submission may have happened; before it, none did.
const GO_MARK: &str = "torchx: submitting a pipeline step";

/// `torchx __pipeline <handle>`: the pipeline's holder. Takes the pipeline's lock (or leaves:
/// another holder is at work), then until no step waits: settles submissions a dead holder
/// left, submits each step whose dependencies are met, records those that can no longer
/// run, and on a cancel stops submitting and cancels what was submitted.
pub fn hold(a: HoldPipelineArgs) -> Result<i32> {
    let state_dir = torchx::schedulers::default_state_dir();
    let handle = a.pipeline_handle;
    let Some(record) = PipelineRecord::find(&handle)? else {
        return Err(Error::arg(format!("`{handle}` is not a pipeline handle")));
    };
    let Some(_lock) = try_lock_holder(&state_dir, &record)? else {
        return Ok(exit_codes::OK);
    };
    // Read again under the lock: the holder before may have moved it on.
    let mut record = PipelineRecord::load(&state_dir, &record.id)?
        .ok_or_else(|| Error::not_found("pipeline", handle.as_str(), ""))?;
    record.holder = Some(Submitter::this_process());
    record.save(&state_dir)?;
    let runner = crate::commands::runner()?;
    let mut holder = Holder {
        runner,
        state_dir,
        children: BTreeMap::new(),
        lost_after: torchx::pipeline::lost_after(),
    };
    let outcome = crate::commands::block_on(holder.run(&mut record));
    record.holder = None;
    record.save(&holder.state_dir)?;
    outcome.map(|()| exit_codes::OK)
}

struct Holder {
    runner: Runner,
    state_dir: std::path::PathBuf,
    /// The `torchx run`s this holder started, by step (reaped as they end).
    children: BTreeMap<String, Child>,
    /// How long a job may be unknown to its scheduler before it is recorded lost.
    lost_after: Duration,
}

impl Holder {
    async fn run(&mut self, record: &mut PipelineRecord) -> Result<()> {
        let mut pause = Duration::from_millis(20);
        loop {
            let mut changed = self.settle_submissions(record)?;
            if changed {
                torchx::durable::failpoint(&self.state_dir, "pipeline.submit.settled");
            }
            let cancelled = record.cancel_requested(&self.state_dir);
            let steps = self.step_states(record, &mut changed).await;
            for i in 0..record.steps.len() {
                if record.steps[i].phase != Phase::Waiting {
                    continue;
                }
                if cancelled {
                    record.steps[i].phase = Phase::NotRun {
                        why: CANCELLED_BEFORE_START.into(),
                        outside: false,
                    };
                    changed = true;
                    continue;
                }
                let upstream = |name: &str| {
                    let state = if name.contains("://") {
                        record.ended.get(name).map(|e| e.state)
                    } else {
                        steps.iter().find(|s| s.name == name).map(|s| s.state)
                    };
                    state.filter(|s| s.is_terminal())
                };
                match step_verdict(&record.steps[i].after, upstream) {
                    (Verdict::Satisfied, _) => {
                        self.submit(record, i).await?;
                        changed = true;
                        pause = Duration::from_millis(20);
                    }
                    (Verdict::Impossible, Some(dep)) => {
                        let why = match record.ended.get(&dep.step) {
                            Some(e) if dep.is_external() && e.lost => not_run_lost(dep),
                            Some(e) if dep.is_external() => not_run_after(dep, e.state),
                            _ => not_run_because(dep, &steps),
                        };
                        record.steps[i].phase = Phase::NotRun {
                            why,
                            outside: dep.is_external(),
                        };
                        changed = true;
                    }
                    _ => {}
                }
            }
            if !cancelled && self.fail_over(record, &steps).await? {
                changed = true;
                pause = Duration::from_millis(20);
            }
            if cancelled {
                // A cancelled job moves nowhere.
                for f in record.steps.iter_mut().filter_map(|s| s.failover.as_mut()) {
                    if !f.next.is_empty() {
                        f.next.clear();
                        changed = true;
                    }
                }
                for step in &record.steps {
                    if let Phase::Submitted { handle } = &step.phase {
                        if !record.ended.contains_key(handle) {
                            let _ = self.runner.cancel(handle).await;
                        }
                    }
                }
            }
            if changed {
                record.save(&self.state_dir)?;
            }
            if !record.holder_has_work(cancelled) {
                return Ok(());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// Moves each step with a failover whose job is still pending past its limit to the next
    /// scheduler: records that it moves it (saved first: a holder that dies on the way knows
    /// the cancel is its own), cancels it only if it has not started ([`Runner::cancel_pending`],
    /// which holds it first where the scheduler can) and, once it is seen cancelled, makes the
    /// step wait for its submission there. A job that started stays. True if the record changed.
    async fn fail_over(
        &mut self,
        record: &mut PipelineRecord,
        steps: &[StepState],
    ) -> Result<bool> {
        let mut changed = false;
        let mut due: Vec<usize> = Vec::new();
        let ended = &record.ended;
        for (i, (step, state)) in record.steps.iter_mut().zip(steps).enumerate() {
            let Phase::Submitted { handle } = &step.phase else {
                continue;
            };
            let Some(failover) = step.failover.as_mut().filter(|f| !f.next.is_empty()) else {
                continue;
            };
            let ours = failover.cancelling.as_deref() == Some(handle.as_str());
            // The job's own state (the step shows one it cancelled as still moving).
            let job = ended.get(handle).map_or(state.state, |e| e.state);
            match job {
                // Ours, still pending (or unknown for now): the cancel again (a dead holder's,
                // or one that failed).
                AppState::Pending | AppState::Submitted | AppState::Unknown if ours => due.push(i),
                AppState::Pending | AppState::Submitted => {
                    if now_secs() - failover.submitted_at >= failover.after_secs as f64 {
                        failover.cancelling = Some(handle.clone());
                        due.push(i);
                    }
                }
                AppState::Unknown => {}
                // Confirmed over, cancelled before it started: it goes to the next scheduler.
                AppState::Cancelled if ours => {
                    let (scheduler, run_args) = failover.next.remove(0);
                    failover.moved_from.push(handle.clone());
                    failover.cancelling = None;
                    step.scheduler = scheduler;
                    step.run_args = run_args;
                    step.phase = Phase::Waiting;
                    changed = true;
                }
                // It started (or ended on its own): it stays where it is.
                _ => {
                    failover.next.clear();
                    failover.cancelling = None;
                    changed = true;
                }
            }
        }
        if due.is_empty() {
            return Ok(changed);
        }
        record.save(&self.state_dir)?;
        torchx::durable::failpoint(&self.state_dir, "pipeline.failover.recorded");
        for i in due {
            let step = &mut record.steps[i];
            let Some(handle) = step.phase.handle().map(String::from) else {
                continue;
            };
            match self.runner.cancel_pending(&handle).await {
                // Seen CANCELLED next round, then moved.
                Ok(true) => {}
                Ok(false) => {
                    if let Some(f) = step.failover.as_mut() {
                        f.next.clear();
                        f.cancelling = None;
                    }
                    changed = true;
                }
                Err(e) => log::warn!("failover of step {}: cancelling {handle}: {e}", step.name),
            }
        }
        Ok(changed)
    }

    /// The steps' states, asking the schedulers only about jobs not recorded over; records
    /// each job seen over, or unknown too long ([`PipelineRecord::observe`]), setting `changed`.
    async fn step_states(
        &mut self,
        record: &mut PipelineRecord,
        changed: &mut bool,
    ) -> Vec<StepState> {
        // Steps' jobs, then jobs outside the pipeline that waiting steps run after.
        let mut asked: Vec<String> = Vec::new();
        for step in &record.steps {
            match &step.phase {
                Phase::Submitted { handle } => asked.push(handle.clone()),
                Phase::Waiting => asked.extend(
                    step.after
                        .iter()
                        .filter(|d| d.is_external())
                        .map(|d| d.step.clone()),
                ),
                _ => {}
            }
        }
        asked.retain(|h| !record.ended.contains_key(h));
        asked.sort();
        asked.dedup();
        let mut jobs: BTreeMap<String, AppStatus> = BTreeMap::new();
        for handle in asked {
            match self.runner.status(&handle).await {
                Ok(status) => {
                    *changed |=
                        record.observe(&handle, status.as_ref(), now_secs(), self.lost_after);
                    if let Some(s) = status {
                        jobs.insert(handle, s);
                    }
                }
                Err(e) => log::warn!("{handle}: {e}"),
            }
        }
        step_states(record, |h| jobs.get(h).cloned())
            .into_iter()
            .map(|mut s| {
                // A job its scheduler does not report yet is still being submitted for us.
                if s.state == AppState::Unknown && s.handle.is_some() {
                    s.state = AppState::Submitted;
                }
                s
            })
            .collect()
    }

    /// Moves each step being submitted whose `torchx run` ended to what it did: submitted
    /// (its handle), failed (its error), or back to waiting when it never went on.
    fn settle_submissions(&mut self, record: &mut PipelineRecord) -> Result<bool> {
        let mut changed = false;
        let files = record.clone();
        for step in &mut record.steps {
            let Phase::Submitting { submitter } = &step.phase else {
                continue;
            };
            let running = match self.children.get_mut(&step.name) {
                Some(child) => matches!(child.try_wait(), Ok(None)),
                // A dead holder's: its output file is its lock (seen from any host).
                None => {
                    submitter.alive(&files.submission_file(&self.state_dir, &step.name, "out")?)
                }
            };
            if running {
                continue;
            }
            let exit = self
                .children
                .remove(&step.name)
                .and_then(|mut c| c.wait().ok())
                .and_then(|s| s.code());
            let read = |ext| {
                files
                    .submission_file(&self.state_dir, &step.name, ext)
                    .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            };
            let (out, err) = (read("out")?, read("err")?);
            let handle = serde_json::Deserializer::from_str(&out)
                .into_iter::<serde_json::Value>()
                .filter_map(std::result::Result::ok)
                .find_map(|v| v["handle"].as_str().map(String::from));
            step.phase = match handle {
                Some(handle) => Phase::Submitted { handle },
                // It never went on: nothing was submitted, so it may go again.
                None if !err.contains(GO_MARK) => Phase::Waiting,
                None => {
                    let error: Vec<&str> = err
                        .lines()
                        .filter(|l| !l.contains(GO_MARK) && !l.trim().is_empty())
                        .collect();
                    let code = exit.map(|c| format!(" (exit {c})")).unwrap_or_default();
                    Phase::SubmitFailed {
                        error: format!("torchx run{code}: {}", error.join(" ")),
                    }
                }
            };
            changed = true;
        }
        Ok(changed)
    }

    /// Starts the `torchx run` of step `i`: recorded as submitting before it may go on.
    async fn submit(&mut self, record: &mut PipelineRecord, i: usize) -> Result<()> {
        let step = &record.steps[i];
        let mut rest = match step_env_args(&self.runner, record, step, &handles(record)).await {
            Ok(args) => args,
            Err(e) => {
                record.steps[i].phase = Phase::SubmitFailed {
                    error: e.to_string(),
                };
                return Ok(());
            }
        };
        rest.extend(step.run_args.iter().cloned());
        let name = step.name.clone();
        let out = record.submission_file(&self.state_dir, &name, "out")?;
        let err = record.submission_file(&self.state_dir, &name, "err")?;
        let create = |p: &Path| {
            std::fs::File::create(p).map_err(|e| Error::io(format!("creating {}", p.display()), e))
        };
        // Locked before the child exists and inherited as its output: held from before the
        // record names the child until it ends, which a holder on another host can see.
        let out_file = create(&out)?;
        out_file
            .lock()
            .map_err(|e| Error::io(format!("locking {}", out.display()), e))?;
        let mut child = torchx_run(record, &["--detach", "--json", "--pipeline_go"], rest)?
            .stdin(Stdio::piped())
            .stdout(out_file)
            .stderr(create(&err)?)
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(format!("starting the submission of step `{name}`"), e))?;
        torchx::durable::failpoint(&self.state_dir, "pipeline.submit.spawned");
        record.steps[i].phase = Phase::Submitting {
            submitter: Submitter::of(child.id()),
        };
        if let Some(f) = record.steps[i].failover.as_mut() {
            f.submitted_at = now_secs();
        }
        let saved = record.save(&self.state_dir);
        torchx::durable::failpoint(&self.state_dir, "pipeline.submit.recorded");
        let mut stdin = child.stdin.take();
        if saved.is_ok() {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(b"go\n");
            }
        }
        drop(stdin);
        torchx::durable::failpoint(&self.state_dir, "pipeline.submit.told");
        self.children.insert(name, child);
        saved
    }
}

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// For a step's `torchx run --pipeline_go`: waits for the holder's go-ahead (false: none
/// came, submit nothing), then marks that it went on.
pub fn await_go() -> bool {
    let mut go = String::new();
    if std::io::stdin().read_line(&mut go).is_err() || go.trim() != "go" {
        return false;
    }
    eprintln!("{GO_MARK}");
    true
}
