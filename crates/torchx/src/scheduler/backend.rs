//! The typed side of a builtin scheduler ([`Backend`]) and the one adapter that makes every
//! backend a [`Scheduler`] (OpenDAL's `Access`/`AccessDyn`): the adapter names the backend,
//! parses its options, boxes and downcasts its request and refuses a workspace it would not
//! ship, so a backend writes only what is its own.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;

use async_trait::async_trait;

use super::{
    Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery, NativeRequest, Scheduler,
    WorkspaceSupport,
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
    type Opts: TypedOpts;
    /// Its native request, made by [`render`](Self::render) and sent by
    /// [`submit`](Self::submit).
    type Request: NativeRequest;

    /// Facts about the backend that [`render`](Self::render) needs, probed with I/O (see
    /// [`Scheduler::dryrun_facts`]). Default: none.
    fn dryrun_facts(&self, opts: &Self::Opts) -> Result<BTreeMap<String, String>> {
        let _ = opts;
        Ok(BTreeMap::new())
    }
    /// Renders the native request. Pure: no I/O, deterministic given its inputs.
    fn render(&self, app: &AppDef, opts: &Self::Opts, ctx: &DryRunContext)
        -> Result<Self::Request>;
    /// Submits a rendered request (`info` has the app and options it came from); returns the
    /// app id.
    async fn submit(&self, request: &Self::Request, info: &DryRunInfo) -> Result<String>;
    /// As [`Scheduler::describe`].
    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>>;
    /// As [`Scheduler::list`].
    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        Err(Error::unsupported(Self::NAME, "list"))
    }
    /// As [`Scheduler::cancel`].
    async fn cancel(&self, app_id: &str) -> Result<()>;
    /// As [`Scheduler::delete`].
    async fn delete(&self, app_id: &str) -> Result<()> {
        let _ = app_id;
        Err(Error::unsupported(Self::NAME, "delete"))
    }
    /// As [`Scheduler::log_iter`].
    async fn log_iter(
        &self,
        app_id: &str,
        role: &str,
        k: u32,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        let _ = (app_id, role, k, query);
        Err(Error::unsupported(Self::NAME, "logs"))
    }
    /// Releases resources.
    async fn close(&self) {}
}

/// Downcasts a dry-run request to the scheduler's own request type.
pub fn downcast_request<'a, T: 'static>(info: &'a DryRunInfo, scheduler: &str) -> Result<&'a T> {
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

    fn dryrun_facts(&self, cfg: &Cfg) -> Result<BTreeMap<String, String>> {
        Backend::dryrun_facts(self, &B::Opts::from_cfg(cfg)?)
    }

    fn submit_dryrun(
        &self,
        app: &AppDef,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<Box<dyn NativeRequest>> {
        let request = self.render(app, &B::Opts::from_cfg(cfg)?, ctx)?;
        Ok(Box::new(request))
    }

    async fn schedule(&self, info: &DryRunInfo) -> Result<String> {
        let request = downcast_request::<B::Request>(info, B::NAME)?;
        // Backends that run from a directory ship it themselves; image workspaces are built by
        // the Runner, so a role still carrying one was handed over directly.
        if !matches!(
            B::CAPABILITIES.workspace,
            WorkspaceSupport::CurrentDir | WorkspaceSupport::Directory
        ) {
            crate::schedulers::reject_workspaces(B::NAME, &info.app)?;
        }
        self.submit(request, info).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        Backend::describe(self, app_id).await
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        Backend::list(self).await
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        Backend::cancel(self, app_id).await
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
        Backend::log_iter(self, app_id, role, k, query).await
    }

    async fn close(&self) {
        Backend::close(self).await
    }
}
