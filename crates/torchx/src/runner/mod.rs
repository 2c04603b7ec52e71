//! The [`Runner`]: dry-run, run, status, wait, cancel, delete, describe, list and logs over any
//! registered scheduler, addressed by app handles.

mod catalog;
mod groups;
mod pipeline_holder;
mod pipelines;
mod plan;
mod submit;

pub use crate::blocking::in_place;
pub use plan::PlanRow;

pub(crate) use submit::PreparedWorkspaces;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::components::{Component, ComponentRef};
use crate::config::TorchxConfig;
use crate::error::{Error, Result, Subject};
use crate::group::GroupRecord;
use crate::opts::Cfg;
use crate::pipeline::PipelineRecord;
use crate::scheduler::{random_id, LogLines, LogQuery, Registry, Scheduler};
use crate::specs::{
    make_app_handle, parse_app_handle, AppDef, AppHandle, AppStatus, ListAppResponse, Resource,
    Workspace,
};
use crate::tracker::TrackerRegistry;

/// Extra inputs of a run besides the app, scheduler and options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunArgs {
    /// A workspace to build into every role that has none of its own.
    pub workspace: Option<Workspace>,
    /// The tracker parent run id (`TORCHX_PARENT_RUN_ID` in the environment overrides it).
    pub parent_run_id: Option<String>,
    /// Retry and recovery settings for every role that sets none of its own (`torchx run
    /// --time_limit 4h --max_retries 3 ...`).
    pub role_defaults: RoleDefaults,
    /// Environment every role gets (a group's task: `TORCHX_ARRAY_INDEX`, ...).
    pub extra_env: crate::specs::Env,
    /// Mounts every role gets (a pipeline step's shared directory on local containers).
    pub extra_mounts: Vec<crate::specs::Mount>,
    /// The jobs (or groups) this one waits for (`--after`).
    pub after: Vec<crate::specs::Dependency>,
    /// Submit without the pre-flight checks (`--skip_preflight`).
    pub skip_preflight: bool,
}

/// Settings `torchx run` applies to every role of the app; a role's own value wins where it
/// has one (for `max_retries`, where it is not 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleDefaults {
    /// `--time_limit`, seconds.
    pub time_limit: Option<u64>,
    /// `--checkpoint_signal`.
    pub checkpoint_signal: Option<crate::specs::CheckpointSignal>,
    /// `--max_retries`.
    pub max_retries: Option<u32>,
    /// `--requeue_exit_code`.
    pub requeue_exit_code: Option<i32>,
    /// `--max_requeues`.
    pub max_requeues: Option<u32>,
    /// `--checkpoint_dir`.
    pub checkpoint_dir: Option<String>,
    /// `--hang_timeout`, seconds.
    pub hang_timeout: Option<u64>,
}

impl RoleDefaults {
    /// Fills the gaps of `role`.
    pub fn apply(&self, role: &mut crate::specs::Role) {
        role.time_limit = role.time_limit.or(self.time_limit);
        role.checkpoint_signal = role.checkpoint_signal.or(self.checkpoint_signal);
        role.requeue_exit_code = role.requeue_exit_code.or(self.requeue_exit_code);
        role.max_requeues = role.max_requeues.or(self.max_requeues);
        role.hang_timeout = role.hang_timeout.or(self.hang_timeout);
        if role.checkpoint_dir.is_none() {
            role.checkpoint_dir.clone_from(&self.checkpoint_dir);
        }
        if role.max_retries == 0 {
            role.max_retries = self.max_retries.unwrap_or(0);
        }
    }
}

/// What building a component gave: an app, or the component's help text.
#[derive(Debug)]
pub enum ComponentOutcome<T> {
    /// The result.
    Done(T),
    /// `--help` was asked; this is the help text.
    Help(String),
}

/// A scheduler created on first use, or not yet.
type SchedulerCell = Arc<OnceCell<Arc<dyn Scheduler>>>;

/// What a handle names: a pipeline, a group (each with its record from the state directory) or
/// an app. [`Runner::named`] decides it, for every caller (the CLI, the dashboard, Python).
#[derive(Debug, Clone)]
pub enum Named {
    /// A pipeline (`pipeline://session/id`), its holder started again if it was gone.
    Pipeline(PipelineRecord),
    /// A group of jobs (`scheduler://session/~id`: an array or a sweep).
    Group(GroupRecord),
    /// One app of a scheduler.
    App,
}

/// Runs apps on schedulers. Schedulers are created lazily, once per name.
#[derive(Debug)]
pub struct Runner {
    session_name: String,
    session_id: String,
    registry: Registry,
    trackers: TrackerRegistry,
    /// Shared with the blocking tasks that build components.
    catalog: Arc<catalog::Catalog>,
    /// One cell per scheduler name: the map's lock is held only to find the cell, so a slow
    /// start (a plugin's interpreter) holds up no other name.
    schedulers: Mutex<BTreeMap<String, SchedulerCell>>,
}

/// How long [`Runner::wait`] keeps asking a scheduler that does not answer.
pub const WAIT_THROUGH_UNAVAILABLE: Duration = Duration::from_secs(300);

impl Runner {
    /// A runner with session name `torchx`, a new session id, the given schedulers and config.
    /// It reads no environment variable; see [`with_session_id`](Self::with_session_id).
    pub fn new(registry: Registry, config: TorchxConfig) -> Runner {
        Runner {
            session_name: "torchx".into(),
            session_id: random_id(),
            registry,
            trackers: TrackerRegistry::builtin(),
            catalog: Arc::new(catalog::Catalog {
                config,
                ..Default::default()
            }),
            schedulers: Mutex::new(BTreeMap::new()),
        }
    }

    /// Uses these tracker factories (default: the builtin `fsspec`).
    pub fn with_trackers(mut self, trackers: TrackerRegistry) -> Runner {
        self.trackers = trackers;
        self
    }

    /// The tracker factories.
    pub fn trackers(&self) -> &TrackerRegistry {
        &self.trackers
    }

    /// Adds components and named resources next to the builtins (see
    /// [`Extensions`](crate::Extensions), which checks for clashes).
    pub fn with_components(
        mut self,
        components: Vec<Component>,
        named_resources: BTreeMap<String, Resource>,
    ) -> Runner {
        let catalog = Arc::make_mut(&mut self.catalog);
        catalog.components = components;
        catalog.named_resources = named_resources;
        self
    }

    /// Every component by name: builtins, registered ones, then those of the config's
    /// component directories. Reads those directories.
    pub fn components(&self) -> Result<Vec<Component>> {
        self.catalog.components()
    }

    /// What a component name refers to. Reads the config's component directories.
    pub fn find_component(&self, name: &str) -> Result<ComponentRef> {
        self.catalog.find_component(name)
    }

    /// Named resources besides the builtins: registered ones and `[resource:<name>]` sections.
    pub fn named_resources(&self) -> Result<BTreeMap<String, Resource>> {
        self.catalog.named_resources()
    }

    /// Sets the session id every job's `TORCHX_INTERNAL_SESSION_ID` carries (TorchX's CLI
    /// takes it from that variable in its own environment, so a job launched from a job
    /// shares its session).
    pub fn with_session_id(mut self, id: impl Into<String>) -> Runner {
        self.session_id = id.into();
        self
    }

    /// Sets the session name used in handles.
    pub fn with_session_name(mut self, name: impl Into<String>) -> Runner {
        self.session_name = name.into();
        self
    }

    /// The session name.
    pub fn session_name(&self) -> &str {
        &self.session_name
    }

    /// The scheduler registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The config files in effect.
    pub fn config(&self) -> &TorchxConfig {
        &self.catalog.config
    }

    /// The scheduler `name`, created on first use (once: concurrent first uses wait for the
    /// one creating it; a failed creation is tried again next time). A registered scheduler's
    /// factory is cheap by contract; a plugin's start (a program's handshake, an interpreter)
    /// runs on the blocking pool, so it stalls no other caller.
    pub async fn scheduler(&self, name: &str) -> Result<Arc<dyn Scheduler>> {
        let cell = {
            let mut cells = self
                .schedulers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(cells.entry(name.to_string()).or_default())
        };
        let created = cell
            .get_or_try_init(|| async {
                if self.registry.is_registered(name) {
                    return self.registry.create(name);
                }
                let (registry, owned) = (self.registry.clone(), name.to_string());
                crate::blocking::blocking(name, move || registry.create(&owned)).await
            })
            .await?;
        Ok(Arc::clone(created))
    }

    /// Parses `-cfg` for `scheduler` and fills gaps from the `[scheduler]` config sections.
    /// Returns the options and warnings (unknown keys in config files).
    pub async fn cfg_from_str(&self, scheduler: &str, cfg: &str) -> Result<(Cfg, Vec<String>)> {
        let opts = self.scheduler(scheduler).await?.run_opts();
        let mut parsed = opts.parse_cli(cfg)?;
        let warnings = self
            .config()
            .apply_scheduler(scheduler, &opts, &mut parsed)?;
        Ok((parsed, warnings))
    }

    async fn route(&self, handle: &str) -> Result<(AppHandle, Arc<dyn Scheduler>)> {
        let h = parse_app_handle(handle)?;
        let s = self.scheduler(h.scheduler()).await?;
        Ok((h, s))
    }

    /// What `handle` names: a pipeline, a group or an app (the one dispatch every caller
    /// uses). A pipeline's or group's record is read on the blocking pool, and a pipeline
    /// whose holder died gets a new one; an app's handle costs no I/O.
    pub async fn named(&self, handle: &str) -> Result<Named> {
        let pipeline = crate::pipeline::is_pipeline_handle(handle);
        let group = !pipeline && parse_app_handle(handle).is_ok_and(|h| h.names_group());
        if !pipeline && !group {
            return Ok(Named::App);
        }
        let owned = handle.to_string();
        crate::blocking::blocking("torchx", move || {
            Ok(if pipeline {
                crate::pipeline::find(&owned)?.map_or(Named::App, Named::Pipeline)
            } else {
                GroupRecord::find(&owned)?.map_or(Named::App, Named::Group)
            })
        })
        .await
    }

    /// The app's status, `None` if the scheduler does not know it. For a group's handle
    /// (arrays and sweeps, [`crate::group`]): the group's state, and its counts as the message.
    pub async fn status(&self, handle: &str) -> Result<Option<AppStatus>> {
        match self.named(handle).await? {
            Named::Pipeline(p) => Ok(Some(self.pipeline_status(&p).await?)),
            Named::Group(g) => Ok(Some(self.group_status(&g).await?)),
            Named::App => self.app_status(handle).await,
        }
    }

    /// One app's status (not a group's).
    pub(crate) async fn app_status(&self, handle: &str) -> Result<Option<AppStatus>> {
        let (h, s) = self.route(handle).await?;
        Ok(s.describe(h.app_id()).await?.map(|d| d.to_status()))
    }

    /// The scheduler-native request of a submitted app, read back from its scheduler
    /// ([`Scheduler::describe_native`]); `None` if unknown or nothing can be read back.
    pub async fn describe_native(&self, handle: &str) -> Result<Option<serde_json::Value>> {
        let (h, s) = self.route(handle).await?;
        s.describe_native(h.app_id()).await
    }

    /// The stacks captured when the app's replicas hung (`--hang_timeout`), of `attempt`
    /// (default: each replica's latest hung attempt); empty if none hung.
    pub async fn hang_stacks(
        &self,
        handle: &str,
        attempt: Option<u32>,
    ) -> Result<Vec<crate::scheduler::HangStacks>> {
        let (h, s) = self.route(handle).await?;
        s.hang_stacks(h.app_id(), attempt).await
    }

    /// Polls until the app is terminal (or unknown, giving `None`). With a timeout, an app still
    /// running at the deadline is a [`ErrorKind::Timeout`](crate::ErrorKind::Timeout). A
    /// scheduler that does not answer (an API server restarting, a dropped connection: an
    /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)) is asked again for up to
    /// [`WAIT_THROUGH_UNAVAILABLE`], with a warning, before its error ends the wait.
    pub async fn wait(
        &self,
        handle: &str,
        interval: Duration,
        timeout: Option<Duration>,
    ) -> Result<Option<AppStatus>> {
        let start = Instant::now();
        // Poll fast at first (short jobs end within milliseconds), then back off to `interval`.
        let mut pause = (interval / 20).max(Duration::from_millis(1)).min(interval);
        let mut unavailable_since: Option<Instant> = None;
        loop {
            let status = match self.status(handle).await {
                Err(e) if e.kind() == crate::ErrorKind::Unavailable => {
                    let since = *unavailable_since.get_or_insert_with(|| {
                        log::warn!(
                            "{handle}: {e}; asking again for up to {} s",
                            WAIT_THROUGH_UNAVAILABLE.as_secs()
                        );
                        Instant::now()
                    });
                    let timed_out = timeout.is_some_and(|t| start.elapsed() >= t);
                    if since.elapsed() >= WAIT_THROUGH_UNAVAILABLE || timed_out {
                        return Err(e);
                    }
                    tokio::time::sleep(
                        interval.clamp(Duration::from_millis(200), Duration::from_secs(2)),
                    )
                    .await;
                    continue;
                }
                other => other?,
            };
            if unavailable_since.take().is_some() {
                log::info!("{handle}: its scheduler answers again");
            }
            match status {
                None => return Ok(None),
                Some(s) if s.is_terminal() => return Ok(Some(s)),
                Some(s) => {
                    if let Some(t) = timeout {
                        if start.elapsed() >= t {
                            return Err(Error::timeout(format!(
                                "{handle} is still {} after waiting {:.1}s",
                                s.state,
                                t.as_secs_f64()
                            )));
                        }
                    }
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(interval);
        }
    }

    fn unknown_app(&self, h: &AppHandle) -> Error {
        Error::app_not_found(
            h.to_string(),
            format!(
                ": it does not exist or has been removed from {}'s data plane",
                h.scheduler()
            ),
        )
    }

    /// Cancels the app (every task of a group) if it is not finished. Unknown apps are
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub async fn cancel(&self, handle: &str) -> Result<()> {
        match self.named(handle).await? {
            Named::Pipeline(p) => self.cancel_pipeline(&p).await,
            Named::Group(g) => self.cancel_group(&g).await,
            Named::App => self.cancel_app(handle).await,
        }
    }

    /// Cancels one app (not a group).
    pub(crate) async fn cancel_app(&self, handle: &str) -> Result<()> {
        let (h, s) = self.route(handle).await?;
        match s.describe(h.app_id()).await? {
            None => Err(self.unknown_app(&h)),
            Some(d) if d.state.is_terminal() => Ok(()),
            Some(_) => s.cancel(h.app_id()).await,
        }
    }

    /// Cancels one app only if it has not started ([`Scheduler::cancel_pending`]): true if it
    /// was, false if it started (or ended) and was left alone.
    pub async fn cancel_pending(&self, handle: &str) -> Result<bool> {
        let (h, s) = self.route(handle).await?;
        s.cancel_pending(h.app_id()).await
    }

    /// Deletes the app (cancelling it first if running); a group's tasks and its record.
    pub async fn delete(&self, handle: &str) -> Result<()> {
        match self.named(handle).await? {
            Named::Pipeline(p) => self.delete_pipeline(&p).await,
            Named::Group(g) => self.delete_group(&g).await,
            Named::App => self.delete_app(handle).await,
        }
    }

    /// Deletes one app (not a group).
    pub(crate) async fn delete_app(&self, handle: &str) -> Result<()> {
        let (h, s) = self.route(handle).await?;
        if !s.capabilities().delete {
            return Err(Error::unsupported(s.name(), "delete"));
        }
        if s.describe(h.app_id()).await?.is_none() {
            return Err(self.unknown_app(&h));
        }
        s.delete(h.app_id()).await
    }

    /// The app as the scheduler knows it.
    pub async fn describe(&self, handle: &str) -> Result<Option<AppDef>> {
        let (h, s) = self.route(handle).await?;
        Ok(s.describe(h.app_id()).await?.map(|d| {
            let mut app = AppDef::new(h.app_id().to_string(), d.roles);
            app.metadata = d.metadata;
            app
        }))
    }

    /// The apps `scheduler` knows, with handles filled in.
    pub async fn list(&self, scheduler: &str) -> Result<Vec<ListAppResponse>> {
        let s = self.scheduler(scheduler).await?;
        if !s.capabilities().list {
            return Err(Error::unsupported(scheduler, "list"));
        }
        let mut apps = s.list().await?;
        for a in &mut apps {
            a.app_handle = make_app_handle(scheduler, &self.session_name, &a.app_id);
        }
        Ok(apps)
    }

    /// The log lines of replica `k` of `role`, filtered by the query's regex.
    pub async fn log_lines(
        &self,
        handle: &str,
        role: &str,
        k: u32,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        let (h, s) = self.route(handle).await?;
        let caps = s.capabilities();
        if !caps.logs {
            return Err(Error::unsupported(s.name(), "logs"));
        }
        if query
            .streams
            .is_some_and(|st| st != crate::specs::Stream::Combined)
            && !caps.log_streams
        {
            return Err(Error::unsupported(
                s.name(),
                "per-stream logs (only combined)",
            ));
        }
        // `log_iter` reports unknown apps itself (trait contract), which spares a describe per
        // replica when following the logs of hundreds of replicas.
        let lines = match s.log_iter(h.app_id(), role, k, query).await {
            Err(e) if e.is_not_found(Subject::App) => return Err(self.unknown_app(&h)),
            other => other?,
        };
        Ok(crate::scheduler::cooperative(lines, query.regex.clone()))
    }

    /// Closes every scheduler created so far.
    pub async fn close(&self) {
        let cells = std::mem::take(
            &mut *self
                .schedulers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let scheds: Vec<Arc<dyn Scheduler>> = cells
            .into_values()
            .filter_map(|cell| cell.get().cloned())
            .collect();
        for s in scheds {
            s.close().await;
        }
    }
}
