//! The Runner's side of groups (arrays and sweeps, [`crate::group`]): dry-running, submitting
//! (capped or as one native array), waiting on, cancelling and deleting a group's tasks.

use std::path::Path;

use crate::error::{Error, Result};
use crate::group::{
    cancel_marker, counts, group_state, now, GroupDryRun, GroupPlan, GroupRecord, GroupTask,
    Submitter, CAP_POLL, GROUP_MARK, NOT_SUBMITTED_CANCELLED, SUBMITTER_STOP,
};
use crate::opts::Cfg;
use crate::runner::{ComponentOutcome, RunArgs};
use crate::scheduler::{ArrayRequest, ArrayTask, DryRunContext, DryRunInfo};
use crate::specs::group::Task;
use crate::specs::AppState;
use crate::Runner;

impl Runner {
    /// Dry-runs every task of `plan` (the component built with the task's arguments and
    /// variables), then asks the scheduler for one native submission of them all. A component
    /// that only prints its help is returned as such.
    pub async fn dryrun_group(
        &self,
        plan: &GroupPlan,
        scheduler: &str,
        cfg: &Cfg,
        run: &RunArgs,
    ) -> Result<ComponentOutcome<GroupDryRun>> {
        // The front end once per group, not per task: a component is built once per distinct
        // argument list (an array's tasks differ by their variables only: once in all; a
        // Python component's interpreter runs that often), and the workspaces are read and
        // hashed once (every task's roles start with the same ones).
        let size = plan.size;
        let mut dryruns = Vec::with_capacity(plan.tasks.len());
        let mut built: Vec<(Vec<String>, crate::specs::AppDef)> = Vec::new();
        let mut prepared: Option<crate::runner::PreparedWorkspaces> = None;
        for task in &plan.tasks {
            let args: Vec<String> = plan.args.iter().map(|a| task.substitute(a)).collect();
            let app = match built.iter().find(|(a, _)| *a == args) {
                Some((_, app)) => app.clone(),
                None => match self.build_component(&plan.component, &args).await? {
                    ComponentOutcome::Help(h) => return Ok(ComponentOutcome::Help(h)),
                    ComponentOutcome::Done(app) => {
                        built.push((args, app.clone()));
                        app
                    }
                },
            };
            let mut extra_env = run.extra_env.clone();
            extra_env.extend(task.env(size));
            let run = RunArgs {
                extra_env,
                ..run.clone()
            };
            let (info, made) = self
                .dryrun_reusing(app, scheduler, cfg, &run, prepared.as_ref())
                .await?;
            prepared.get_or_insert(made);
            dryruns.push((task.clone(), info));
        }
        self.group_dryrun_of(dryruns, plan.max_concurrent)
            .await
            .map(ComponentOutcome::Done)
    }

    /// A group's dry run from its tasks' own (made by [`dryrun`](Self::dryrun), in index
    /// order, all for one scheduler): asks the scheduler for one native submission of them.
    pub async fn group_dryrun_of(
        &self,
        tasks: Vec<(Task, DryRunInfo)>,
        max_concurrent: Option<u32>,
    ) -> Result<GroupDryRun> {
        let Some((_, first)) = tasks.first() else {
            return Err(Error::arg("a group of no tasks"));
        };
        if let Some((_, other)) = tasks.iter().find(|(_, i)| i.scheduler != first.scheduler) {
            return Err(Error::arg(format!(
                "a group's tasks go to one scheduler, not to both {} and {}",
                first.scheduler, other.scheduler
            )));
        }
        let sched = self.scheduler(&first.scheduler).await?;
        let facts = sched.dryrun_facts(&first.cfg).await?;
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
        let ctx = DryRunContext::new(self.session_name(), crate::scheduler::random_id(), cwd)
            .with_facts(facts)
            .with_after(first.after.clone());
        let array_tasks: Vec<ArrayTask<'_>> = tasks
            .iter()
            .map(|(t, info)| ArrayTask {
                index: t.index,
                app: &info.app,
            })
            .collect();
        let array =
            match sched.submit_array_dryrun(&array_tasks, max_concurrent, &first.cfg, &ctx)? {
                ArrayRequest::Native(request) => ArrayRequest::Native(DryRunInfo {
                    app: first.app.clone(),
                    scheduler: first.scheduler.clone(),
                    cfg: first.cfg.clone(),
                    request,
                    images: first.images.clone(),
                    after: first.after.clone(),
                    preflight: first.preflight.clone(),
                }),
                ArrayRequest::PerTask(why) => ArrayRequest::PerTask(why),
            };
        Ok(GroupDryRun { tasks, array })
    }

    /// Submits every task of `plan` on `scheduler` and records them as one group: as one
    /// native array when the scheduler has them, else one app per task, at most
    /// `max_concurrent` unfinished at once (waiting here for earlier ones to end), the record
    /// saved after each submission. A task that cannot be submitted is recorded with why.
    pub async fn run_group(
        &self,
        plan: &GroupPlan,
        scheduler: &str,
        cfg: &Cfg,
        run: &RunArgs,
    ) -> Result<ComponentOutcome<GroupRecord>> {
        match self.dryrun_group(plan, scheduler, cfg, run).await? {
            ComponentOutcome::Help(h) => Ok(ComponentOutcome::Help(h)),
            ComponentOutcome::Done(dryrun) => self
                .schedule_group(plan, dryrun)
                .await
                .map(ComponentOutcome::Done),
        }
    }

    /// Submits a group's dry run (see [`run_group`](Self::run_group)), from this process.
    pub async fn schedule_group(
        &self,
        plan: &GroupPlan,
        dryrun: GroupDryRun,
    ) -> Result<GroupRecord> {
        let mut group = self.new_group(plan, &dryrun)?;
        if let ArrayRequest::Native(info) = &dryrun.array {
            let handle = self.schedule(info).await?;
            let array_id = handle.app_id();
            let sched = self.scheduler(&group.scheduler).await?;
            let indexes: Vec<u32> = group.tasks.iter().map(|t| t.index).collect();
            for (task, id) in group
                .tasks
                .iter_mut()
                .zip(sched.array_task_ids(array_id, &indexes))
            {
                task.handle = Some(crate::specs::make_app_handle(
                    &group.scheduler,
                    &group.session,
                    &id,
                ));
            }
            group.native = Some(handle.into());
            save_group(&group, &crate::schedulers::default_state_dir()).await?;
            return Ok(group);
        }
        let state_dir = crate::schedulers::default_state_dir();
        let groups = state_dir.join("groups");
        crate::blocking::blocking("torchx", move || {
            crate::schedulers::create_private_dir(&groups)
        })
        .await?;
        // Held while this process submits: its liveness from any host, and no other writer.
        let _lock = try_lock(group.submitter_lock(&state_dir)?).await?;
        group.submitter = Some(Submitter::this_process());
        save_group(&group, &state_dir).await?;
        self.submit_pending(&mut group, dryrun.tasks).await?;
        Ok(group)
    }

    /// The record of a group about to be submitted: every task still to submit.
    pub fn new_group(&self, plan: &GroupPlan, dryrun: &GroupDryRun) -> Result<GroupRecord> {
        let Some((_, first)) = dryrun.tasks.first() else {
            return Err(Error::arg("a group of no tasks"));
        };
        Ok(GroupRecord {
            group_id: format!(
                "{GROUP_MARK}{}-{}",
                first.app.name,
                crate::scheduler::random_id()
            ),
            scheduler: first.scheduler.clone(),
            session: self.session_name().to_string(),
            name: first.app.name.clone(),
            created: now(),
            spec: plan.spec.clone(),
            max_concurrent: plan.max_concurrent,
            tasks: dryrun
                .tasks
                .iter()
                .map(|(t, _)| GroupTask {
                    index: t.index,
                    params: t.params.clone(),
                    handle: None,
                    error: None,
                })
                .collect(),
            argv: plan.argv.clone(),
            parent: plan.parent.clone(),
            native: None,
            submitter: None,
            size: (plan.size != dryrun.tasks.len()).then_some(plan.size),
        })
    }

    /// Submits the group's tasks that are still to submit (those of `tasks`, by index), one
    /// app each, at most `max_concurrent` unfinished at once (waiting here for earlier ones to
    /// end), saving the record after each; then records that nothing is left to submit. A
    /// task that cannot be submitted is recorded with why.
    pub async fn submit_pending(
        &self,
        group: &mut GroupRecord,
        tasks: Vec<(Task, DryRunInfo)>,
    ) -> Result<()> {
        let state_dir = crate::schedulers::default_state_dir();
        let stop = cancel_marker(&state_dir, &group.group_id)?;
        let mut unfinished: Vec<String> = Vec::new();
        // Workspace images an earlier task's submission built (or found): the tasks share
        // them, so they are checked once, not once per task.
        let mut images_ready: Vec<String> = Vec::new();
        for (task, mut info) in tasks {
            let Some(slot) = group
                .tasks
                .iter()
                .position(|t| t.index == task.index && t.is_pending())
            else {
                continue;
            };
            let room = match group.max_concurrent {
                Some(k) => self.wait_below(&mut unfinished, k as usize, &stop).await?,
                None => !exists(&stop).await,
            };
            if !room {
                // `cancel` asked: what is not submitted yet never will be.
                for t in group.tasks.iter_mut().filter(|t| t.is_pending()) {
                    t.error = Some(NOT_SUBMITTED_CANCELLED.into());
                }
                break;
            }
            info.images.retain(|i| !images_ready.contains(&i.image));
            let images: Vec<String> = info.images.iter().map(|i| i.image.clone()).collect();
            match self.schedule(&info).await {
                Ok(h) => {
                    let h = String::from(h);
                    images_ready.extend(images);
                    if exists(&stop).await {
                        // Asked while it was being submitted: it ends with the rest.
                        let _ = self.cancel_app(&h).await;
                    }
                    unfinished.push(h.clone());
                    group.tasks[slot].handle = Some(h);
                }
                Err(e) => group.tasks[slot].error = Some(e.to_string()),
            }
            // Saved after every task: a submitter that dies midway leaves what it started.
            save_group(group, &state_dir).await?;
        }
        group.submitter = None;
        save_group(group, &state_dir).await
    }

    /// Waits until fewer than `k` of the `unfinished` handles are (dropping finished ones);
    /// false, at once, when the `stop` marker appears (the group is being cancelled).
    async fn wait_below(
        &self,
        unfinished: &mut Vec<String>,
        k: usize,
        stop: &Path,
    ) -> Result<bool> {
        loop {
            if exists(stop).await {
                return Ok(false);
            }
            let mut still = Vec::with_capacity(unfinished.len());
            for h in unfinished.drain(..) {
                let state = self.app_status(&h).await?.map(|s| s.state);
                if state.is_some_and(|s| !s.is_terminal()) {
                    still.push(h);
                }
            }
            *unfinished = still;
            if unfinished.len() < k {
                return Ok(true);
            }
            tokio::time::sleep(CAP_POLL).await;
        }
    }

    /// The state of each task of `group`: PENDING for one its submitter has yet to submit,
    /// FAILED for one never submitted, UNKNOWN for one its scheduler no longer knows. One
    /// `describe_many` of the scheduler for them all.
    pub async fn group_states(&self, group: &GroupRecord) -> Result<Vec<AppState>> {
        let sched = self.scheduler(&group.scheduler).await?;
        let mut ids = Vec::with_capacity(group.tasks.len());
        for h in group.tasks.iter().filter_map(|t| t.handle.as_deref()) {
            ids.push(crate::specs::parse_app_handle(h)?.app_id().to_string());
        }
        let mut described = sched.describe_many(&ids).await?.into_iter();
        let submitting = submitting(group).await?;
        Ok(group
            .tasks
            .iter()
            .map(|t| match t.unsubmitted_state(submitting) {
                Some(state) => state,
                None => described
                    .next()
                    .flatten()
                    .map_or(AppState::Unknown, |d| d.state),
            })
            .collect())
    }

    /// Waits until every task of `group` is over; their final states.
    pub async fn wait_group(&self, group: &GroupRecord) -> Result<Vec<AppState>> {
        self.wait_group_with(group, |_, _| {}).await
    }

    /// [`Runner::wait_group`], calling `progress` with the group as recorded and its tasks'
    /// states after every look (a background submitter adds tasks as it goes): what a
    /// progress display needs. Returns the final states; the last call saw them too.
    pub async fn wait_group_with(
        &self,
        group: &GroupRecord,
        mut progress: impl FnMut(&GroupRecord, &[AppState]),
    ) -> Result<Vec<AppState>> {
        let state_dir = crate::schedulers::default_state_dir();
        let mut group = group.clone();
        loop {
            if group.submitter.is_some() {
                if let Some(now) = load_group(&state_dir, &group.group_id).await? {
                    group = now;
                }
            }
            let states = self.group_states(&group).await?;
            progress(&group, &states);
            if states
                .iter()
                .all(|s| s.is_terminal() || *s == AppState::Unknown)
            {
                return Ok(states);
            }
            tokio::time::sleep(CAP_POLL).await;
        }
    }

    /// The group as one status: its state from its tasks', their counts as the message.
    pub async fn group_status(&self, group: &GroupRecord) -> Result<crate::specs::AppStatus> {
        let states = self.group_states(group).await?;
        let mut status = crate::specs::AppStatus::new(group_state(&states));
        let counted: Vec<String> = counts(&states)
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        status.msg = format!("{} tasks: {}", states.len(), counted.join(", "));
        Ok(status)
    }

    /// Cancels every task of `group` that is not over (a native array in one request), at
    /// once and all together. A submitter still at work is told to stop (a marker it checks
    /// before and after each submission and while it waits for room under the cap); the tasks
    /// it submits meanwhile are cancelled as they appear in the record, and those it never
    /// submits end CANCELLED. Returns within a few seconds (3 for the submitter) plus the tasks' own
    /// cancels, whatever the submitter does.
    pub async fn cancel_group(&self, group: &GroupRecord) -> Result<()> {
        if let Some(array) = &group.native {
            return self.cancel_app(array).await;
        }
        let state_dir = crate::schedulers::default_state_dir();
        let mut group = group.clone();
        let mut cancelled: Vec<String> = Vec::new();
        if submitting(&group).await? {
            let marker = cancel_marker(&state_dir, &group.group_id)?;
            crate::blocking::blocking("torchx", move || {
                std::fs::write(&marker, b"")
                    .map_err(|e| Error::io(format!("writing {}", marker.display()), e))
            })
            .await?;
            let deadline = std::time::Instant::now() + SUBMITTER_STOP;
            while submitting(&group).await? && std::time::Instant::now() < deadline {
                self.cancel_tasks(&group, &mut cancelled).await?;
                tokio::time::sleep(CAP_POLL).await;
                if let Some(now) = load_group(&state_dir, &group.group_id).await? {
                    group = now;
                }
            }
        }
        if group.tasks.iter().any(GroupTask::is_pending) {
            // One writer: the submitter while it holds its lock. One that has not stopped yet
            // finds the marker before it submits more, and records the rest as cancelled.
            if let Some(_lock) = try_lock(group.submitter_lock(&state_dir)?).await? {
                if let Some(now) = load_group(&state_dir, &group.group_id).await? {
                    group = now;
                }
                for t in group.tasks.iter_mut().filter(|t| t.is_pending()) {
                    t.error = Some(NOT_SUBMITTED_CANCELLED.into());
                }
                group.submitter = None;
                save_group(&group, &state_dir).await?;
            }
        }
        self.cancel_tasks(&group, &mut cancelled).await
    }

    /// Cancels, concurrently, the tasks of `group` that run and are not in `cancelled` yet
    /// (which they then join).
    async fn cancel_tasks(&self, group: &GroupRecord, cancelled: &mut Vec<String>) -> Result<()> {
        let todo: Vec<&String> = group
            .tasks
            .iter()
            .filter_map(|t| t.handle.as_ref())
            .filter(|h| !cancelled.contains(h))
            .collect();
        let results = futures_util::future::join_all(todo.iter().map(|&h| async move {
            let status = self.app_status(h).await?;
            if status.is_some_and(|s| !s.state.is_terminal()) {
                self.cancel_app(h).await?;
            }
            Ok::<(), Error>(())
        }))
        .await;
        cancelled.extend(todo.into_iter().cloned());
        results.into_iter().collect()
    }

    /// Deletes every task of `group` its scheduler still knows (a native array as one), then
    /// the group's record.
    pub async fn delete_group(&self, group: &GroupRecord) -> Result<()> {
        let mut group = group.clone();
        if submitting(&group).await? {
            self.cancel_group(&group).await?;
            let state_dir = crate::schedulers::default_state_dir();
            if let Some(now) = load_group(&state_dir, &group.group_id).await? {
                group = now;
            }
        }
        let native = group.native.iter();
        let each = group.tasks.iter().filter_map(|t| t.handle.as_ref());
        let apps: Vec<&String> = if group.native.is_some() {
            native.collect()
        } else {
            each.collect()
        };
        for h in apps {
            if self.app_status(h).await?.is_some() {
                self.delete_app(h).await?;
            }
        }
        group.remove(&crate::schedulers::default_state_dir())
    }
}

/// A group's record read on the blocking pool (it may sit on a slow or stuck disk).
async fn load_group(state_dir: &Path, group_id: &str) -> Result<Option<GroupRecord>> {
    let (state_dir, group_id) = (state_dir.to_path_buf(), group_id.to_string());
    crate::blocking::blocking("torchx", move || GroupRecord::load(&state_dir, &group_id)).await
}

/// A group's record written on the blocking pool.
async fn save_group(group: &GroupRecord, state_dir: &Path) -> Result<()> {
    let (group, state_dir) = (group.clone(), state_dir.to_path_buf());
    crate::blocking::blocking("torchx", move || group.save(&state_dir)).await
}

/// Whether `group`'s submitter is at work (its lock may sit on a shared disk).
async fn submitting(group: &GroupRecord) -> Result<bool> {
    let submitter = group.submitter.clone();
    let lock = group.submitter_lock(&crate::schedulers::default_state_dir())?;
    crate::blocking::blocking("torchx", move || {
        Ok(submitter.is_some_and(|s| s.alive(&lock)))
    })
    .await
}

/// Whether the marker `path` is there.
async fn exists(path: &Path) -> bool {
    let path = path.to_path_buf();
    crate::blocking::blocking("torchx", move || Ok(path.exists()))
        .await
        .unwrap_or(false)
}

/// The exclusive lock on `path` if no other process holds it ([`crate::durable::try_lock`]).
async fn try_lock(path: std::path::PathBuf) -> Result<Option<std::fs::File>> {
    crate::blocking::blocking("torchx", move || crate::durable::try_lock(&path)).await
}
