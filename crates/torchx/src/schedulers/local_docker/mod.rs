//! `local_docker`: one container per replica on the local Docker engine, on the `torchx` bridge
//! network (containers reach each other by name), found again by their TorchX labels.
//!
//! - `opts`: run options; `render`: the pure container requests; `state`: state mapping;
//!   this module: the Engine API client (bollard; the API version is negotiated, so Debian's
//!   20.10 engine speaking API 1.41 works). The client is built on first use only.

mod logs;
mod opts;
mod render;
mod state;
mod supervised;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use bollard::models::{
    ContainerCreateBody, DeviceMapping, DeviceRequest, HostConfig, Mount as DockerMount,
    MountTypeEnum, NetworkCreateRequest, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, ListNetworksOptions, LogsOptions,
    RemoveContainerOptions, StartContainerOptions, StopContainerOptions,
};
use bollard::Docker;
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use self::logs::DockerLogLines;
use self::render::label_filter;
use self::state::finished_at;
pub use opts::LocalDockerOpts;
pub use render::{container_name, render, Container, ContainerMount, CopiedEnv, DockerJob};
pub use state::{app_state, container_state};

use crate::error::{Error, ErrorKind, Result};
use crate::scheduler::{
    Backend, Capabilities, DryRunContext, DryRunInfo, HangStacks, LineBuffer, LogLines, LogQuery,
    PlanCheck, PlanReport, Replica, Scheduler, WorkspaceSupport,
};
use crate::schedulers::local_cwd::LocalCwdScheduler;
use crate::specs::{AppDef, AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus, Stream};

/// The registry name.
pub const NAME: &str = "local_docker";

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(LocalDockerScheduler::default()))
}

/// The local Docker scheduler.
#[derive(Debug)]
pub struct LocalDockerScheduler {
    client: OnceCell<Docker>,
    /// Where cancellations are remembered: a stopped container looks like a failed one, and
    /// Docker cannot relabel it.
    cancelled_dir: std::path::PathBuf,
    /// The apps under the recovery contract (see `supervised.rs`): local_cwd's supervisor and
    /// ledger, kept under this scheduler's state directory.
    supervised: LocalCwdScheduler,
    /// Where supervised apps' logs go.
    log_base: std::path::PathBuf,
    /// This scheduler's state directory, as the label on each container says it (the engine
    /// is shared by every state directory; `list` tells their apps apart by it).
    state_dir: String,
}

impl Default for LocalDockerScheduler {
    fn default() -> Self {
        let state = crate::schedulers::default_state_dir().join(NAME);
        LocalDockerScheduler {
            client: OnceCell::new(),
            cancelled_dir: state.join("cancelled"),
            supervised: LocalCwdScheduler::new(state.join("supervised")),
            log_base: state.join("logs"),
            state_dir: state.display().to_string(),
        }
    }
}

/// An Engine API error, kept as the source and classed by its HTTP status; anything that is
/// not an answer of the engine (no socket, a broken connection) means it is unavailable.
fn engine_err(what: &str) -> impl FnOnce(bollard::errors::Error) -> Error {
    crate::workspace::docker::engine_error(NAME, what.to_string())
}

fn is_status(e: &bollard::errors::Error, code: u16) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if *status_code == code)
}

/// A container found by label: (name, role, replica id, state).
struct Found {
    name: String,
    app_id: String,
    role: String,
    replica: u32,
    state: AppState,
    created: Option<f64>,
    /// When it exited (the engine's `FinishedAt`), once it has.
    finished: Option<f64>,
    /// The state directory it was submitted from (its label), if it says.
    state_dir: Option<String>,
    restarts: i64,
    /// The engine killed it for using too much memory.
    oom: bool,
}

impl LocalDockerScheduler {
    /// The app, if it is one of the supervised ones (`supervised.rs`).
    async fn supervised_describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        if !self.supervised.has_ledger() {
            return Ok(None);
        }
        match Backend::describe(&self.supervised, app_id).await {
            // An id local_cwd would not have given is not one of its apps.
            Err(e) if e.kind() == ErrorKind::InvalidArgument => Ok(None),
            other => other,
        }
    }

    async fn docker(&self) -> Result<&Docker> {
        self.client
            .get_or_try_init(|| crate::workspace::docker::connect(NAME))
            .await
    }

    /// The id of the `torchx` network, created if missing. Docker accepts several networks of
    /// one name, so concurrent submitters serialise on a file lock (as TorchX does) and the
    /// oldest network of that name wins.
    async fn ensure_network(&self, docker: &Docker) -> Result<String> {
        // Waiting for the lock blocks: on the blocking pool, so that the holder (maybe a task
        // of this very runtime) goes on with its awaits and lets go.
        let _lock = crate::schedulers::blocking(NAME, network_lock).await?;
        let filters = HashMap::from([("name".to_string(), vec![render::NETWORK.to_string()])]);
        let mut existing: Vec<_> = docker
            .list_networks(Some(ListNetworksOptions {
                filters: Some(filters),
            }))
            .await
            .map_err(engine_err("listing networks"))?
            .into_iter()
            .filter(|n| n.name.as_deref() == Some(render::NETWORK))
            .collect();
        existing.sort_by(|a, b| a.created.cmp(&b.created));
        if let Some(id) = existing.first().and_then(|n| n.id.clone()) {
            return Ok(id);
        }
        let req = NetworkCreateRequest {
            name: render::NETWORK.into(),
            driver: Some("bridge".into()),
            ..Default::default()
        };
        let created = docker
            .create_network(req)
            .await
            .map_err(engine_err("creating the `torchx` network"))?;
        Ok(created.id)
    }

    async fn find(&self, app_id: Option<&str>) -> Result<Vec<Found>> {
        let docker = self.docker().await?;
        let opts = ListContainersOptions {
            all: true,
            filters: Some(label_filter(app_id)),
            ..Default::default()
        };
        let summaries = docker
            .list_containers(Some(opts))
            .await
            .map_err(engine_err("listing containers"))?;
        let mut out = Vec::new();
        for s in summaries {
            let labels = s.labels.clone().unwrap_or_default();
            let name = s
                .names
                .as_ref()
                .and_then(|n| n.first())
                .map(|n| n.trim_start_matches('/').to_string())
                .unwrap_or_default();
            let inspect = docker
                .inspect_container(
                    &name,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                )
                .await
                .map_err(engine_err("inspecting a container"))?;
            let st = inspect.state.unwrap_or_default();
            let finished = st.finished_at.as_deref().and_then(finished_at);
            out.push(Found {
                finished,
                restarts: inspect.restart_count.unwrap_or(0),
                oom: st.oom_killed.unwrap_or(false),
                state: container_state(
                    st.status.map(|s| s.to_string()).as_deref().unwrap_or(""),
                    st.exit_code,
                ),
                name,
                app_id: labels
                    .get(render::LABEL_APP_ID)
                    .cloned()
                    .unwrap_or_default(),
                role: labels.get(render::LABEL_ROLE).cloned().unwrap_or_default(),
                replica: labels
                    .get(render::LABEL_REPLICA)
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0),
                created: s.created.map(|c| c as f64),
                state_dir: labels.get(render::LABEL_STATE_DIR).cloned(),
            });
        }
        out.sort_by(|a, b| (&a.role, a.replica).cmp(&(&b.role, b.replica)));
        Ok(out)
    }

    async fn create_and_start(&self, docker: &Docker, c: &Container, network: &str) -> Result<()> {
        let host_config = HostConfig {
            privileged: Some(c.privileged),
            network_mode: Some(network.to_string()),
            mounts: Some(
                c.mounts
                    .iter()
                    .map(|m| DockerMount {
                        target: Some(m.target.clone()),
                        source: Some(m.source.clone()),
                        typ: Some(if m.kind == "volume" {
                            MountTypeEnum::VOLUME
                        } else {
                            MountTypeEnum::BIND
                        }),
                        read_only: Some(m.read_only),
                        ..Default::default()
                    })
                    .collect(),
            ),
            devices: Some(
                c.devices
                    .iter()
                    .map(|d| {
                        let mut p = d.splitn(3, ':');
                        DeviceMapping {
                            path_on_host: p.next().map(String::from),
                            path_in_container: p.next().map(String::from),
                            cgroup_permissions: p.next().map(String::from),
                        }
                    })
                    .collect(),
            ),
            restart_policy: c.max_restarts.map(|n| RestartPolicy {
                name: Some(RestartPolicyNameEnum::ON_FAILURE),
                maximum_retry_count: Some(n as i64),
            }),
            memory: c.mem_mb.map(|m| m * 1024 * 1024),
            shm_size: c.mem_mb.map(|m| m * 1024 * 1024),
            nano_cpus: c.nano_cpus,
            device_requests: c.gpus.map(|n| {
                vec![DeviceRequest {
                    count: Some(n),
                    capabilities: Some(vec![vec![
                        "gpu".into(),
                        "compute".into(),
                        "utility".into(),
                    ]]),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(c.image.clone()),
            cmd: Some(c.command.clone()),
            hostname: Some(c.hostname.clone()),
            env: Some(
                c.environment
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
            ),
            labels: Some(c.labels.clone().into_iter().collect()),
            host_config: Some(host_config),
            ..Default::default()
        };
        let opts = CreateContainerOptions {
            name: Some(c.name.clone()),
            ..Default::default()
        };
        docker
            .create_container(Some(opts), body)
            .await
            .map_err(|e| {
                if is_status(&e, 404) {
                    Error::not_found(
                        "image",
                        c.image.clone(),
                        " in the local Docker engine (pull or build it first)",
                    )
                    .with_source(e)
                } else if is_status(&e, 409) {
                    Error::already_exists(
                        NAME,
                        format!("a container named `{}` already exists", c.name),
                    )
                    .with_source(e)
                } else {
                    engine_err(&format!("creating container {}", c.name))(e)
                }
            })?;
        docker
            .start_container(&c.name, None::<StartContainerOptions>)
            .await
            .map_err(engine_err(&format!("starting container {}", c.name)))
    }

    async fn remove_all(&self, names: &[String]) {
        if let Ok(docker) = self.docker().await {
            for n in names {
                let opts = RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                };
                let _ = docker.remove_container(n, Some(opts)).await;
            }
        }
    }
}

#[async_trait]
impl Backend for LocalDockerScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        workspace: WorkspaceSupport::LocalImage,
        runs_locally: true,
        dependencies: true,
        hang_watch: true,
        ..Capabilities::ALL
    };
    type Opts = LocalDockerOpts;
    type Request = DockerJob;
    type Facts = render::CopiedEnv;

    async fn dryrun_facts(&self, opts: &LocalDockerOpts) -> Result<Option<render::CopiedEnv>> {
        let patterns = opts.copy_env.as_deref().unwrap_or_default();
        Ok(Some(render::CopiedEnv(
            std::env::vars()
                .filter(|(k, _)| patterns.iter().any(|p| crate::workspace::fnmatch(p, k)))
                .collect(),
        )))
    }

    fn render(
        &self,
        app: &AppDef,
        opts: &LocalDockerOpts,
        ctx: &DryRunContext,
        copied: Option<&render::CopiedEnv>,
    ) -> Result<DockerJob> {
        let mut job = render(app, opts, ctx, copied)?;
        for c in &mut job.containers {
            c.labels
                .insert(render::LABEL_STATE_DIR.into(), self.state_dir.clone());
        }
        // The recovery contract, dependencies and the hang watch need torchx's supervisor:
        // Docker's restart policy can neither tell a requeue from a failure nor hold a
        // container back, and nothing of Docker's notices a quiet container.
        if app
            .roles
            .iter()
            .any(|r| r.uses_recovery() || r.hang_timeout.is_some())
            || !ctx.after.is_empty()
        {
            let log_dir = self.log_base.join(&ctx.session_name).join(&job.app_id);
            job.supervised = Some(supervised::supervised(&job, app, log_dir, &ctx.after)?);
        }
        Ok(job)
    }

    /// Each image a role runs (not a workspace image `run` builds): on the engine, else in
    /// its registry (Docker pulls it at start), else certain to fail.
    async fn plan(&self, _job: &DockerJob, info: &DryRunInfo) -> Result<PlanReport> {
        let mut report = PlanReport {
            start: Some("now".into()),
            ..PlanReport::default()
        };
        let docker = match self.docker().await {
            Ok(d) => d,
            Err(e) => {
                report
                    .checks
                    .push(PlanCheck::unknown("engine", e.to_string()));
                return Ok(report);
            }
        };
        let built: Vec<&str> = info.images.iter().map(|i| i.image.as_str()).collect();
        let mut seen = Vec::new();
        for role in &info.app.roles {
            let image = role.image.as_str();
            if built.contains(&image) || seen.contains(&image) {
                continue;
            }
            seen.push(image);
            let check = format!("image {image}");
            if docker.inspect_image(image).await.is_ok() {
                report.checks.push(PlanCheck::ok(check, "on the engine"));
                continue;
            }
            let creds =
                crate::workspace::docker::credentials(crate::workspace::docker::registry_of(image))
                    .ok()
                    .flatten();
            match docker.inspect_registry_image(image, creds).await {
                Ok(_) => report
                    .checks
                    .push(PlanCheck::ok(check, "in its registry (pulled at start)")),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 401 | 403 | 404,
                    message,
                }) => report.checks.push(PlanCheck::fails(
                    check,
                    format!("neither on the engine nor in its registry: {message}"),
                    "build or push the image, or fix its name and tag",
                )),
                Err(e) => report.checks.push(PlanCheck::unknown(
                    check,
                    format!("not on the engine, and its registry did not answer: {e}"),
                )),
            }
        }
        Ok(report)
    }

    async fn submit(&self, job: &DockerJob, info: &DryRunInfo) -> Result<String> {
        let docker = self.docker().await?;
        let network = self.ensure_network(docker).await?;
        if let Some(req) = &job.supervised {
            let host = supervised::host_checkpoint_dir(&req.log_dir);
            std::fs::create_dir_all(&host)
                .map_err(|e| Error::io(format!("creating {}", host.display()), e))?;
            return Backend::submit(&self.supervised, req, info).await;
        }
        let mut created = Vec::new();
        for c in &job.containers {
            let result = self.create_and_start(docker, c, &network).await;
            created.push(c.name.clone());
            if let Err(e) = result {
                // Nothing half-started: remove what this submission created.
                let ours: Vec<String> = if e.kind() == ErrorKind::AlreadyExists {
                    created[..created.len() - 1].to_vec()
                } else {
                    created
                };
                self.remove_all(&ours).await;
                return Err(e);
            }
        }
        Ok(job.app_id.clone())
    }

    /// The app's containers as the engine holds them (`docker inspect`: image, command,
    /// environment, mounts, labels, state), for as long as they exist.
    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let docker = self.docker().await?;
        let opts = ListContainersOptions {
            all: true,
            filters: Some(label_filter(Some(app_id))),
            ..Default::default()
        };
        let summaries = docker
            .list_containers(Some(opts))
            .await
            .map_err(engine_err("listing containers"))?;
        let mut containers = Vec::new();
        for id in summaries.into_iter().filter_map(|s| s.id) {
            let inspect = docker
                .inspect_container(
                    &id,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                )
                .await
                .map_err(engine_err("inspecting a container"))?;
            containers.push(serde_json::to_value(inspect).unwrap_or_default());
        }
        containers.sort_by(|a, b| a["Name"].as_str().cmp(&b["Name"].as_str()));
        Ok((!containers.is_empty())
            .then(|| serde_json::json!({"app_id": app_id, "containers": containers})))
    }

    /// Only supervised apps are watched for hangs: their stacks are the supervisor's.
    async fn hang_stacks(&self, app_id: &str, attempt: Option<u32>) -> Result<Vec<HangStacks>> {
        if self.supervised_describe(app_id).await?.is_some() {
            return Backend::hang_stacks(&self.supervised, app_id, attempt).await;
        }
        if self.find(Some(app_id)).await?.is_empty() {
            return Err(Error::not_found("app", app_id, ""));
        }
        Ok(Vec::new())
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        if let Some(resp) = self.supervised_describe(app_id).await? {
            return Ok(Some(resp));
        }
        let found = self.find(Some(app_id)).await?;
        if found.is_empty() {
            return Ok(None);
        }
        let cancelled = self.cancelled_dir.join(app_id).exists();
        let found: Vec<Found> = found
            .into_iter()
            .map(|mut f| {
                if cancelled && f.state == AppState::Failed {
                    f.state = AppState::Cancelled;
                }
                f
            })
            .collect();
        let mut state = app_state(found.iter().map(|f| f.state));
        if cancelled && state.is_terminal() && state != AppState::Succeeded {
            state = AppState::Cancelled;
        }
        let mut resp = DescribeAppResponse::new(app_id, state);
        resp.num_restarts = found.iter().map(|f| f.restarts).max().unwrap_or(0);
        let oom: Vec<String> = found
            .iter()
            .filter(|f| f.oom && f.state == AppState::Failed)
            .map(|f| format!("{}/{}", f.role, f.replica))
            .collect();
        if !oom.is_empty() {
            resp.msg = format!(
                "{} killed for using too much memory (oom: the engine's OOMKilled)",
                oom.join(", ")
            );
        }
        for f in &found {
            resp.add_replica(ReplicaStatus::new(f.replica, f.state, &f.role, &f.name));
        }
        resp.roles_from_statuses();
        Ok(Some(resp))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        let found = self.find(None).await?;
        // Per app: its containers' states, the first start, the last end, and whether it is
        // another state directory's (or says none: Python TorchX's, or an older torchx's).
        type Seen = (Vec<AppState>, Option<f64>, Option<f64>, bool);
        let mut apps: BTreeMap<String, Seen> = BTreeMap::new();
        for f in found {
            let e = apps.entry(f.app_id).or_default();
            e.3 |= f.state_dir.as_deref() != Some(self.state_dir.as_str());
            e.0.push(f.state);
            e.1 = match (e.1, f.created) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            e.2 = match (e.2, f.finished) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        let mut out: Vec<ListAppResponse> = apps
            .into_iter()
            .map(|(app_id, (states, created, finished, other_state_dir))| {
                let state = app_state(states);
                ListAppResponse {
                    name: app_id
                        .rsplit_once('-')
                        .map_or(app_id.clone(), |(n, _)| n.to_string()),
                    state,
                    app_id,
                    app_handle: String::new(),
                    start_time: created,
                    // Ended once every container has: the last of them.
                    end_time: finished.filter(|_| state.is_terminal()),
                    other_state_dir,
                }
            })
            .collect();
        if self.supervised.has_ledger() {
            out.extend(Backend::list(&self.supervised).await?);
        }
        crate::specs::sort_newest_first(&mut out);
        Ok(out)
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        if self.supervised_describe(app_id).await?.is_some() {
            return Backend::cancel(&self.supervised, app_id).await;
        }
        let found = self.find(Some(app_id)).await?;
        if found.is_empty() {
            return Err(Error::app_not_found(
                format!("{NAME}://{app_id}"),
                ", no container carries its label",
            ));
        }
        crate::schedulers::create_private_dir(&self.cancelled_dir)?;
        let marker = self.cancelled_dir.join(app_id);
        std::fs::write(&marker, b"")
            .map_err(|e| Error::io(format!("recording the cancel in {}", marker.display()), e))?;
        let docker = self.docker().await?;
        // All at once: a cancel costs one grace period, whatever the replica count.
        let stops = found.iter().map(|f| {
            let docker = &docker;
            async move {
                let opts = StopContainerOptions {
                    t: Some(10),
                    ..Default::default()
                };
                match docker.stop_container(&f.name, Some(opts)).await {
                    Ok(()) => Ok(()),
                    Err(e) if is_status(&e, 304) || is_status(&e, 404) => Ok(()),
                    Err(e) => Err(engine_err(&format!("stopping {}", f.name))(e)),
                }
            }
        });
        futures_util::future::join_all(stops)
            .await
            .into_iter()
            .collect::<Result<Vec<()>>>()?;
        Ok(())
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        if self.supervised_describe(app_id).await?.is_some() {
            return Backend::delete(&self.supervised, app_id).await;
        }
        let found = self.find(Some(app_id)).await?;
        if found.is_empty() {
            return Err(Error::app_not_found(
                format!("{NAME}://{app_id}"),
                ", no container carries its label",
            ));
        }
        let names: Vec<String> = found.into_iter().map(|f| f.name).collect();
        self.remove_all(&names).await;
        let _ = std::fs::remove_file(self.cancelled_dir.join(app_id));
        Ok(())
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        if self.supervised_describe(replica.app_id).await?.is_some() {
            return Backend::log_iter(&self.supervised, replica, query).await;
        }
        let Replica { app_id, role, k } = replica;
        let found = self.find(Some(app_id)).await?;
        if found.is_empty() {
            return Err(Error::app_not_found(
                format!("{NAME}://{app_id}"),
                ", no container carries its label",
            ));
        }
        let name = container_name(app_id, role, k);
        if !found.iter().any(|f| f.name == name) {
            return Err(Error::not_found(
                "replica",
                format!("{role}/{k}"),
                format!(" in app {app_id}"),
            ));
        }
        let secs = |t: Option<std::time::SystemTime>| {
            t.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs() as i32)
        };
        let streams = query.streams.unwrap_or(Stream::Combined);
        let opts = LogsOptions {
            follow: query.should_tail,
            stdout: streams != Stream::Stderr,
            stderr: streams != Stream::Stdout,
            since: secs(query.since),
            until: secs(query.until),
            timestamps: false,
            tail: "all".into(),
        };
        let docker = self.docker().await?.clone();
        let stream = docker.logs(&name, Some(opts)).map(|item| {
            item.map(|o| o.into_bytes().to_vec())
                .map_err(engine_err("reading logs"))
        });
        Ok(Box::new(DockerLogLines {
            stream: Box::pin(stream),
            lines: LineBuffer::default(),
            done: false,
        }))
    }
}

/// The file lock that serialises the creation of the `torchx` network (TorchX's own lock
/// file), held while the returned file is open.
fn network_lock() -> Result<std::fs::File> {
    let lock_path = std::env::temp_dir().join("torchx_docker_network_lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(format!("opening {}", lock_path.display()), e))?;
    lock.lock()
        .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
    Ok(lock)
}
