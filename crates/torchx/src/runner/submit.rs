//! The Runner's side of submitting: dry runs (validation, TorchX's env vars, tracker
//! variables, workspaces, pre-flight, the native request), components built into apps, and
//! scheduling.

use super::{ComponentOutcome, RunArgs};
use crate::error::{Error, ErrorKind, Remedy, Result};
use crate::opts::Cfg;
use crate::scheduler::{random_id, DryRunContext, DryRunInfo};
use crate::specs::{AppDef, AppHandle};
use crate::tracker;
use crate::Runner;

impl Runner {
    fn tracker_env(&self) -> Result<Vec<(String, String)>> {
        let trackers = tracker::configured(self.config());
        for (name, _) in &trackers {
            // A Python tracker is named by its module (`pkg.module:factory`), which only the
            // job's runtime can load; any other name must be one this torchx has.
            let module_path = name.contains(['.', ':']);
            if !module_path && !self.trackers.names().any(|n| n == name) {
                let known: Vec<&str> = self.trackers.names().collect();
                return Err(Error::config(format!(
                    "tracker `{name}` ([torchx:tracker] or $TORCHX_TRACKERS) is not a known \
                     tracker: this torchx has {}; a Python tracker is named by its module \
                     (`pkg.module:factory`)",
                    known.join(", "),
                ))
                .suggesting(name, known.iter().copied()));
            }
        }
        let mut env = Vec::new();
        if !trackers.is_empty() {
            let names: Vec<&str> = trackers.iter().map(|t| t.0.as_str()).collect();
            env.push((tracker::ENV_TRACKERS.into(), names.join(",")));
        }
        for (name, config) in trackers {
            if let Some(c) = config {
                env.push((tracker::config_env_var(&name), c));
            }
        }
        Ok(env)
    }

    /// Records `parent` as the source of the run `handle` in every configured tracker this
    /// process can build, so lineage holds even for jobs that never call a tracker. The job is
    /// already submitted: failures are warnings.
    async fn record_parent(&self, handle: &str, parent: &str) {
        let trackers = self.trackers.clone();
        let configured = tracker::configured(self.config());
        let (run, parent) = (handle.to_string(), parent.to_string());
        // A tracker writes where its config says (files, a remote store): off the executor.
        let results = crate::blocking::blocking("tracker", move || {
            Ok(configured
                .into_iter()
                .map(|(name, config)| {
                    let added = trackers
                        .build(&name, config.as_deref())
                        .and_then(|t| t.add_source(&run, &parent, None));
                    (name, added)
                })
                .collect::<Vec<_>>())
        })
        .await;
        let results = match results {
            Ok(results) => results,
            Err(e) => return log::warn!("could not record the parent run of {handle}: {e}"),
        };
        for (name, result) in results {
            match result {
                Ok(()) => {}
                // A tracker only the job's own runtime knows (e.g. a Python one).
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    log::debug!(
                        "tracker `{name}` is not built into torchx; the job records its parent"
                    )
                }
                Err(e) => log::warn!(
                    "could not record the parent run of {handle} in tracker `{name}`: {e}"
                ),
            }
        }
    }

    /// Validates `app`, injects TorchX's env vars (`TORCHX_JOB_ID`, session and tracker vars),
    /// resolves `cfg` and renders the native request. No job is submitted.
    ///
    /// Probing the backend (its dry-run facts) and hashing workspaces run on tokio's blocking
    /// pool, so this never stalls the executor it is awaited on.
    pub async fn dryrun(
        &self,
        app: AppDef,
        scheduler: &str,
        cfg: &Cfg,
        args: &RunArgs,
    ) -> Result<DryRunInfo> {
        Ok(self
            .dryrun_reusing(app, scheduler, cfg, args, None)
            .await?
            .0)
    }

    /// [`dryrun`](Self::dryrun), and what its workspace step made of the roles; with `like`,
    /// that of an app whose roles had the same workspaces and images (another task of a group)
    /// is taken as it is instead of reading the workspaces again.
    pub(crate) async fn dryrun_reusing(
        &self,
        mut app: AppDef,
        scheduler: &str,
        cfg: &Cfg,
        args: &RunArgs,
        like: Option<&PreparedWorkspaces>,
    ) -> Result<(DryRunInfo, PreparedWorkspaces)> {
        for role in &mut app.roles {
            args.role_defaults.apply(role);
            role.forward_checkpoint_signal_through_torchrun();
            role.env
                .extend(args.extra_env.iter().map(|(k, v)| (k.clone(), v.clone())));
            role.mounts.extend(args.extra_mounts.iter().cloned());
        }
        app.validate()?;
        crate::specs::check_path_component("session name", &self.session_name)?;
        let sched = self.scheduler(scheduler).await?;
        let resolved = sched.run_opts().resolve(cfg)?;
        let parent = std::env::var(tracker::ENV_PARENT_RUN_ID)
            .ok()
            .or_else(|| args.parent_run_id.clone());
        let trackers = self.tracker_env()?;
        for role in &mut app.roles {
            role.env.insert(
                tracker::ENV_JOB_ID.into(),
                format!("{scheduler}://{}/${{app_id}}", self.session_name),
            );
            role.env
                .insert("TORCHX_INTERNAL_SESSION_ID".into(), self.session_id.clone());
            if let Some(p) = &parent {
                role.env
                    .insert(tracker::ENV_PARENT_RUN_ID.into(), p.clone());
            }
            for (k, v) in &trackers {
                role.env.insert(k.clone(), v.clone());
            }
            if role.workspace.is_none() {
                role.workspace.clone_from(&args.workspace);
            }
        }
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
        let support = sched.workspace_support(&resolved);
        let before = PreparedWorkspaces::roles(&app);
        let (app, images, cwd) = match like.and_then(|p| p.apply(&mut app)) {
            Some(images) => (app, images, cwd),
            // Nothing to read or build: no hop to the blocking pool.
            None if app.roles.iter().all(|r| r.workspace.is_none()) => (app, Vec::new(), cwd),
            None => {
                let (name, cfg) = (scheduler.to_string(), resolved.clone());
                crate::blocking::blocking(scheduler, move || {
                    let images = crate::workspace::prepare(&mut app, &name, support, &cfg, &cwd)?;
                    Ok((app, images, cwd))
                })
                .await?
            }
        };
        // A dependency that does not exist could never be satisfied: said now, not after the
        // job waited for it. A group's tasks share their dependencies: asked about once, with
        // its first task (the only one without a `like`).
        let unchecked = if like.is_none() { &args.after[..] } else { &[] };
        for dep in unchecked {
            if self.status(&dep.handle).await?.is_none() {
                return Err(Error::app_not_found(
                    &dep.handle,
                    " (an --after dependency)",
                ));
            }
        }
        let preflight = if args.skip_preflight {
            Vec::new()
        } else {
            preflight(scheduler, support, &app, &cwd)
        };
        let facts = sched.dryrun_facts(&resolved).await?;
        let ctx = DryRunContext::new(&self.session_name, random_id(), cwd)
            .with_facts(facts)
            .with_after(args.after.clone());
        let (app, request) = if sched.dryrun_is_a_round_trip() {
            let (sched, cfg) = (std::sync::Arc::clone(&sched), resolved.clone());
            crate::blocking::blocking(scheduler, move || {
                let request = sched.submit_dryrun(&app, &cfg, &ctx)?;
                Ok((app, request))
            })
            .await?
        } else {
            let request = sched.submit_dryrun(&app, &resolved, &ctx)?;
            (app, request)
        };
        let prepared = PreparedWorkspaces {
            before,
            after: app.roles.iter().map(|r| r.image.clone()).collect(),
            images: images.clone(),
        };
        let info = DryRunInfo {
            app,
            scheduler: scheduler.to_string(),
            cfg: resolved,
            request,
            images,
            after: args.after.clone(),
            preflight,
        };
        Ok((info, prepared))
    }

    /// Builds a component from command-line style arguments (applying `[component:<name>]`
    /// defaults), or returns its help. Reading component files and a Python component's
    /// interpreter run on tokio's blocking pool; a builtin that needs neither is built here.
    pub async fn build_component(
        &self,
        component: &str,
        args: &[String],
    ) -> Result<ComponentOutcome<AppDef>> {
        if let Some(built) = self.catalog.build_in_memory(component, args) {
            return built;
        }
        let catalog = std::sync::Arc::clone(&self.catalog);
        let (component, args) = (component.to_string(), args.to_vec());
        crate::blocking::blocking("torchx", move || catalog.build(&component, &args)).await
    }

    /// [`build_component`](Self::build_component) then [`dryrun`](Self::dryrun).
    pub async fn dryrun_component(
        &self,
        component: &str,
        args: &[String],
        scheduler: &str,
        cfg: &Cfg,
        run: &RunArgs,
    ) -> Result<ComponentOutcome<DryRunInfo>> {
        Ok(match self.build_component(component, args).await? {
            ComponentOutcome::Done(app) => {
                ComponentOutcome::Done(self.dryrun(app, scheduler, cfg, run).await?)
            }
            ComponentOutcome::Help(h) => ComponentOutcome::Help(h),
        })
    }

    /// Submits a dry-run result; returns the app handle. A job the pre-flight checks found
    /// would fail as it starts is refused (`InvalidArgument`), nothing submitted.
    pub async fn schedule(&self, info: &DryRunInfo) -> Result<AppHandle> {
        if let Some(problem) = info.preflight.first() {
            return Err(Error::arg(format!(
                "pre-flight: {problem}: the job would fail as it starts"
            ))
            .with_remedy(Remedy::SkipPreflight));
        }
        let sched = self.scheduler(&info.scheduler).await?;
        crate::workspace::build_images(&info.images, &info.scheduler, &info.cfg).await?;
        let app_id = sched.schedule(info).await?;
        let handle = AppHandle::new(&info.scheduler, &self.session_name, &app_id);
        let parent = info
            .app
            .roles
            .first()
            .and_then(|r| r.env.get(tracker::ENV_PARENT_RUN_ID));
        if let Some(p) = parent.filter(|p| !p.is_empty()) {
            self.record_parent(handle.as_str(), p).await;
        }
        Ok(handle)
    }

    /// Dry-runs and schedules `app`; returns the handle.
    pub async fn run(
        &self,
        app: AppDef,
        scheduler: &str,
        cfg: &Cfg,
        args: &RunArgs,
    ) -> Result<AppHandle> {
        let info = self.dryrun(app, scheduler, cfg, args).await?;
        self.schedule(&info).await
    }

    /// Builds, dry-runs and schedules a component; returns the handle.
    pub async fn run_component(
        &self,
        component: &str,
        args: &[String],
        scheduler: &str,
        cfg: &Cfg,
        run: &RunArgs,
    ) -> Result<ComponentOutcome<AppHandle>> {
        Ok(
            match self
                .dryrun_component(component, args, scheduler, cfg, run)
                .await?
            {
                ComponentOutcome::Done(info) => ComponentOutcome::Done(self.schedule(&info).await?),
                ComponentOutcome::Help(h) => ComponentOutcome::Help(h),
            },
        )
    }
}

/// What the workspace step made of one app's roles, to reuse for an app whose roles start the
/// same (the tasks of a group): a workspace is read and hashed once per group, not per task.
#[derive(Debug, Clone)]
pub(crate) struct PreparedWorkspaces {
    /// Each role's name, workspace and image before the step.
    before: Vec<(String, Option<crate::specs::Workspace>, String)>,
    /// Each role's image after it.
    after: Vec<String>,
    images: Vec<crate::specs::WorkspaceImage>,
}

impl PreparedWorkspaces {
    fn roles(app: &AppDef) -> Vec<(String, Option<crate::specs::Workspace>, String)> {
        app.roles
            .iter()
            .map(|r| (r.name.clone(), r.workspace.clone(), r.image.clone()))
            .collect()
    }

    /// Makes `app`'s roles what the step made of the same ones; their images to build, or
    /// `None` (nothing changed) when `app`'s roles are not the same.
    fn apply(&self, app: &mut AppDef) -> Option<Vec<crate::specs::WorkspaceImage>> {
        if Self::roles(app) != self.before {
            return None;
        }
        for (role, image) in app.roles.iter_mut().zip(&self.after) {
            if role.workspace.take().is_some() {
                role.image.clone_from(image);
            }
        }
        Some(self.images.clone())
    }
}

/// The pre-flight checks of a job whose commands run from local files: in the current
/// directory (local_cwd), or in a copy of the workspace or in place (slurm).
fn preflight(
    scheduler: &str,
    support: crate::scheduler::WorkspaceSupport,
    app: &AppDef,
    cwd: &std::path::Path,
) -> Vec<String> {
    use crate::scheduler::WorkspaceSupport;
    if !matches!(
        support,
        WorkspaceSupport::CurrentDir | WorkspaceSupport::Directory
    ) {
        return Vec::new();
    }
    // A workspace copied to the root of the job's directory is where the job runs.
    let dir = app
        .roles
        .iter()
        .find_map(|r| r.workspace.as_ref())
        .and_then(|w| w.projects.iter().find(|(_, dst)| dst.is_empty()))
        .map_or_else(|| cwd.to_path_buf(), |(src, _)| cwd.join(src));
    crate::preflight::check_files(scheduler, app, &dir)
}
