//! `lsf`: one LSF job per replica, each running the replica's container with `docker run`
//! (TorchX's design). App handles are `lsf://{session}/{app id}`; the app id is the LSF project
//! of all its jobs.
//!
//! - `opts`: run options; `render`: the pure submit script; `state`: `bjobs` parsing and
//!   state mapping; this module: the LSF commands (`bhosts`, `bsub` through the script, `bjobs`,
//!   `bkill`), each with a timeout, and the log follower.

mod opts;
mod render;
mod state;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub(crate) use opts::LsfOpts;
pub(crate) use render::{render, LsfBsub, LsfFacts};

use self::state::{app_state, job_state, parse_bjobs, JobLine};
use crate::error::{Error, Result};
use crate::scheduler::{
    follow_file, ArrayRequest, ArrayTask, Backend, Capabilities, DryRunContext, DryRunInfo, Follow,
    FollowedFile, LogLines, LogQuery, Replica, Scheduler, Step, Take,
};
use crate::schedulers::command::{self, Output};
use crate::schedulers::probe_cache::{on_path, stamp, ProbeCache};
use crate::schedulers::{blocking, off_executor};
use crate::specs::{AppDef, AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus, Stream};

/// The registry name.
pub(crate) const NAME: &str = "lsf";
const TIMEOUT: Duration = Duration::from_secs(60);

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub(crate) fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(LsfScheduler {
        state_dir: crate::schedulers::default_state_dir().join(NAME),
    }))
}

/// The LSF scheduler.
#[derive(Debug, Clone)]
pub(crate) struct LsfScheduler {
    /// Submit scripts (without a jobdir) and deleted-app markers.
    state_dir: PathBuf,
}

/// What cached `bhosts` output is valid for: the `bhosts` on PATH, `lsf.conf` and the cluster
/// files beside it (`lsf.cluster.<name>` lists the hosts), so a changed cluster is noticed.
fn bhosts_key() -> String {
    let envdir =
        std::env::var_os("LSF_ENVDIR").map_or_else(|| PathBuf::from("/etc"), PathBuf::from);
    let mut files = vec![on_path("bhosts"), envdir.join("lsf.conf")];
    if let Ok(entries) = std::fs::read_dir(&envdir) {
        let mut clusters: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("lsf.cluster."))
            })
            .collect();
        clusters.sort();
        files.extend(clusters);
    }
    files.iter().map(|f| stamp(f)).collect::<Vec<_>>().join("|")
}

fn run(program: &str, args: &[&str]) -> Result<Output> {
    command::run(NAME, program, args, &[], TIMEOUT, "is this an LSF host?")
}

fn run_ok(program: &str, args: &[&str]) -> Result<String> {
    run(program, args)?.stdout_if_ok(NAME, program, args)
}

impl LsfScheduler {
    /// The hosts (`bhosts`) the rank-0 host is chosen from, cached in the state dir for a few
    /// minutes per cluster; why they could not be asked otherwise.
    fn bhosts_facts(&self) -> LsfFacts {
        let key = bhosts_key();
        let cache = ProbeCache::new(self.state_dir.join("bhosts.json"));
        if let Some(hosts) = cache.get::<String>(&key) {
            return LsfFacts { bhosts: Ok(hosts) };
        }
        let probe = command::run(
            NAME,
            "bhosts",
            &["-noheader", "-o", "hname max ng"],
            &[],
            Duration::from_secs(5),
            "is this an LSF host?",
        );
        let bhosts = match probe {
            Ok(o) if o.ok => {
                cache.put(&key, &o.stdout);
                Ok(o.stdout)
            }
            Ok(o) => Err(format!("`bhosts` failed: {}", o.stderr.trim())),
            Err(e) => Err(e.to_string()),
        };
        LsfFacts { bhosts }
    }

    fn deleted_marker(&self, app_id: &str) -> PathBuf {
        self.state_dir.join("deleted").join(app_id)
    }

    /// The app's jobs (an array task's: its element), unless `delete` removed it from view.
    fn jobs(&self, app_id: &str) -> Result<Vec<JobLine>> {
        let (project, task) = split_task(app_id);
        if self.deleted_marker(app_id).exists() || self.deleted_marker(project).exists() {
            return Ok(Vec::new());
        }
        let out = bjobs(project, "proj name stat exit_code")?;
        Ok(parse_bjobs(&out)
            .into_iter()
            .filter(|j| j.proj == project)
            .filter(|j| task.is_none_or(|t| element_of(&j.name).1 == Some(t + 1)))
            .collect())
    }

    /// A field of each job of the app's project, by job name (`bjobs -o "name FIELD"`).
    fn job_field(&self, app_id: &str, field: &str) -> Result<BTreeMap<String, String>> {
        let out = bjobs(split_task(app_id).0, &format!("name {field}"))?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?.to_string(), f.next()?.to_string()))
            })
            .collect())
    }
}

/// `bjobs` output for every job (finished too) of project `app_id`, with the given `-o` fields.
fn bjobs(app_id: &str, fields: &str) -> Result<String> {
    run_ok("bjobs", &["-noheader", "-a", "-P", app_id, "-o", fields])
}

/// An app id as a project and, for a job array's task, its index: `<project>_<index>` (a
/// project ends in `-<unique>`, never in `_<digits>`).
fn split_task(app_id: &str) -> (&str, Option<u32>) {
    match app_id.rsplit_once('_') {
        Some((project, t)) if project.contains('-') && t.bytes().all(|b| b.is_ascii_digit()) => {
            match t.parse() {
                Ok(t) => (project, Some(t)),
                Err(_) => (app_id, None),
            }
        }
        _ => (app_id, None),
    }
}

/// A job array element's name and LSF index: `name[7]` → (`name`, 7).
fn element_of(job_name: &str) -> (&str, Option<u32>) {
    job_name
        .strip_suffix(']')
        .and_then(|n| n.rsplit_once('['))
        .and_then(|(name, i)| Some((name, Some(i.parse().ok()?))))
        .unwrap_or((job_name, None))
}

/// `{project}-{role}-{i}` (an array element's `[k]` aside) → (role, i).
fn replica_of(app_id: &str, job_name: &str) -> Option<(String, u32)> {
    let rest = element_of(job_name)
        .0
        .strip_prefix(split_task(app_id).0)?
        .strip_prefix('-')?;
    let (role, idx) = rest.rsplit_once('-')?;
    Some((role.to_string(), idx.parse().ok()?))
}

fn unknown_app(app_id: &str) -> Error {
    Error::app_not_found(
        format!("{NAME}://{app_id}"),
        " (bjobs knows no such project)",
    )
}

#[async_trait]
impl Backend for LsfScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        log_since_until: false,
        retries: false,
        dependencies: true,
        ..Capabilities::ALL
    };
    type Opts = LsfOpts;
    type Request = LsfBsub;
    type Facts = LsfFacts;

    async fn dryrun_facts(&self, _opts: &LsfOpts) -> Result<Option<LsfFacts>> {
        off_executor(self, |s| Ok(Some(s.bhosts_facts()))).await
    }

    fn render(
        &self,
        app: &AppDef,
        opts: &LsfOpts,
        ctx: &DryRunContext,
        facts: Option<&LsfFacts>,
    ) -> Result<LsfBsub> {
        render(app, opts, ctx, facts)
    }

    fn render_array(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        opts: &LsfOpts,
        ctx: &DryRunContext,
        _facts: Option<&LsfFacts>,
    ) -> Result<ArrayRequest<LsfBsub>> {
        render::render_array(tasks, max_concurrent, opts, ctx)
    }

    async fn submit(&self, job: &LsfBsub, _info: &DryRunInfo) -> Result<String> {
        let job = job.clone();
        off_executor(self, move |s| s.submit_now(&job)).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.describe_now(&app_id)).await
    }

    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.describe_native_now(&app_id)).await
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        off_executor(self, |s| s.list_now()).await
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.cancel_now(&app_id)).await
    }

    /// Stops what still runs and hides the app from torchx (LSF purges its own job history).
    async fn delete(&self, app_id: &str) -> Result<()> {
        let app_id = app_id.to_string();
        off_executor(self, move |s| s.delete_now(&app_id)).await
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        crate::schedulers::log_lines_off_executor(self, replica, query, LsfScheduler::log_lines_now)
            .await
    }
}

/// The blocking halves of the `Scheduler` methods.
impl LsfScheduler {
    fn submit_now(&self, job: &LsfBsub) -> Result<String> {
        if let Some(why) = &job.rank0_unknown {
            return Err(Error::backend(
                NAME,
                format!("cannot choose the rank-0 host: {why}"),
            ));
        }
        let dir = match &job.jobdir {
            Some(d) => PathBuf::from(d),
            None => self.state_dir.join("scripts"),
        };
        crate::schedulers::create_private_dir(&dir)?;
        // It carries the job's environment (tokens passed with --env among it).
        let path = dir.join(format!("{}.sh", job.app_id));
        crate::schedulers::write_private_file(&path, job.script.as_bytes())?;
        let path_str = path.display().to_string();
        let out = run("/bin/bash", &[&path_str])?;
        if !out.ok {
            // Whatever was submitted before the failure goes again.
            let _ = self.cancel_now(&job.app_id);
            return Err(Error::backend(
                NAME,
                format!("submitting with {path_str} failed: {}", out.stderr.trim()),
            ));
        }
        Ok(job.app_id.clone())
    }

    fn describe_now(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let jobs = self.jobs(app_id)?;
        if jobs.is_empty() {
            return Ok(None);
        }
        let states: Vec<AppState> = jobs
            .iter()
            .map(|j| job_state(&j.stat, j.exit_code))
            .collect();
        let mut resp = DescribeAppResponse::new(app_id, app_state(&states));
        for (j, st) in jobs.iter().zip(&states) {
            let (role, idx) = replica_of(app_id, &j.name).unwrap_or((j.name.clone(), 0));
            resp.add_replica(ReplicaStatus::new(idx, *st, &role, ""));
        }
        resp.roles_from_statuses();
        Ok(Some(resp))
    }

    /// What LSF holds of the app (each job's name, id and state, `bjobs`) and the submit
    /// script that made them (its `bsub` calls with each job's script), where it is still on
    /// this host: in the jobdir (`bjobs`' output_dir) or this state directory.
    fn describe_native_now(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let project = split_task(app_id).0;
        if self.jobs(app_id)?.is_empty() {
            return Ok(None);
        }
        let ids = self.job_field(app_id, "jobid")?;
        let stats = self.job_field(app_id, "stat")?;
        let jobs: Vec<_> = ids
            .iter()
            .map(|(name, id)| serde_json::json!({"name": name, "jobid": id, "stat": stats.get(name)}))
            .collect();
        let jobdir = self
            .job_field(app_id, "output_dir")?
            .into_values()
            .find(|d| d != "-");
        let script = jobdir
            .iter()
            .map(PathBuf::from)
            .chain([self.state_dir.join("scripts")])
            .find_map(|dir| std::fs::read_to_string(dir.join(format!("{project}.sh"))).ok());
        Ok(Some(serde_json::json!({
            "app_id": project,
            "jobdir": jobdir,
            "script": script,
            "jobs": jobs,
        })))
    }

    fn list_now(&self) -> Result<Vec<ListAppResponse>> {
        let out = run_ok(
            "bjobs",
            &["-noheader", "-a", "-o", "proj name stat exit_code"],
        )?;
        let mut apps: BTreeMap<String, Vec<AppState>> = BTreeMap::new();
        for j in parse_bjobs(&out) {
            // Only torchx's jobs: named after their project.
            if replica_of(&j.proj, &j.name).is_none() || self.deleted_marker(&j.proj).exists() {
                continue;
            }
            apps.entry(j.proj.clone())
                .or_default()
                .push(job_state(&j.stat, j.exit_code));
        }
        Ok(apps
            .into_iter()
            .map(|(app_id, states)| ListAppResponse {
                name: app_id
                    .rsplit_once('-')
                    .map_or(app_id.clone(), |(n, _)| n.to_string()),
                state: app_state(&states),
                app_id,
                app_handle: String::new(),
                start_time: None,
                end_time: None,
                other_state_dir: false,
            })
            .collect())
    }

    fn cancel_now(&self, app_id: &str) -> Result<()> {
        let jobs = self.jobs(app_id)?;
        if jobs.is_empty() {
            return Err(unknown_app(app_id));
        }
        let ids = self.job_field(app_id, "jobid")?;
        let live: Vec<String> = jobs
            .iter()
            .filter(|j| !job_state(&j.stat, j.exit_code).is_terminal())
            .filter_map(|j| {
                let id = ids.get(&j.name)?;
                // An array element is `ID[index]` (`ID` alone is every element).
                Some(match element_of(&j.name).1 {
                    Some(i) => format!("{id}[{i}]"),
                    None => id.clone(),
                })
            })
            .collect();
        let live: Vec<&str> = live.iter().map(String::as_str).collect();
        if live.is_empty() {
            return Ok(());
        }
        run_ok("bkill", &live).map(|_| ())
    }

    fn delete_now(&self, app_id: &str) -> Result<()> {
        self.cancel_now(app_id)?;
        let marker = self.deleted_marker(app_id);
        if let Some(dir) = marker.parent() {
            crate::schedulers::create_private_dir(dir)?;
        }
        std::fs::write(&marker, b"")
            .map_err(|e| Error::io(format!("recording the delete in {}", marker.display()), e))
    }

    fn log_lines_now(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        let ext =
            match query.streams {
                None | Some(Stream::Stdout) => "out",
                Some(Stream::Stderr) => "err",
                Some(Stream::Combined) => return Err(Error::unsupported(
                    NAME,
                    "the combined log stream (LSF jobs write stdout and stderr to separate files)",
                )),
            };
        let jobs = self.jobs(app_id)?;
        if jobs.is_empty() {
            return Err(unknown_app(app_id));
        }
        let job = jobs
            .iter()
            .find(|j| {
                replica_of(app_id, &j.name)
                    .is_some_and(|(r, i)| r == render::cleanup_str(role) && i == k)
            })
            .ok_or_else(|| {
                Error::not_found(
                    "replica",
                    format!("{role}/{k}"),
                    format!(" in app {app_id}"),
                )
            })?
            .name
            .clone();
        let dirs = self.job_field(app_id, "output_dir")?;
        let dir = dirs
            .get(&job)
            .filter(|d| d.as_str() != "-")
            .ok_or_else(|| {
                Error::config(format!(
                "app {app_id} was submitted without a jobdir, so LSF kept no logs; submit with \
                 the run option jobdir"
            ))
            })?;
        Ok(Box::new(LsfLogLines {
            file: FollowedFile::new(PathBuf::from(dir).join(format!("{job}.{ext}"))),
            tail: query.should_tail,
            app_id: app_id.to_string(),
            job,
            scheduler: self.clone(),
        }))
    }
}

/// Lines of a replica's log file, followed until its job ends when tailing.
struct LsfLogLines {
    file: FollowedFile,
    tail: bool,
    app_id: String,
    job: String,
    scheduler: LsfScheduler,
}

#[async_trait]
impl Follow for LsfLogLines {
    /// Polls the file until it has what `take` asks for or ends.
    async fn follow(&mut self, take: Take<'_>) -> Result<Step> {
        let (scheduler, app_id, job) = (&self.scheduler, &self.app_id, &self.job);
        let ended = || {
            let (scheduler, app_id, job) = (scheduler.clone(), app_id.clone(), job.clone());
            blocking(NAME, move || {
                Ok(scheduler.jobs(&app_id).map_or(true, |jobs| {
                    jobs.iter()
                        .filter(|j| j.name == job)
                        .all(|j| job_state(&j.stat, j.exit_code).is_terminal())
                }))
            })
        };
        let interval = Duration::from_millis(300);
        follow_file(&mut self.file, take, self.tail, interval, ended).await
    }
}

#[cfg(test)]
mod tests;
