//! The Runner's side of pipelines ([`crate::pipeline`]): their steps' states, status, cancel
//! and delete.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::pipeline::{
    pipeline_state, step_states, try_lock_holder, Phase, PipelineRecord, StepRecord, StepState,
    CANCELLED_BEFORE_START, HOLDER_STOP,
};
use crate::specs::{AppState, AppStatus};
use crate::Runner;

impl Runner {
    /// Each step's state now (one status call per submitted step).
    pub async fn pipeline_steps(&self, record: &PipelineRecord) -> Result<Vec<StepState>> {
        let mut jobs = std::collections::BTreeMap::new();
        // A reused step's job succeeded in an earlier run: not asked about again.
        for step in &record.steps {
            let Phase::Submitted { handle } = &step.phase else {
                continue;
            };
            if record.ended.contains_key(handle) {
                continue;
            }
            let status = match self.step_job_status(handle).await {
                Ok(s) => s,
                Err(e) if e.kind() == crate::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
            jobs.insert(handle.to_string(), status);
        }
        for step in record.steps.iter().filter(|s| s.phase == Phase::Waiting) {
            for dep in step.after.iter().filter(|d| d.is_external()) {
                if !jobs.contains_key(&dep.step) && !record.ended.contains_key(&dep.step) {
                    // Boxed: a pipeline may wait for another pipeline.
                    let status = Box::pin(self.status(&dep.step)).await.ok().flatten();
                    jobs.insert(dep.step.clone(), status);
                }
            }
        }
        Ok(step_states(record, |h| jobs.get(h).cloned().flatten()))
    }

    /// A step's job's (or group's) status.
    async fn step_job_status(&self, handle: &str) -> Result<Option<AppStatus>> {
        match find_group(handle).await? {
            Some(group) => Ok(Some(self.group_status(&group).await?)),
            None => self.app_status(handle).await,
        }
    }

    /// The pipeline's status: its state, and its steps' counts as the message.
    pub async fn pipeline_status(&self, record: &PipelineRecord) -> Result<AppStatus> {
        let state_dir = crate::schedulers::default_state_dir();
        let steps = self.pipeline_steps(record).await?;
        let (now, dir) = (record.clone(), state_dir);
        let cancelled =
            crate::blocking::blocking("torchx", move || Ok(now.cancel_requested(&dir))).await?;
        let mut status = AppStatus::new(pipeline_state(record, &steps, cancelled));
        let states: Vec<AppState> = steps.iter().map(|s| s.state).collect();
        let counted: Vec<String> = crate::group::counts(&states)
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        status.msg = format!("{} steps: {}", steps.len(), counted.join(", "));
        Ok(status)
    }

    /// Cancels the pipeline: no step starts any more, and every submitted step that is not
    /// over is cancelled. The holder, if one is at work, sees the mark and stops; steps it is
    /// submitting are cancelled once submitted (waits for them at most a few seconds).
    pub async fn cancel_pipeline(&self, record: &PipelineRecord) -> Result<()> {
        let state_dir = crate::schedulers::default_state_dir();
        let marker = record.dir(&state_dir)?.join("cancel");
        crate::blocking::blocking("torchx", move || {
            std::fs::write(&marker, b"")
                .map_err(|e| Error::io(format!("writing {}", marker.display()), e))
        })
        .await?;
        let deadline = std::time::Instant::now() + HOLDER_STOP;
        let mut record = record.clone();
        loop {
            for handle in record.steps.iter().filter_map(|s| match &s.phase {
                Phase::Submitted { handle } => Some(handle),
                _ => None,
            }) {
                let cancelled = match find_group(handle).await? {
                    Some(group) => self.cancel_group(&group).await,
                    None => self.cancel_app(handle).await,
                };
                match cancelled {
                    Err(e) if e.kind() != crate::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            let open = record.steps.iter().any(StepRecord::is_open);
            if !open {
                return Ok(());
            }
            // No holder at work: settle the steps that will not run ourselves.
            let (now, dir) = (record.clone(), state_dir.clone());
            let lock =
                crate::blocking::blocking("torchx", move || try_lock_holder(&dir, &now)).await?;
            if let Some(_lock) = lock {
                let mut now = load_pipeline(&state_dir, &record.id)
                    .await?
                    .unwrap_or(record);
                let submitting = now
                    .steps
                    .iter()
                    .any(|s| matches!(s.phase, Phase::Submitting { .. }));
                if !submitting {
                    for s in &mut now.steps {
                        if let Some(f) = s.failover.as_mut() {
                            f.next.clear();
                        }
                        if s.phase == Phase::Waiting {
                            s.phase = Phase::NotRun {
                                why: CANCELLED_BEFORE_START.into(),
                                outside: false,
                            };
                        }
                    }
                    now.holder = None;
                    let state_dir = state_dir.clone();
                    crate::blocking::blocking("torchx", move || now.save(&state_dir)).await?;
                    return Ok(());
                }
                record = now;
            }
            if std::time::Instant::now() >= deadline {
                return Err(Error::timeout(format!(
                    "{}: its holder did not stop within {}s; its submitted steps are cancelled",
                    record.handle(),
                    HOLDER_STOP.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(now) = load_pipeline(&state_dir, &record.id).await? {
                record = now;
            }
        }
    }

    /// Deletes the pipeline: cancels it, deletes each step's job where its scheduler can,
    /// then forgets the pipeline (its record and shared directory).
    pub async fn delete_pipeline(&self, record: &PipelineRecord) -> Result<()> {
        self.cancel_pipeline(record).await?;
        let state_dir = crate::schedulers::default_state_dir();
        let record = load_pipeline(&state_dir, &record.id)
            .await?
            .unwrap_or_else(|| record.clone());
        for step in &record.steps {
            let Phase::Submitted { handle } = &step.phase else {
                continue;
            };
            let deletable = self
                .scheduler(&step.scheduler)
                .await
                .is_ok_and(|s| s.capabilities().delete);
            if !deletable {
                continue;
            }
            match find_group(handle).await? {
                Some(group) => self.delete_group(&group).await?,
                None if self.app_status(handle).await.ok().flatten().is_some() => {
                    self.delete_app(handle).await?
                }
                None => {}
            }
        }
        let dir = record.dir(&state_dir)?;
        crate::blocking::blocking("torchx", move || {
            // A holder that saw the cancel may still write its last lines as the directory
            // goes: it is removed again, for up to a second.
            let mut tries = 0;
            loop {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => return Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries > 0 => {
                        return Ok(())
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty && tries < 50 => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(e) => {
                        return Err(Error::io(format!("removing {}", dir.display()), e));
                    }
                }
            }
        })
        .await
    }
}

impl Runner {
    /// Whether every step of `record` runs on this machine (a scheduler that cannot be made
    /// counts as not).
    pub async fn pipeline_runs_locally(&self, record: &PipelineRecord) -> bool {
        for step in &record.steps {
            match self.scheduler(&step.scheduler).await {
                Ok(s) if s.capabilities().runs_locally => {}
                _ => return false,
            }
        }
        true
    }

    /// `list`'s rows with the pipelines whose steps ran on `scheduler` as one row each (their
    /// steps' rows folded into it), newest first. The records are read on the blocking pool.
    pub async fn fold_into_pipelines(
        &self,
        scheduler: &str,
        apps: &mut Vec<crate::specs::ListAppResponse>,
    ) -> Result<()> {
        let state_dir = crate::schedulers::default_state_dir();
        let (dir, name) = (state_dir.clone(), scheduler.to_string());
        let records = crate::blocking::blocking("torchx", move || {
            Ok(PipelineRecord::list(&dir)
                .into_iter()
                .filter(|r| r.steps.iter().any(|s| s.scheduler == name))
                .map(|r| {
                    let cancelled = r.cancel_requested(&dir);
                    (r, cancelled)
                })
                .collect::<Vec<_>>())
        })
        .await?;
        for (record, cancelled) in records {
            let members: Vec<&str> = record
                .steps
                .iter()
                .filter_map(|s| s.phase.handle())
                .collect();
            let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(apps)
                .into_iter()
                .partition(|a| members.contains(&a.app_handle.as_str()));
            *apps = rest;
            let Ok(steps) = self.pipeline_steps(&record).await else {
                continue;
            };
            let state = pipeline_state(&record, &steps, cancelled);
            apps.push(crate::specs::ListAppResponse {
                app_id: record.id.clone(),
                app_handle: record.handle(),
                name: record.name.clone(),
                state,
                start_time: Some(record.created),
                end_time: state
                    .is_terminal()
                    .then(|| mine.iter().filter_map(|a| a.end_time).reduce(f64::max))
                    .flatten(),
                other_state_dir: false,
            });
        }
        crate::specs::sort_newest_first(apps);
        Ok(())
    }
}

/// The group a step's handle names, its record read on the blocking pool (`None`: an app).
async fn find_group(handle: &str) -> Result<Option<crate::group::GroupRecord>> {
    let handle = handle.to_string();
    crate::blocking::blocking("torchx", move || crate::group::GroupRecord::find(&handle)).await
}

/// A pipeline's record read on the blocking pool (it may sit on a slow or stuck disk).
async fn load_pipeline(state_dir: &std::path::Path, id: &str) -> Result<Option<PipelineRecord>> {
    let (state_dir, id) = (state_dir.to_path_buf(), id.to_string());
    crate::blocking::blocking("torchx", move || PipelineRecord::load(&state_dir, &id)).await
}
