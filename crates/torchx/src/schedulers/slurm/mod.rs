//! `slurm`: one heterogeneous `sbatch` job per app, one het group per replica.
//!
//! - `opts`: run options; `render`: the pure sbatch script; `state`: state mapping and the
//!   squeue/sacct parsers for Slurm 22.05–25.05; `blocking`: the commands each operation runs
//!   (`sbatch`, `squeue`, `sacct`, `scancel`, `scontrol`); this module: the `Backend`, which
//!   runs them on the blocking pool, the probes (`sinfo`) and the command runner (timeouts).
//!
//! Job directories (where the script runs and the `slurm-<id>-<role>-<i>.{out,err}` logs go) are
//! remembered in `$TORCHX_STATE_DIR/slurm/job_dirs` and, as TorchX does, in
//! `./.torchxslurmjobdirs`, so that `torchx log` works from any directory.

mod blocking;
mod logs;
mod opts;
mod plan;
mod recovery;
mod render;
mod state;

use crate::scheduler::HangStacks;
use crate::specs::EndReason;
use std::fs::{self};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

pub use opts::SlurmOpts;
pub use render::{
    parse_version, quote_with_app_id, render, ReplicaRequest, SbatchRequest, SlurmFacts,
};
pub use state::{
    aggregate, app_state, parse_list, parse_list_parsable, parse_sacct_json, parse_sacct_parsable,
    parse_squeue, Component, JobRef, ListedJob, KNOWN_STATES,
};

use crate::error::{Error, ErrorKind, Result};
use crate::scheduler::{
    ArrayRequest, ArrayTask, Backend, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery,
    PlanReport, Replica, Scheduler, WorkspaceSupport,
};
use crate::schedulers::command::{self, Output};
use crate::schedulers::off_executor;
use crate::schedulers::probe_cache::{on_path, stamp, ProbeCache};
use crate::specs::{AppDef, AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus};

/// The registry name.
pub const NAME: &str = "slurm";
/// TorchX's job-dir index, in the submitting directory.
pub const JOB_DIRS_FILE: &str = ".torchxslurmjobdirs";
/// How long a probe (`sinfo`) may take: a dead controller must not stall a dry run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// The columns `sacct --parsable2` is asked for ([`parse_sacct_parsable`] reads them).
const SACCT_FIELDS: &str = "JobID,JobName,State,ExitCode,NodeList";
/// How long any other Slurm command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(SlurmScheduler::new(
        crate::schedulers::default_state_dir(),
    )))
}

/// The Slurm scheduler (talks to the cluster through its command-line tools, off the async
/// executor: each operation runs on tokio's blocking pool with a clone of this handle).
#[derive(Debug, Clone)]
pub struct SlurmScheduler {
    state_dir: PathBuf,
    /// `sinfo` results, probed at most once per process.
    probe: Arc<Mutex<Option<Probe>>>,
    /// The last `squeue --json --me` output: describing many jobs within one poll interval
    /// costs one squeue call, not one per job.
    squeue: Arc<Mutex<Option<(Instant, String)>>>,
}

/// How long one `squeue` answer serves every describe.
const SQUEUE_TTL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Probe {
    version: Option<String>,
    /// (partition, is default, memory MB) from `sinfo --format %P,%m --noconvert`.
    partitions: Vec<(String, bool, i64)>,
}

/// What a cached probe is valid for: the `sinfo` found on PATH and the cluster configuration
/// (`$SLURM_CONF`, else Debian's path), so an upgraded Slurm or a changed partition table is
/// noticed at once.
fn probe_key() -> String {
    let conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"));
    format!("{}|{}", stamp(&on_path("sinfo")), stamp(&conf))
}

/// Runs a Slurm command with a timeout, times as epoch seconds whatever the cluster's zone.
fn run(program: &str, args: &[&str], timeout: Duration) -> Result<Output> {
    command::run(
        NAME,
        program,
        args,
        &[("SLURM_TIME_FORMAT", "%s")],
        timeout,
        "is this a Slurm login node?",
    )
}

/// Runs a command that must succeed.
fn run_ok(program: &str, args: &[&str]) -> Result<String> {
    run(program, args, COMMAND_TIMEOUT)?.stdout_if_ok(NAME, program, args)
}

fn parse_job_id(app_id: &str) -> Result<JobRef> {
    app_id.parse::<JobRef>().map_err(|()| {
        Error::arg(format!(
            "invalid slurm job id `{app_id}`: slurm job ids are positive numbers, array tasks \
             `<job id>_<task id>`"
        ))
    })
}

fn unknown_app(app_id: &str) -> Error {
    Error::app_not_found(
        format!("{NAME}://{app_id}"),
        ", slurm does not know this job",
    )
}

impl SlurmScheduler {
    /// A scheduler keeping its job-dir index under `state_dir`.
    pub fn new(state_dir: PathBuf) -> Self {
        SlurmScheduler {
            state_dir,
            probe: Arc::new(Mutex::new(None)),
            squeue: Arc::new(Mutex::new(None)),
        }
    }

    fn probe(&self) -> Probe {
        let mut guard = match self.probe.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(p) = guard.as_ref() {
            return p.clone();
        }
        let key = probe_key();
        let cache = ProbeCache::new(self.state_dir.join(NAME).join("probe.json"));
        if let Some(cached) = cache.get::<Probe>(&key) {
            *guard = Some(cached.clone());
            return cached;
        }
        let mut probe = Probe::default();
        match run("sinfo", &["--version"], PROBE_TIMEOUT) {
            Ok(o) if o.ok => probe.version = Some(o.stdout.trim().to_string()),
            Ok(o) => log::warn!("`sinfo --version` failed ({}); assuming Slurm 24.05 (pin it with the run option slurm_version=X.Y)", o.stderr.trim()),
            Err(e) => log::warn!("{e}; assuming Slurm 24.05 (pin it with the run option slurm_version=X.Y)"),
        }
        if probe.version.is_some() {
            if let Ok(o) = run(
                "sinfo",
                &["--format", "%P,%m", "--noconvert"],
                PROBE_TIMEOUT,
            ) {
                probe.partitions = o
                    .stdout
                    .lines()
                    .skip(1)
                    .filter_map(|l| {
                        let (p, m) = l.split_once(',')?;
                        let mem = m.trim().trim_end_matches(['M', '+']).parse().ok()?;
                        Some((p.trim_end_matches('*').to_string(), p.ends_with('*'), mem))
                    })
                    .collect();
            }
        }
        if probe.version.is_some() {
            cache.put(&key, &probe);
        }
        *guard = Some(probe.clone());
        probe
    }

    /// This user's jobs as `squeue --json` (cached for [`SQUEUE_TTL`]; 22.05 ignores job
    /// filters in JSON mode anyway, so the parsers filter themselves).
    /// With `fresh`, always asks squeue (a job newer than the cached answer is not in it).
    /// `squeue --json --me`, shared for [`SQUEUE_TTL`] unless `fresh` is asked for; the flag
    /// says whether the answer is fresh. A failure means the controller did not answer.
    fn squeue_json(&self, fresh: bool) -> Result<(String, bool)> {
        let mut cache = self
            .squeue
            .lock()
            .map_err(|_| Error::backend(NAME, "the squeue cache lock is poisoned"))?;
        if let Some((at, text)) = cache.as_ref() {
            if !fresh && at.elapsed() < SQUEUE_TTL {
                return Ok((text.clone(), false));
            }
        }
        let out = run("squeue", &["--json", "--me"], COMMAND_TIMEOUT)?;
        if !out.ok {
            return Err(Error::backend(
                NAME,
                format!(
                    "cannot reach the Slurm controller: `squeue --json --me` failed: {}",
                    out.stderr.trim()
                ),
            )
            .with_kind(ErrorKind::Unavailable));
        }
        *cache = Some((Instant::now(), out.stdout.clone()));
        Ok((out.stdout, true))
    }

    /// The job's components: squeue while Slurm still holds the job, else accounting. Empty
    /// only when the controller answered without the job and accounting has no record of it;
    /// a controller that did not answer is an error, never "no such job".
    /// The job's components as accounting has them (`sacct --parsable2`, which answers in a
    /// quarter of the time `--json` takes); `None` when it knows nothing.
    fn accounted(&self, job_id: JobRef) -> Option<Vec<Component>> {
        let id = job_id.to_string();
        let args = ["--parsable2", "-o", SACCT_FIELDS, "-j", &id];
        let o = run("sacct", &args, COMMAND_TIMEOUT).ok()?;
        let c = parse_sacct_parsable(&o.stdout, job_id);
        (o.ok && !c.is_empty()).then_some(c)
    }

    fn components(&self, job_id: JobRef) -> Result<Vec<Component>> {
        let id = job_id.to_string();
        let mut unreachable = None;
        for fresh in [false, true] {
            match self.squeue_json(fresh) {
                Ok((text, was_fresh)) => {
                    let c = parse_squeue(&text, job_id)?;
                    // A job cancelled just after its step launched stays COMPLETING in squeue
                    // for Slurm's own wait (over a minute); accounting already has its end.
                    // Only a cancel: a failed attempt may be requeueing itself (max_retries),
                    // and its accounted FAILED is not the job's end.
                    if c.iter().any(|x| x.slurm_state == "COMPLETING") {
                        if let Some(ended) = self.accounted(job_id) {
                            if ended.iter().all(|x| x.state == AppState::Cancelled) {
                                return Ok(ended);
                            }
                        }
                    }
                    if !c.is_empty() {
                        return Ok(c);
                    }
                    if was_fresh {
                        break;
                    }
                }
                Err(e) => {
                    unreachable = Some(e);
                    break;
                }
            }
        }
        if let Some(c) = self.accounted(job_id) {
            return Ok(c);
        }
        let found = match run("sacct", &["--json", "-j", &id], COMMAND_TIMEOUT) {
            Ok(o) if o.ok => parse_sacct_json(&o.stdout, job_id).unwrap_or_default(),
            _ => Vec::new(),
        };
        match unreachable {
            Some(e) if found.is_empty() => Err(e),
            _ => Ok(found),
        }
    }

    /// The job's status from its components and, under the recovery contract, the attempts
    /// its script records next to its logs (Slurm restarts the whole job: every replica shares
    /// them).
    fn describe_components(&self, id: JobRef, comps: &[Component]) -> DescribeAppResponse {
        let state = aggregate(comps.iter().map(|c| c.state));
        let mut resp = DescribeAppResponse::new(id.to_string(), state);
        resp.num_restarts = comps.iter().map(|c| c.restarts).max().unwrap_or(0);
        let failures: Vec<String> = comps
            .iter()
            .filter(|c| c.state == AppState::Failed)
            .map(|c| {
                let how = match (c.exit_code, c.signal) {
                    (_, Some(s)) => format!(" (signal {s})"),
                    (Some(code), _) if code != 0 => format!(" (exit code {code})"),
                    _ => String::new(),
                };
                format!("{}-{}: {}{how}", c.role, c.replica, c.slurm_state)
            })
            .collect();
        resp.msg = if failures.is_empty() {
            comps
                .first()
                .map(|c| match c.why.as_str() {
                    "" => c.slurm_state.clone(),
                    why => format!("{}: {why}", c.slurm_state),
                })
                .unwrap_or_default()
        } else {
            failures.join("; ")
        };
        let mut sorted: Vec<&Component> = comps.iter().collect();
        sorted.sort_by(|a, b| (&a.role, a.replica).cmp(&(&b.role, b.replica)));
        for c in sorted {
            resp.add_replica(ReplicaStatus::new(c.replica, c.state, &c.role, &c.hostname));
        }
        resp.roles_from_statuses();
        // As TorchX's describe: a role's image is its job's working directory and its
        // entrypoint the batch script, where Slurm's JSON has them.
        for role in &mut resp.roles {
            if let Some(c) = comps.iter().find(|c| c.role == role.name) {
                role.image.clone_from(&c.workdir);
                role.entrypoint.clone_from(&c.command);
            }
        }
        let recorded = self.torchx_dir(id).join("attempts");
        if let Ok(text) = fs::read_to_string(recorded) {
            let attempts = state::parse_attempts(&text);
            if let Some(last) = attempts
                .last()
                .filter(|a| a.reason == Some(EndReason::Hung))
            {
                if let Some(msg) = self.hung_message(id, last.attempt) {
                    resp.msg = msg;
                }
            }
            for role in &mut resp.roles_statuses {
                for replica in &mut role.replicas {
                    replica.attempts.clone_from(&attempts);
                }
            }
        }
        resp
    }

    /// Where the recovery script keeps the job's attempts, and the hang watch its stacks.
    fn torchx_dir(&self, id: JobRef) -> PathBuf {
        self.job_dir(id).join(format!("torchx-{id}"))
    }

    /// The hang watch's files of `attempt` named `{kind}.{attempt}.{role}-{replica}`, oldest
    /// replica first: (role, replica, path).
    fn hang_files(&self, id: JobRef, kind: &str, attempt: u32) -> Vec<(String, u32, PathBuf)> {
        let prefix = format!("{kind}.{attempt}.");
        let mut found: Vec<(String, u32, PathBuf)> = fs::read_dir(self.torchx_dir(id))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let (role, replica) = name.strip_prefix(&prefix)?.rsplit_once('-')?;
                Some((role.to_string(), replica.parse().ok()?, e.path()))
            })
            .collect();
        found.sort();
        found
    }

    /// What a hung attempt's status says: each hung replica, its timeout and the ranks its
    /// stacks show in a collective.
    fn hung_message(&self, id: JobRef, attempt: u32) -> Option<String> {
        let hung: Vec<String> = self
            .hang_files(id, "hung", attempt)
            .into_iter()
            .filter_map(|(role, replica, path)| {
                let text = fs::read_to_string(path).ok()?;
                let timeout = text.split_whitespace().nth(1)?;
                let stacks = fs::read_to_string(
                    self.torchx_dir(id)
                        .join(format!("stacks.{attempt}.{role}-{replica}")),
                )
                .unwrap_or_default();
                let detail = crate::schedulers::local_cwd::stacks_summary(
                    &crate::schedulers::local_cwd::parse_stacks(&stacks),
                );
                let detail = if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                };
                Some(format!(
                    "{role}/{replica} hung: no progress (output or heartbeat) for {timeout}s\
                     {detail}; its stacks: `torchx log --stacks`"
                ))
            })
            .collect();
        (!hung.is_empty()).then(|| hung.join("; "))
    }
}

#[async_trait]
impl Backend for SlurmScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        delete: false,
        log_since_until: false,
        mounts: false,
        workspace: WorkspaceSupport::Directory,
        dependencies: true,
        hang_watch: true,
        ..Capabilities::ALL
    };
    type Opts = SlurmOpts;
    type Request = SbatchRequest;
    type Facts = SlurmFacts;

    async fn dryrun_facts(&self, opts: &SlurmOpts) -> Result<Option<SlurmFacts>> {
        if opts.slurm_version.is_some() {
            return Ok(None); // pinned: no cluster needed
        }
        let partition = opts.partition.clone();
        off_executor(self, move |s| {
            let probe = s.probe();
            let partition_mem_mb = probe
                .partitions
                .iter()
                .find(|(p, default, _)| match &partition {
                    Some(want) => p == want,
                    None => *default,
                })
                .map(|(_, _, m)| *m);
            Ok(Some(SlurmFacts {
                version: probe.version,
                partition_mem_mb,
            }))
        })
        .await
    }

    /// `workspace_type=docker`: built into an image pushed to `image_repo` (the `dir` builder
    /// otherwise).
    fn workspace_support(&self, cfg: &crate::opts::Cfg) -> WorkspaceSupport {
        match cfg.get("workspace_type") {
            Some(crate::opts::CfgValue::Str(t)) if t == "docker" => WorkspaceSupport::PushedImage,
            _ => Self::CAPABILITIES.workspace,
        }
    }

    fn render(
        &self,
        app: &AppDef,
        opts: &SlurmOpts,
        ctx: &DryRunContext,
        facts: Option<&SlurmFacts>,
    ) -> Result<SbatchRequest> {
        if render::containerized(opts)? {
            // Each role's image is a container image (the workspace's, built and pushed).
            return render(app, opts, ctx, facts);
        }
        let has_workspace = app.roles.iter().any(|r| r.workspace.is_some());
        if opts.job_dir.is_none() {
            // Without job_dir the job runs in place, from the current directory (as TorchX's).
            let elsewhere = app.roles.iter().find_map(|r| {
                r.workspace
                    .as_ref()
                    .filter(|ws| !crate::workspace::is_current_dir(ws, &ctx.cwd))
            });
            if let Some(ws) = elsewhere {
                return Err(Error::config(format!(
                    "workspace `{ws}` is not the current directory ({}), where a slurm job \
                     without job_dir runs: set the run option job_dir to a new directory to run \
                     from a copy of it, or run from it",
                    ctx.cwd.display()
                )));
            }
        }
        let mut app = app.clone();
        if let (true, Some(dir)) = (has_workspace, &opts.job_dir) {
            // The job runs from its copy of the workspace.
            for r in &mut app.roles {
                r.image.clone_from(dir);
            }
        }
        render(&app, opts, ctx, facts)
    }

    fn render_array(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        opts: &SlurmOpts,
        ctx: &DryRunContext,
        facts: Option<&SlurmFacts>,
    ) -> Result<ArrayRequest<SbatchRequest>> {
        let mut rendered = Vec::with_capacity(tasks.len());
        for t in tasks {
            rendered.push((t.index, Backend::render(self, t.app, opts, ctx, facts)?));
        }
        Ok(render::array(rendered, max_concurrent))
    }

    async fn plan(&self, req: &SbatchRequest, _info: &DryRunInfo) -> Result<PlanReport> {
        let req = req.clone();
        off_executor(self, move |_| plan::plan_now(&req)).await
    }

    async fn submit(&self, req: &SbatchRequest, info: &DryRunInfo) -> Result<String> {
        let req = req.clone();
        let workspace = info.app.roles.iter().find_map(|r| r.workspace.clone());
        off_executor(self, move |s| s.submit_now(&req, workspace)).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.describe_now(&app_id)).await
    }

    async fn describe_many(&self, app_ids: &[String]) -> Result<Vec<Option<DescribeAppResponse>>> {
        let app_ids = app_ids.to_vec();
        off_executor(self, move |s| s.describe_many_now(&app_ids)).await
    }

    /// The stacks the hang watch wrote next to the job's attempts file (the last attempt that
    /// has any, or `attempt`).
    async fn hang_stacks(&self, app_id: &str, attempt: Option<u32>) -> Result<Vec<HangStacks>> {
        let id = parse_job_id(app_id)?;
        off_executor(self, move |s| {
            let attempts = fs::read_to_string(s.torchx_dir(id).join("attempts"))
                .map(|t| state::parse_attempts(&t))
                .unwrap_or_default();
            let wanted: Vec<u32> = match attempt {
                Some(n) => vec![n],
                None => attempts.iter().rev().map(|a| a.attempt).collect(),
            };
            for a in wanted {
                let found = s.hang_files(id, "stacks", a);
                if found.is_empty() {
                    continue;
                }
                return found
                    .into_iter()
                    .map(|(role, replica, path)| {
                        Ok(HangStacks {
                            role,
                            replica,
                            attempt: a,
                            text: fs::read_to_string(path)
                                .map_err(|e| Error::io("reading a replica's stacks", e))?,
                        })
                    })
                    .collect();
            }
            Ok(Vec::new())
        })
        .await
    }

    /// The batch script as slurmctld holds it (`scontrol write batch_script`), while it still
    /// knows the job (`MinJobAge` after its end).
    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let Ok(id) = parse_job_id(app_id) else {
            return Ok(None);
        };
        off_executor(self, move |_| {
            let job = id.job.to_string();
            match run(
                "scontrol",
                &["write", "batch_script", &job, "-"],
                COMMAND_TIMEOUT,
            )? {
                out if out.ok => Ok(Some(
                    serde_json::json!({"job_id": job, "script": out.stdout}),
                )),
                _ => Ok(None),
            }
        })
        .await
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        off_executor(self, |s| s.list_now()).await
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.cancel_now(&app_id)).await
    }

    async fn cancel_pending(&self, app_id: &str) -> Result<bool> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.cancel_pending_now(&app_id)).await
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        crate::schedulers::log_lines_off_executor(
            self,
            replica,
            query,
            SlurmScheduler::log_lines_now,
        )
        .await
    }
}

/// A private temporary directory for a script (sbatch's, or a plan's check).
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "torchx-slurm-{}-{}",
        std::process::id(),
        crate::scheduler::random_id()
    ));
    crate::schedulers::create_private_dir(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests;
