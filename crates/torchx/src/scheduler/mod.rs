//! API boundary: the [`Scheduler`] trait every backend implements, its [`Capabilities`], log
//! queries and the scheduler registry.

mod backend;
mod follow;
pub(crate) mod hang_stacks;
mod ids;
mod plan;
mod registry;

use std::any::Any;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use regex::Regex;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::opts::{Cfg, RunOpts};
use crate::specs::{
    AppDef, AppState, DescribeAppResponse, ListAppResponse, Role, Stream, WorkspaceImage,
};

pub(crate) use backend::downcast_request;
pub use backend::Backend;
#[cfg(feature = "docker")]
pub(crate) use follow::LineBuffer;
pub(crate) use follow::{follow_file, Follow, FollowedFile, Step, Take};
pub use ids::random_id;
pub use plan::{CheckOutcome, PlanCheck, PlanReport, Verdict as PlanVerdict};
pub use registry::{Registry, SchedulerFactory, SchedulerSource};

/// What a scheduler supports. Operations it does not support return [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported), and
/// the conformance suite picks its checks from these flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Capabilities {
    /// `describe` reports per-replica states.
    pub describe_replicas: bool,
    /// `list` works.
    pub list: bool,
    /// `cancel` works.
    pub cancel: bool,
    /// `delete` works.
    pub delete: bool,
    /// `log_iter` works.
    pub logs: bool,
    /// Logs can be read per stream (stdout/stderr) as well as combined.
    pub log_streams: bool,
    /// Logs honour since/until.
    pub log_since_until: bool,
    /// Logs can be followed until the app ends.
    pub log_tail: bool,
    /// How role workspaces are shipped.
    pub workspace: WorkspaceSupport,
    /// Mounts are honoured.
    pub mounts: bool,
    /// `max_retries` is honoured.
    pub retries: bool,
    /// Apps with several roles work.
    pub multi_role: bool,
    /// The recovery options (`time_limit`, `checkpoint_signal`, `requeue_exit_code`,
    /// `max_requeues`) are honoured; where not, an app that sets one is refused at dry run.
    pub recovery: bool,
    /// Its jobs run on this machine: `torchx run` waits for them and streams their logs
    /// unless `--detach` (TorchX's behaviour for its `local*` schedulers), and polls them often.
    /// Not a feature the conformance suite checks: `false` in [`ALL`](Self::ALL) too.
    pub runs_locally: bool,
    /// It holds a job back until its `--after` dependencies ended as required
    /// ([`DryRunContext::after`]), natively (Slurm's `--dependency`) or in its supervisor
    /// (local_cwd); where not, a dry run with dependencies is refused. `false` in
    /// [`ALL`](Self::ALL): a backend claims it only with the code that does it.
    pub dependencies: bool,
    /// It watches each replica for progress and stops one that made none for its role's
    /// `hang_timeout`, with its stacks captured; where not, a dry run that sets one is refused.
    /// `false` in [`ALL`](Self::ALL): a backend claims it only with the code that does it.
    pub hang_watch: bool,
}

/// `pub const fn with_x(self, on: bool) -> Self` for each flag.
macro_rules! builders {
    ($($(#[$doc:meta])* $method:ident: $field:ident,)*) => {$(
        $(#[$doc])*
        #[must_use]
        pub const fn $method(mut self, on: bool) -> Self {
            self.$field = on;
            self
        }
    )*};
}

impl Capabilities {
    /// Every capability (and no workspace). Backends state what they lack
    /// (`Capabilities::ALL.with_mounts(false)`): a new capability is then
    /// claimed, and checked by the conformance suite, everywhere until a backend opts out.
    pub const ALL: Capabilities = Capabilities {
        describe_replicas: true,
        list: true,
        cancel: true,
        delete: true,
        logs: true,
        log_streams: true,
        log_since_until: true,
        log_tail: true,
        workspace: WorkspaceSupport::None,
        mounts: true,
        retries: true,
        multi_role: true,
        recovery: true,
        runs_locally: false,
        dependencies: false,
        hang_watch: false,
    };

    /// Only what every scheduler does (dry run, schedule, describe).
    pub const NONE: Capabilities = Capabilities {
        describe_replicas: false,
        list: false,
        cancel: false,
        delete: false,
        logs: false,
        log_streams: false,
        log_since_until: false,
        log_tail: false,
        workspace: WorkspaceSupport::None,
        mounts: false,
        retries: false,
        multi_role: false,
        recovery: false,
        runs_locally: false,
        dependencies: false,
        hang_watch: false,
    };

    // Builders for code outside this crate, where the struct cannot be written literally
    // (it is `#[non_exhaustive]`): `Capabilities::ALL.with_mounts(false).with_delete(false)`.
    builders! {
        /// [`describe_replicas`](Self::describe_replicas) set to `on`.
        with_describe_replicas: describe_replicas,
        /// [`list`](Self::list) set to `on`.
        with_list: list,
        /// [`cancel`](Self::cancel) set to `on`.
        with_cancel: cancel,
        /// [`delete`](Self::delete) set to `on`.
        with_delete: delete,
        /// [`logs`](Self::logs) set to `on`.
        with_logs: logs,
        /// [`log_streams`](Self::log_streams) set to `on`.
        with_log_streams: log_streams,
        /// [`log_since_until`](Self::log_since_until) set to `on`.
        with_log_since_until: log_since_until,
        /// [`log_tail`](Self::log_tail) set to `on`.
        with_log_tail: log_tail,
        /// [`mounts`](Self::mounts) set to `on`.
        with_mounts: mounts,
        /// [`retries`](Self::retries) set to `on`.
        with_retries: retries,
        /// [`multi_role`](Self::multi_role) set to `on`.
        with_multi_role: multi_role,
        /// [`recovery`](Self::recovery) set to `on`.
        with_recovery: recovery,
        /// [`runs_locally`](Self::runs_locally) set to `on`.
        with_runs_locally: runs_locally,
        /// [`dependencies`](Self::dependencies) set to `on`.
        with_dependencies: dependencies,
        /// [`hang_watch`](Self::hang_watch) set to `on`.
        with_hang_watch: hang_watch,
    }

    /// [`workspace`](Self::workspace) set to `support`.
    pub const fn with_workspace(mut self, support: WorkspaceSupport) -> Self {
        self.workspace = support;
        self
    }
}

/// How a scheduler ships a role's workspace (TorchX's `WorkspaceMixin` kinds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceSupport {
    /// Not at all: a workspace is an error.
    #[default]
    None,
    /// Jobs run in the submitter's current directory, the only workspace accepted (local_cwd).
    CurrentDir,
    /// Copied into a new job directory, or run in place from the current directory (slurm).
    Directory,
    /// Built into an image on the local Docker engine (local_docker).
    LocalImage,
    /// Built into an image and pushed to the registry of the `image_repo` run option.
    PushedImage,
}

/// A scheduler's native request, as rendered by `submit_dryrun`.
pub trait NativeRequest: Debug + Send + Sync + Any {
    /// The human-readable form printed by `torchx run --dryrun`.
    fn render(&self) -> String;
    /// The JSON form printed by `torchx run --dryrun --json`.
    fn to_json(&self) -> serde_json::Value;
}

/// The scheduler's native request, rendered by `submit_dryrun`, plus what produced it.
#[derive(Debug)]
pub struct DryRunInfo {
    /// The app as submitted (after the runner's env injection).
    pub app: AppDef,
    /// The scheduler's name.
    pub scheduler: String,
    /// The resolved run options.
    pub cfg: Cfg,
    /// The native request.
    pub request: Box<dyn NativeRequest>,
    /// The workspace images to build (and push) before the request is submitted.
    pub images: Vec<WorkspaceImage>,
    /// The jobs it waits for (`--after`), as the request holds them.
    pub after: Vec<crate::specs::Dependency>,
    /// What the pre-flight checks found that would make the job fail as it starts (empty:
    /// nothing, or the checks were skipped): shown by a dry run, refused by `schedule`.
    pub preflight: Vec<String>,
}

impl std::fmt::Display for DryRunInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.request.render())
    }
}

/// How a scheduler submits the tasks of an array or sweep (see
/// [`Scheduler::submit_array_dryrun`]).
#[derive(Debug)]
pub enum ArrayRequest<R = Box<dyn NativeRequest>> {
    /// One native submission of every task (a Slurm job array, ...).
    Native(R),
    /// One submission per task, for this reason (said in the dry run).
    PerTask(String),
}

/// One task of an array, as [`Scheduler::submit_array_dryrun`] gets it: its index and its app
/// (already dry-run on its own, so valid for this scheduler).
#[derive(Debug, Clone, Copy)]
pub struct ArrayTask<'a> {
    /// Its index in the array (`TORCHX_ARRAY_INDEX`).
    pub index: u32,
    /// Its app.
    pub app: &'a AppDef,
}

impl<'a> ArrayTask<'a> {
    /// Whether its app is one replica of one role, as the elements of most native arrays are.
    pub fn is_single_replica(&self) -> bool {
        self.app.roles.len() == 1 && self.app.roles[0].num_replicas == 1
    }

    /// The first of single-replica `tasks` whose role differs from the first task's in more
    /// than what `erase` clears (its command and environment, which each element picks by its
    /// index; the rest the elements share).
    pub fn first_differing<'t>(
        tasks: &'t [ArrayTask<'a>],
        erase: impl Fn(&Role) -> Role,
    ) -> Option<&'t ArrayTask<'a>> {
        let first = erase(&tasks.first()?.app.roles[0]);
        tasks.iter().find(|t| erase(&t.app.roles[0]) != first)
    }
}

/// Facts about a backend that shape its dry run (the Slurm version, LSF's hosts, ...), gathered
/// beforehand with I/O by [`Scheduler::dryrun_facts`] so that `submit_dryrun` stays pure; none
/// means "not probed". They cross the object-safe [`Scheduler`] boundary type-erased: a
/// [`Backend`] declares its type (`Backend::Facts`) and receives them typed, the adapter
/// reading them back; a plugin that implements `Scheduler` directly uses [`Facts::get`].
#[derive(Clone, Default)]
pub struct Facts(Option<Arc<dyn std::any::Any + Send + Sync>>);

impl Facts {
    /// Facts of type `T`.
    pub fn new<T: std::any::Any + Send + Sync>(facts: T) -> Facts {
        Facts(Some(Arc::new(facts)))
    }

    /// The facts, if they are a `T`.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.as_deref()?.downcast_ref()
    }
}

impl Debug for Facts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Facts(..)"
        } else {
            "Facts(none)"
        })
    }
}

/// Everything `submit_dryrun` may depend on besides the app and options, gathered beforehand so
/// that dry runs are pure and deterministic.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DryRunContext {
    /// The runner's session name.
    pub session_name: String,
    /// A random id for building unique app ids (`{name}-{unique}`).
    pub unique: String,
    /// The working directory of the submitter.
    pub cwd: PathBuf,
    /// Facts about the backend that shape the request, gathered by
    /// [`Scheduler::dryrun_facts`] (e.g. the Slurm version).
    pub facts: Facts,
    /// The jobs this one waits for (`--after`): rendered by a scheduler with
    /// [`Capabilities::dependencies`], refused by the others.
    pub after: Vec<crate::specs::Dependency>,
}

impl DryRunContext {
    /// A context with the given session, unique id and working directory.
    pub fn new(
        session_name: impl Into<String>,
        unique: impl Into<String>,
        cwd: impl Into<PathBuf>,
    ) -> Self {
        DryRunContext {
            session_name: session_name.into(),
            unique: unique.into(),
            cwd: cwd.into(),
            facts: Facts::default(),
            after: Vec::new(),
        }
    }

    /// The same context for a job that waits for `after`.
    pub fn with_after(mut self, after: Vec<crate::specs::Dependency>) -> Self {
        self.after = after;
        self
    }

    /// The same context with these backend facts.
    pub fn with_facts(mut self, facts: Facts) -> Self {
        self.facts = facts;
        self
    }

    /// TorchX's `make_unique(name)`.
    pub fn make_unique(&self, name: &str) -> String {
        format!("{name}-{}", self.unique)
    }
}

/// Refuses an app that sets a recovery option a scheduler without
/// [`Capabilities::recovery`] would drop, naming the options and the role.
pub fn check_recovery(scheduler: &str, caps: Capabilities, app: &AppDef) -> Result<()> {
    if caps.recovery {
        return Ok(());
    }
    match app.roles.iter().find(|r| r.uses_recovery()) {
        Some(r) => Err(Error::unsupported(
            scheduler,
            format!(
                "{} (set on role `{}`): its jobs cannot be given a time limit or requeued",
                r.recovery_options().join(", "),
                r.name
            ),
        )),
        None => Ok(()),
    }
}

/// The stacks of one replica's processes when one of its attempts hung.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HangStacks {
    /// The role.
    pub role: String,
    /// The replica.
    pub replica: u32,
    /// The attempt that hung.
    pub attempt: u32,
    /// A block per process, headed `=== role/replica [rank R] pid P (how): command line`.
    pub text: String,
}

/// Refuses an app that sets `hang_timeout` on a scheduler without
/// [`Capabilities::hang_watch`], which would let a hung job run to its end unwatched.
pub fn check_hang_watch(scheduler: &str, caps: Capabilities, app: &AppDef) -> Result<()> {
    match app.roles.iter().find(|r| r.hang_timeout.is_some()) {
        Some(r) if !caps.hang_watch => Err(Error::unsupported(
            scheduler,
            format!(
                "hang_timeout (set on role `{}`): it cannot watch its replicas for progress \
                 yet; local_cwd, local_docker, slurm, kubernetes, kubernetes_mcad, aws_batch and \
                 aws_sagemaker can",
                r.name
            ),
        )),
        _ => Ok(()),
    }
}

/// Refuses a job with `--after` dependencies on a scheduler without
/// [`Capabilities::dependencies`], which would start it at once.
pub fn check_after(scheduler: &str, caps: Capabilities, ctx: &DryRunContext) -> Result<()> {
    match ctx.after.first() {
        Some(dep) if !caps.dependencies => Err(Error::unsupported(
            scheduler,
            format!(
                "--after {dep}: it cannot hold a job until others end itself (`torchx run \
                 --after` holds it with a detached process, as does a pipeline step's `after`)"
            ),
        )),
        _ => Ok(()),
    }
}

/// Which log lines to return.
#[derive(Debug, Clone, Default)]
pub struct LogQuery {
    /// Keep only lines matching this regex.
    pub regex: Option<Regex>,
    /// Only lines written at or after this time.
    pub since: Option<SystemTime>,
    /// Only lines written before this time.
    pub until: Option<SystemTime>,
    /// Keep following until the app ends.
    pub should_tail: bool,
    /// Which stream (None = the scheduler's default).
    pub streams: Option<Stream>,
}

/// The replica whose log a backend reads: replica `k` of `role` in app `app_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica<'a> {
    /// The app id (without scheduler and session).
    pub app_id: &'a str,
    /// The role name.
    pub role: &'a str,
    /// The replica index within the role.
    pub k: u32,
}

/// An async iterator of log lines (each without its trailing newline).
#[async_trait]
pub trait LogLines: Send {
    /// The next line, `None` at the end.
    async fn next_line(&mut self) -> Result<Option<String>>;

    /// Appends the next lines that are ready (at least one), each with its `\n`, to `out` as
    /// the bytes the log holds; false at the end. Readers of large logs use it to avoid a call
    /// and an allocation per line; file-backed schedulers hand out whole chunks.
    async fn next_lines(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        Ok(append_line(out, self.next_line().await?))
    }
}

/// A scheduler's lines as every reader should consume them: filtered by `regex` (TorchX's
/// `filter_regex`), and yielding to the runtime regularly (see `Cooperative`).
pub fn cooperative(inner: Box<dyn LogLines>, regex: Option<regex::Regex>) -> Box<dyn LogLines> {
    Box::new(Cooperative { inner, regex })
}

/// What [`cooperative`] returns: the scheduler's lines, filtered by the query's regex, and
/// cooperative: a backlog read from a file is always ready, so without giving the runtime
/// its turn (tokio's task budget) a reader would starve every other task on its thread,
/// Ctrl-C handling included.
struct Cooperative {
    inner: Box<dyn LogLines>,
    regex: Option<regex::Regex>,
}

#[async_trait::async_trait]
impl LogLines for Cooperative {
    async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            tokio::task::consume_budget().await;
            let Some(line) = self.inner.next_line().await? else {
                return Ok(None);
            };
            if self.regex.as_ref().is_none_or(|re| re.is_match(&line)) {
                return Ok(Some(line));
            }
        }
    }

    async fn next_lines(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        if self.regex.is_some() {
            // Filtering looks at each line.
            return Ok(append_line(out, self.next_line().await?));
        }
        tokio::task::consume_budget().await;
        self.inner.next_lines(out).await
    }
}

/// Appends `line` and its `\n` to `out`; false for `None` (the end), as [`LogLines::next_lines`]
/// answers.
pub fn append_line(out: &mut Vec<u8>, line: Option<String>) -> bool {
    let Some(line) = line else {
        return false;
    };
    out.extend_from_slice(line.as_bytes());
    out.push(b'\n');
    true
}

/// A job scheduler backend. Object-safe; one instance per scheduler name per runner.
///
/// Contract: `submit_dryrun` does no I/O and is deterministic for the same inputs. `describe`
/// returns `Ok(None)` for an app it does not know. Operations a scheduler does not support
/// return [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported).
#[async_trait]
pub trait Scheduler: Debug + Send + Sync {
    /// The registry name (`local_cwd`, ...).
    fn name(&self) -> &str;
    /// What it supports.
    fn capabilities(&self) -> Capabilities;
    /// Its run option schema.
    fn run_opts(&self) -> RunOpts;
    /// Facts about the backend that `submit_dryrun` needs (probed here, with I/O, off the
    /// async executor), so that `submit_dryrun` itself stays pure. Default: none.
    async fn dryrun_facts(&self, cfg: &Cfg) -> Result<Facts> {
        let _ = cfg;
        Ok(Facts::default())
    }
    /// Whether [`submit_dryrun`](Self::submit_dryrun) leaves this process (a plugin program
    /// renders the request): the runner then calls it on the blocking pool. Default: no.
    fn dryrun_is_a_round_trip(&self) -> bool {
        false
    }
    /// Renders the native request. Pure: no I/O, deterministic given its inputs (but for a
    /// [round trip](Self::dryrun_is_a_round_trip) to a plugin program).
    fn submit_dryrun(
        &self,
        app: &AppDef,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<Box<dyn NativeRequest>>;
    /// Renders the tasks of an array or sweep (in index order, at most `max_concurrent`
    /// running at once) as one native request, which [`schedule`](Self::schedule) submits
    /// like any other and whose tasks are then known by [`array_task_ids`](Self::array_task_ids);
    /// or says why they go one submission per task. Pure, like `submit_dryrun`. Default: one
    /// submission per task.
    fn submit_array_dryrun(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<ArrayRequest> {
        let _ = (tasks, max_concurrent, cfg, ctx);
        Ok(ArrayRequest::PerTask(format!(
            "{} has no native job arrays: torchx submits each task as an app, at most \
             max_concurrent unfinished at once",
            self.name()
        )))
    }
    /// The app ids of the tasks `indexes` (all of them, in order) of the native array
    /// `schedule` returned `array_id` for. Default: `<array_id>_<index>`.
    fn array_task_ids(&self, array_id: &str, indexes: &[u32]) -> Vec<String> {
        indexes.iter().map(|i| format!("{array_id}_{i}")).collect()
    }
    /// What the scheduler can tell about a dry-run job before it is queued: checks certain to
    /// fail (an unknown queue, a request no node fits), checks it could not make, and when the
    /// job would start. Submits nothing. Default: nothing to tell.
    async fn plan(&self, info: &DryRunInfo) -> Result<PlanReport> {
        let _ = info;
        Ok(PlanReport::default())
    }
    /// Submits a dry-run result; returns the scheduler's app id.
    async fn schedule(&self, info: &DryRunInfo) -> Result<String>;
    /// The app's status, `None` if the scheduler does not know it.
    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>>;
    /// The status of each of many apps (a group's tasks), in order. Default: one `describe`
    /// each; a scheduler that can ask about many at once should.
    async fn describe_many(&self, app_ids: &[String]) -> Result<Vec<Option<DescribeAppResponse>>> {
        let mut out = Vec::with_capacity(app_ids.len());
        for id in app_ids {
            out.push(self.describe(id).await?);
        }
        Ok(out)
    }
    /// How a workspace becomes what the job runs under run options `cfg` (a scheduler with
    /// several workspace builders picks one by an option). Default: its capability's.
    fn workspace_support(&self, cfg: &Cfg) -> WorkspaceSupport {
        let _ = cfg;
        self.capabilities().workspace
    }
    /// The scheduler-native request of a submitted app, read back (the read-side twin of
    /// `submit_dryrun`, as TorchX's `describe_native`): what the scheduler holds of it, in the
    /// shape of the request's `to_json()` where it can be. `None` if the app is unknown or
    /// the scheduler keeps nothing to read back.
    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let _ = app_id;
        Ok(None)
    }
    /// The stacks captured when replicas of the app hung ([`Capabilities::hang_watch`]), of
    /// `attempt` (default: each replica's latest hung attempt); empty if none hung.
    async fn hang_stacks(&self, app_id: &str, attempt: Option<u32>) -> Result<Vec<HangStacks>> {
        let _ = (app_id, attempt);
        Err(Error::unsupported(
            self.name(),
            "hang stacks (log --stacks)",
        ))
    }
    /// The apps the scheduler knows.
    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        Err(Error::unsupported(self.name(), "list"))
    }
    /// Stops the app (no-op if already finished).
    async fn cancel(&self, app_id: &str) -> Result<()>;
    /// Cancels the app only if it has not started: true if it is cancelled and never started
    /// (by this call or an earlier one: a failover may ask again), false if it started (or
    /// ended otherwise) and was left alone. This default reads the app's state and then
    /// cancels, so an app that starts in between is cancelled running, and takes a cancelled
    /// app for one that never started; a scheduler that can hold a pending job, and knows
    /// whether a job ever started, closes both gaps (Slurm).
    async fn cancel_pending(&self, app_id: &str) -> Result<bool> {
        cancel_if_pending(self, app_id).await
    }
    /// Removes the app and what the scheduler keeps of it (stopping it first).
    async fn delete(&self, app_id: &str) -> Result<()> {
        let _ = app_id;
        Err(Error::unsupported(self.name(), "delete"))
    }
    /// The log lines of replica `k` of `role`. An unknown app is [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) with
    /// `what == "app"`.
    async fn log_iter(
        &self,
        app_id: &str,
        role: &str,
        k: u32,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        let _ = (app_id, role, k, query);
        Err(Error::unsupported(self.name(), "logs"))
    }
    /// Releases resources.
    async fn close(&self) {}
}

/// [`Scheduler::cancel_pending`] by reading the state, then cancelling (not atomic).
pub async fn cancel_if_pending<S: Scheduler + ?Sized>(s: &S, app_id: &str) -> Result<bool> {
    match s.describe(app_id).await? {
        None => Err(Error::not_found("app", app_id, "")),
        Some(d) if matches!(d.state, AppState::Pending | AppState::Submitted) => {
            s.cancel(app_id).await.map(|()| true)
        }
        Some(d) => Ok(d.state == AppState::Cancelled),
    }
}
