//! The typed side of a builtin scheduler ([`Backend`]) and the one adapter that makes every
//! backend a [`Scheduler`] (OpenDAL's `Access`/`AccessDyn`): the adapter names the backend,
//! parses its options, boxes and downcasts its request and refuses a workspace it would not
//! ship, so a backend writes only what is its own.

use std::any::Any;
use std::fmt::Debug;

use async_trait::async_trait;

use super::{
    ArrayRequest, ArrayTask, Capabilities, DryRunContext, DryRunInfo, Facts, HangStacks, LogLines,
    LogQuery, NativeRequest, PlanReport, Replica, Scheduler, WorkspaceSupport,
};
use crate::error::{Error, Result};
use crate::opts::{Cfg, RunOpts, TypedOpts};
use crate::specs::{AppDef, DescribeAppResponse, ListAppResponse};

/// A scheduler backend with its own option and request types. Implementing it makes the type a
/// [`Scheduler`]; the contract is the same (see there).
#[async_trait]
pub trait Backend: Debug + Send + Sync + 'static {
    /// The registry name (`local_cwd`, ...).
    const NAME: &'static str;
    /// What it supports.
    const CAPABILITIES: Capabilities;
    /// Its run options.
    type Opts: TypedOpts + Send + Sync;
    /// Its native request, made by [`render`](Self::render) and sent by
    /// [`submit`](Self::submit).
    type Request: NativeRequest;
    /// What [`dryrun_facts`](Self::dryrun_facts) probes for [`render`](Self::render) (`()`
    /// for a backend that needs nothing).
    type Facts: Send + Sync + 'static;

    /// Facts about the backend that [`render`](Self::render) needs, probed with I/O (see
    /// [`Scheduler::dryrun_facts`]); blocking work goes to the blocking pool. Default: none.
    async fn dryrun_facts(&self, opts: &Self::Opts) -> Result<Option<Self::Facts>> {
        let _ = opts;
        Ok(None)
    }
    /// Renders the native request with the facts probed for it (`None`: not probed, e.g. a
    /// dry run made without the backend). Pure: no I/O, deterministic given its inputs.
    fn render(
        &self,
        app: &AppDef,
        opts: &Self::Opts,
        ctx: &DryRunContext,
        facts: Option<&Self::Facts>,
    ) -> Result<Self::Request>;
    /// Renders an array's tasks as one request (see [`Scheduler::submit_array_dryrun`]).
    /// Default: one submission per task.
    fn render_array(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        opts: &Self::Opts,
        ctx: &DryRunContext,
        facts: Option<&Self::Facts>,
    ) -> Result<ArrayRequest<Self::Request>> {
        let _ = (tasks, max_concurrent, opts, ctx, facts);
        Ok(ArrayRequest::PerTask(format!(
            "{} has no native job arrays: torchx submits each task as an app, at most \
             max_concurrent unfinished at once",
            Self::NAME
        )))
    }
    /// As [`Scheduler::array_task_ids`].
    fn array_task_ids(&self, array_id: &str, indexes: &[u32]) -> Vec<String> {
        indexes.iter().map(|i| format!("{array_id}_{i}")).collect()
    }
    /// As [`Scheduler::plan`], for a rendered request. Default: nothing to tell.
    async fn plan(&self, request: &Self::Request, info: &DryRunInfo) -> Result<PlanReport> {
        let _ = (request, info);
        Ok(PlanReport::default())
    }
    /// Submits a rendered request (`info` has the app and options it came from); returns the
    /// app id.
    async fn submit(&self, request: &Self::Request, info: &DryRunInfo) -> Result<String>;
    /// As [`Scheduler::describe`].
    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>>;
    /// As [`Scheduler::describe_many`].
    async fn describe_many(&self, app_ids: &[String]) -> Result<Vec<Option<DescribeAppResponse>>> {
        let mut out = Vec::with_capacity(app_ids.len());
        for id in app_ids {
            out.push(self.describe(id).await?);
        }
        Ok(out)
    }
    /// As [`Scheduler::describe_native`].
    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let _ = app_id;
        Ok(None)
    }
    /// As [`Scheduler::hang_stacks`]. By default, for a scheduler with a hang watch, what the
    /// watch wrote in the replicas' logs (a scheduler that keeps them elsewhere says where).
    async fn hang_stacks(&self, app_id: &str, attempt: Option<u32>) -> Result<Vec<HangStacks>> {
        if Self::CAPABILITIES.hang_watch {
            return super::hang_stacks::from_logs(self, app_id, attempt).await;
        }
        Err(Error::unsupported(Self::NAME, "hang stacks (log --stacks)"))
    }
    /// As [`Scheduler::workspace_support`].
    fn workspace_support(&self, cfg: &Cfg) -> WorkspaceSupport {
        let _ = cfg;
        Self::CAPABILITIES.workspace
    }
    /// As [`Scheduler::list`].
    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        Err(Error::unsupported(Self::NAME, "list"))
    }
    /// As [`Scheduler::cancel`].
    async fn cancel(&self, app_id: &str) -> Result<()>;
    /// As [`Scheduler::cancel_pending`].
    async fn cancel_pending(&self, app_id: &str) -> Result<bool>
    where
        Self: Sized,
    {
        super::cancel_if_pending(self, app_id).await
    }
    /// As [`Scheduler::delete`].
    async fn delete(&self, app_id: &str) -> Result<()> {
        let _ = app_id;
        Err(Error::unsupported(Self::NAME, "delete"))
    }
    /// As [`Scheduler::log_iter`].
    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let _ = (replica, query);
        Err(Error::unsupported(Self::NAME, "logs"))
    }
    /// Releases resources.
    async fn close(&self) {}
}

/// Downcasts a dry-run request to the scheduler's own request type.
pub(crate) fn downcast_request<'a, T: 'static>(
    info: &'a DryRunInfo,
    scheduler: &str,
) -> Result<&'a T> {
    let request: &dyn Any = info.request.as_ref();
    request.downcast_ref::<T>().ok_or_else(|| {
        Error::backend(
            scheduler,
            format!(
                "dry-run info was made by scheduler `{}`, not `{scheduler}`",
                info.scheduler
            ),
        )
    })
}

#[async_trait]
impl<B: Backend> Scheduler for B {
    fn name(&self) -> &str {
        B::NAME
    }

    fn capabilities(&self) -> Capabilities {
        B::CAPABILITIES
    }

    fn run_opts(&self) -> RunOpts {
        B::Opts::schema()
    }

    async fn dryrun_facts(&self, cfg: &Cfg) -> Result<Facts> {
        let probed = Backend::dryrun_facts(self, &B::Opts::from_cfg(cfg)?).await?;
        Ok(probed.map(Facts::new).unwrap_or_default())
    }

    fn submit_dryrun(
        &self,
        app: &AppDef,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<Box<dyn NativeRequest>> {
        super::check_recovery(B::NAME, B::CAPABILITIES, app)?;
        super::check_hang_watch(B::NAME, B::CAPABILITIES, app)?;
        super::check_after(B::NAME, B::CAPABILITIES, ctx)?;
        let facts = ctx.facts.get::<B::Facts>();
        let request = self.render(app, &B::Opts::from_cfg(cfg)?, ctx, facts)?;
        Ok(Box::new(request))
    }

    fn submit_array_dryrun(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<ArrayRequest> {
        Ok(
            match self.render_array(
                tasks,
                max_concurrent,
                &B::Opts::from_cfg(cfg)?,
                ctx,
                ctx.facts.get::<B::Facts>(),
            )? {
                ArrayRequest::Native(r) => ArrayRequest::Native(Box::new(r)),
                ArrayRequest::PerTask(why) => ArrayRequest::PerTask(why),
            },
        )
    }

    fn array_task_ids(&self, array_id: &str, indexes: &[u32]) -> Vec<String> {
        Backend::array_task_ids(self, array_id, indexes)
    }

    async fn plan(&self, info: &DryRunInfo) -> Result<PlanReport> {
        let request = downcast_request::<B::Request>(info, B::NAME)?;
        Backend::plan(self, request, info).await
    }

    async fn schedule(&self, info: &DryRunInfo) -> Result<String> {
        let request = downcast_request::<B::Request>(info, B::NAME)?;
        // Backends that run from a directory ship it themselves; image workspaces are built by
        // the Runner, so a role still carrying one was handed over directly.
        if !matches!(
            B::CAPABILITIES.workspace,
            WorkspaceSupport::CurrentDir | WorkspaceSupport::Directory
        ) {
            reject_workspaces(B::NAME, &info.app)?;
        }
        self.submit(request, info).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        Backend::describe(self, app_id).await
    }

    async fn describe_many(&self, app_ids: &[String]) -> Result<Vec<Option<DescribeAppResponse>>> {
        Backend::describe_many(self, app_ids).await
    }

    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        Backend::describe_native(self, app_id).await
    }

    async fn hang_stacks(&self, app_id: &str, attempt: Option<u32>) -> Result<Vec<HangStacks>> {
        Backend::hang_stacks(self, app_id, attempt).await
    }

    fn workspace_support(&self, cfg: &Cfg) -> WorkspaceSupport {
        Backend::workspace_support(self, cfg)
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        Backend::list(self).await
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        Backend::cancel(self, app_id).await
    }

    async fn cancel_pending(&self, app_id: &str) -> Result<bool> {
        Backend::cancel_pending(self, app_id).await
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        Backend::delete(self, app_id).await
    }

    async fn log_iter(
        &self,
        app_id: &str,
        role: &str,
        k: u32,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        let replica = Replica { app_id, role, k };
        Backend::log_iter(self, replica, query).await
    }

    async fn close(&self) {
        Backend::close(self).await
    }
}

/// Workspace images are built by the [`Runner`](crate::Runner) (its dry run plans them and
/// points the roles at them; `schedule` builds and pushes them): a role that still has a
/// workspace here was handed to the scheduler directly, and would run without it.
fn reject_workspaces(scheduler: &str, app: &AppDef) -> Result<()> {
    match app.roles.iter().find(|r| r.workspace.is_some()) {
        Some(r) => Err(Error::unsupported(
            scheduler,
            format!(
                "role `{}`'s workspace when called directly: submit through the Runner, which \
                 builds workspace images (Runner::dryrun, then Runner::schedule)",
                r.name
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::{Role, Workspace};

    fn dry_run(scheduler: &dyn Scheduler, app: AppDef) -> DryRunInfo {
        let cfg = scheduler.run_opts().resolve(&Cfg::new()).unwrap();
        let ctx = DryRunContext::new("s", "u", "/work");
        DryRunInfo {
            request: scheduler.submit_dryrun(&app, &cfg, &ctx).unwrap(),
            scheduler: scheduler.name().to_string(),
            app,
            cfg,
            images: Vec::new(),
            after: Vec::new(),
            preflight: Vec::new(),
        }
    }

    fn app() -> AppDef {
        AppDef::new("a", vec![Role::new("main", "img").with_entrypoint("true")])
    }

    /// Nothing reaches the backend (no `bsub` runs) when the adapter refuses.
    #[tokio::test]
    async fn a_role_still_carrying_a_workspace_is_refused() {
        let lsf = crate::schedulers::lsf::create().unwrap();
        let mut info = dry_run(lsf.as_ref(), app());
        info.app.roles[0].workspace = Some(Workspace::parse("/tmp").unwrap());
        let err = lsf.schedule(&info).await.unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Unsupported, "{err}");
        assert!(
            err.to_string()
                .contains("role `main`'s workspace when called directly"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn another_schedulers_request_is_refused() {
        let lsf = crate::schedulers::lsf::create().unwrap();
        let slurm = crate::schedulers::slurm::create().unwrap();
        let info = dry_run(slurm.as_ref(), app());
        let err = lsf.schedule(&info).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("made by scheduler `slurm`, not `lsf`"),
            "{err}"
        );
    }
}
