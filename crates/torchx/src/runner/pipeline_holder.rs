//! A pipeline's holder ([`Runner::hold_pipeline`]): the one process that writes the
//! pipeline's record (under its lock) and submits its steps, each recorded before it may go
//! on and settled from its typed outcome after ([`crate::pipeline::Submission`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::group::Submitter;
use crate::pipeline::{
    not_run_after, not_run_because, not_run_lost, step_states, step_verdict, try_lock_holder,
    upstream_env_var, Phase, PipelineRecord, StepContext, StepRecord, StepState, Submission,
    CANCELLED_BEFORE_START, STEP_ARG,
};
use crate::scheduler::WorkspaceSupport;
use crate::specs::{AppState, AppStatus, Verdict};
use crate::Runner;

impl Runner {
    /// Holds the pipeline `handle` names: takes its lock (or returns at once: another holder
    /// is at work), then until no step waits settles submissions a dead holder left, submits
    /// each step whose dependencies are met, records those that can no longer run, moves
    /// pending steps on to their failover schedulers, and on a cancel stops submitting and
    /// cancels what was submitted.
    pub async fn hold_pipeline(&self, handle: &str) -> Result<()> {
        let state_dir = crate::schedulers::default_state_dir();
        let found = handle.to_string();
        let record =
            crate::blocking::blocking("torchx", move || PipelineRecord::find(&found)).await?;
        let Some(record) = record else {
            return Err(Error::arg(format!("`{handle}` is not a pipeline handle")));
        };
        let dir = state_dir.clone();
        let locked = crate::blocking::blocking("torchx", move || {
            let Some(lock) = try_lock_holder(&dir, &record)? else {
                return Ok(None);
            };
            // Read again under the lock: the holder before may have moved it on.
            let mut record = PipelineRecord::load(&dir, &record.id)?
                .ok_or_else(|| Error::not_found("pipeline", record.handle(), ""))?;
            record.holder = Some(Submitter::this_process());
            record.save(&dir)?;
            Ok(Some((lock, record)))
        })
        .await?;
        let Some((_lock, mut record)) = locked else {
            return Ok(());
        };
        let (ended_tx, ended_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut holder = Holder {
            runner: self,
            state_dir,
            children: BTreeMap::new(),
            ended_tx,
            ended_rx,
            lost_after: crate::pipeline::lost_after(),
        };
        let outcome = holder.run(&mut record).await;
        record.holder = None;
        holder.save(&record).await?;
        outcome
    }

    /// What the pipeline gives `step`'s job ([`StepContext`]): its shared directory as the
    /// step's scheduler sees it, the pipeline's handle and each upstream step's handle (a
    /// placeholder for a step not submitted yet, as in a dry run).
    pub async fn step_context(
        &self,
        record: &PipelineRecord,
        step: &StepRecord,
    ) -> Result<StepContext> {
        if record.held_job {
            // A job held for its `--after`: it asked for nothing of a pipeline's.
            return Ok(StepContext::default());
        }
        let state_dir = crate::schedulers::default_state_dir();
        let host = record.shared_dir(&state_dir)?.display().to_string();
        let workspace = self
            .scheduler(&step.scheduler)
            .await?
            .capabilities()
            .workspace;
        let mut mount = None;
        let dir = match (workspace, &step.pipeline_dir) {
            (_, Some(dir)) => dir.clone(),
            // Local containers: the host's directory bind-mounted at the same path.
            (WorkspaceSupport::LocalImage, None) => {
                mount = Some(host.clone());
                host
            }
            (WorkspaceSupport::PushedImage, None) => {
                return Err(Error::arg(format!(
                    "step `{}` runs on {}, whose containers do not see this machine's files: \
                     give it `pipeline_dir: <path on one of its mounts>` for \
                     TORCHX_PIPELINE_DIR",
                    step.name, step.scheduler
                )))
            }
            // Processes, and clusters that share this machine's files.
            _ => host,
        };
        let mut env = crate::specs::Env::new();
        env.insert("TORCHX_PIPELINE_DIR".to_string(), dir);
        env.insert("TORCHX_PIPELINE_HANDLE".to_string(), record.handle());
        for dep in &step.after {
            let handle = record
                .steps
                .iter()
                .find(|s| s.name == dep.step)
                .and_then(|s| s.phase.handle())
                .map_or_else(|| format!("<{} when it runs>", dep.step), String::from);
            env.insert(upstream_env_var(&dep.step), handle);
        }
        Ok(StepContext { env, mount })
    }
}

struct Holder<'r> {
    runner: &'r Runner,
    state_dir: std::path::PathBuf,
    /// The step submissions this holder started and has not settled, by step: `None` while
    /// it runs, its exit code once it ended.
    children: BTreeMap<String, Option<Option<i32>>>,
    /// Where a thread that waits for a submission tells that it ended (it wakes the holder:
    /// the next step goes as soon as the one before is submitted).
    ended_tx: tokio::sync::mpsc::UnboundedSender<(String, Option<i32>)>,
    ended_rx: tokio::sync::mpsc::UnboundedReceiver<(String, Option<i32>)>,
    /// How long a job may be unknown to its scheduler before it is recorded lost.
    lost_after: Duration,
}

impl Holder<'_> {
    async fn save(&self, record: &PipelineRecord) -> Result<()> {
        let (record, dir) = (record.clone(), self.state_dir.clone());
        crate::blocking::blocking("torchx", move || record.save(&dir)).await
    }

    async fn run(&mut self, record: &mut PipelineRecord) -> Result<()> {
        // Steps that all run on this machine are asked about often (a status is a file read);
        // a cluster is spared.
        let local = self.runner.pipeline_runs_locally(record).await;
        let first = Duration::from_millis(if local { 2 } else { 20 });
        let mut pause = first;
        loop {
            let mut changed = self.settle_submissions(record).await?;
            if changed {
                crate::durable::failpoint(&self.state_dir, "pipeline.submit.settled");
                // A submission just ended: its job is next to move.
                pause = first;
            }
            let (now, dir) = (record.clone(), self.state_dir.clone());
            let cancelled =
                crate::blocking::blocking("torchx", move || Ok(now.cancel_requested(&dir))).await?;
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
                        pause = first;
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
                pause = first;
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
                self.save(record).await?;
            }
            if !record.holder_has_work(cancelled) {
                return Ok(());
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                Some((step, exit)) = self.ended_rx.recv() => {
                    self.children.insert(step, Some(exit));
                }
            }
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
                    if crate::group::now() - failover.submitted_at >= failover.after_secs as f64 {
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
        self.save(record).await?;
        crate::durable::failpoint(&self.state_dir, "pipeline.failover.recorded");
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
                    *changed |= record.observe(
                        &handle,
                        status.as_ref(),
                        crate::group::now(),
                        self.lost_after,
                    );
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

    /// Moves each step being submitted whose submission ended to what it did: submitted (its
    /// handle), failed (its error), or back to waiting when it never went on. One that went on
    /// and ended without saying what it submitted (killed) is failed, never submitted again:
    /// its job may exist.
    async fn settle_submissions(&mut self, record: &mut PipelineRecord) -> Result<bool> {
        while let Ok((step, exit)) = self.ended_rx.try_recv() {
            self.children.insert(step, Some(exit));
        }
        let mut being: Vec<(String, Option<Submitter>)> = Vec::new();
        let mut exits = BTreeMap::new();
        for step in &record.steps {
            if let Phase::Submitting { submitter } = &step.phase {
                let theirs = match self.children.get(&step.name) {
                    Some(None) => continue,
                    Some(Some(exit)) => {
                        exits.insert(step.name.clone(), *exit);
                        None
                    }
                    // A dead holder's: its output file is its lock (seen from any host).
                    None => Some(submitter.clone()),
                };
                being.push((step.name.clone(), theirs));
            }
        }
        if being.is_empty() {
            return Ok(false);
        }
        for name in exits.keys() {
            self.children.remove(name);
        }
        let (now, dir) = (record.clone(), self.state_dir.clone());
        let outcomes = crate::blocking::blocking("torchx", move || {
            let mut outcomes = BTreeMap::new();
            for (name, submitter) in being {
                let paths = now.submission_paths(&dir, &name)?;
                if submitter.is_some_and(|s| s.alive(&paths.out)) {
                    continue;
                }
                outcomes.insert(name, (paths.read()?, paths.error_tail()));
            }
            Ok(outcomes)
        })
        .await?;
        for step in &mut record.steps {
            let Some((outcome, stderr)) = outcomes.get(&step.name) else {
                continue;
            };
            step.phase = match outcome {
                Some(Submission::Submitted { handle }) => Phase::Submitted {
                    handle: handle.clone(),
                },
                Some(Submission::Failed { error }) => Phase::SubmitFailed {
                    error: error.clone(),
                },
                // It never went on: nothing was submitted, so it may go again.
                None => Phase::Waiting,
                Some(Submission::Going) => {
                    let exit = match exits.get(&step.name) {
                        Some(Some(code)) => format!(" (exit {code})"),
                        _ => String::new(),
                    };
                    let said = if stderr.is_empty() {
                        String::new()
                    } else {
                        format!(": {stderr}")
                    };
                    Phase::SubmitFailed {
                        error: format!(
                            "its submission ended before it said what it submitted{exit}{said}; \
                             not submitted again, so that it runs at most once (`torchx list -s \
                             {}` shows whether it reached its scheduler)",
                            step.scheduler
                        ),
                    }
                }
            };
        }
        Ok(!outcomes.is_empty())
    }

    /// Starts the submission of step `i` (`torchx __pipeline-step`): recorded as submitting
    /// before it may go on.
    async fn submit(&mut self, record: &mut PipelineRecord, i: usize) -> Result<()> {
        let name = record.steps[i].name.clone();
        let paths = record.submission_paths(&self.state_dir, &name)?;
        let exe = crate::schedulers::local_cwd::torchx_exe()?;
        let (cwd, handle, state_dir) =
            (record.cwd.clone(), record.handle(), self.state_dir.clone());
        let step = name.clone();
        let child = crate::blocking::blocking("torchx", move || {
            paths.clear()?;
            let create = |p: &std::path::Path| {
                std::fs::File::create(p)
                    .map_err(|e| Error::io(format!("creating {}", p.display()), e))
            };
            // Locked before the child exists and inherited as its output: held from before the
            // record names the child until it ends, which a holder on another host can see.
            let out = create(&paths.out)?;
            out.lock()
                .map_err(|e| Error::io(format!("locking {}", paths.out.display()), e))?;
            std::process::Command::new(exe)
                .args([STEP_ARG, &handle, &step])
                .env("TORCHX_STATE_DIR", &state_dir)
                .current_dir(&cwd)
                .stdin(Stdio::piped())
                .stdout(out)
                .stderr(create(&paths.err)?)
                // Its own process group: it outlives a holder killed with its group.
                .process_group(0)
                .spawn()
                .map_err(|e| Error::io(format!("starting the submission of step `{step}`"), e))
        })
        .await;
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                record.steps[i].phase = Phase::SubmitFailed {
                    error: e.to_string(),
                };
                return Ok(());
            }
        };
        crate::durable::failpoint(&self.state_dir, "pipeline.submit.spawned");
        record.steps[i].phase = Phase::Submitting {
            submitter: Submitter::of(child.id()),
        };
        if let Some(f) = record.steps[i].failover.as_mut() {
            f.submitted_at = crate::group::now();
        }
        let saved = self.save(record).await;
        crate::durable::failpoint(&self.state_dir, "pipeline.submit.recorded");
        // The go-ahead: one byte once the record names the submission; none (the pipe closed)
        // if it could not be recorded, and the child submits nothing.
        let mut stdin = child.stdin.take();
        if saved.is_ok() {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(b"\n");
            }
        }
        drop(stdin);
        crate::durable::failpoint(&self.state_dir, "pipeline.submit.told");
        self.children.insert(name.clone(), None);
        let ended = self.ended_tx.clone();
        std::thread::spawn(move || {
            let exit = child.wait().ok().and_then(|s| s.code());
            let _ = ended.send((name, exit));
        });
        saved
    }
}
