//! The blocking halves of the `Scheduler` methods: the Slurm commands each runs (`sbatch`,
//! `squeue`, `sacct`, `scancel`, `scontrol`), which the `Backend` calls on the blocking pool.

use std::fs;
use std::path::{Path, PathBuf};

use super::state::{
    self, parse_list, parse_list_parsable, parse_sacct_parsable, Component, JobRef,
};
use super::{
    parse_job_id, run, run_ok, tempfile_dir, unknown_app, SbatchRequest, SlurmScheduler,
    COMMAND_TIMEOUT, NAME, SACCT_FIELDS,
};
use crate::error::{Error, Result};
use crate::specs::{AppState, DescribeAppResponse, ListAppResponse, Workspace};

/// The blocking halves of the `Scheduler` methods.
impl SlurmScheduler {
    pub(super) fn submit_now(
        &self,
        req: &SbatchRequest,
        workspace: Option<Workspace>,
    ) -> Result<String> {
        let tmp;
        let script_dir = match (&req.job_dir, workspace) {
            (Some(dir), Some(ws)) => {
                crate::workspace::copy_into_job_dir(&ws, Path::new(dir))?;
                PathBuf::from(dir)
            }
            (Some(dir), None) => {
                let dir = PathBuf::from(dir);
                if !dir.is_dir() {
                    fs::create_dir(&dir)
                        .map_err(|e| Error::io(format!("creating job_dir {}", dir.display()), e))?;
                }
                dir
            }
            (None, _) => {
                tmp = tempfile_dir()?;
                tmp.clone()
            }
        };
        // It carries the job's environment (tokens passed with --env among it).
        let script = script_dir.join("torchx-sbatch.sh");
        crate::schedulers::write_private_file(&script, req.materialize().as_bytes())?;
        let mut args: Vec<String> = req.cmd[1..].to_vec();
        args.push(script.display().to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_ok(&req.cmd[0], &args);
        if req.job_dir.is_none() {
            let _ = fs::remove_dir_all(&script_dir);
        }
        let out = out?;
        // `--parsable` prints `jobid` or `jobid;cluster`.
        let job_id = out.trim().split(';').next().unwrap_or("").to_string();
        parse_job_id(&job_id).map_err(|_| {
            Error::backend(NAME, format!("sbatch printed no job id: {:?}", out.trim()))
        })?;
        let run_dir = match &req.job_dir {
            Some(d) => fs::canonicalize(d).unwrap_or_else(|_| PathBuf::from(d)),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        };
        self.remember_job_dir(&job_id, &run_dir, req.job_dir.is_some())?;
        Ok(job_id)
    }

    pub(super) fn describe_now(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        // Not a job id: no such job.
        let Ok(id) = parse_job_id(app_id) else {
            return Ok(None);
        };
        let comps = self.components(id)?;
        if comps.is_empty() {
            return Ok(None);
        }
        let requeued_het_job = comps.len() > 1
            && comps
                .iter()
                .all(|c| c.state == AppState::Pending && c.restarts > 0);
        if requeued_het_job {
            // Slurm (22.05 here) can leave a requeued heterogeneous job pending with no reason
            // until its priority is computed again; `scontrol release` does that (the job is
            // not held: nothing else changes). Best effort: the answer is the describe's.
            let _ = run("scontrol", &["release", &id.to_string()], COMMAND_TIMEOUT);
        }
        Ok(Some(self.describe_components(id, &comps)))
    }

    /// Many jobs in two Slurm calls at most: one `squeue`, then one `sacct` for those squeue
    /// no longer holds (an array's tasks by their array's id).
    pub(super) fn describe_many_now(
        &self,
        app_ids: &[String],
    ) -> Result<Vec<Option<DescribeAppResponse>>> {
        let refs: Vec<Option<JobRef>> = app_ids.iter().map(|a| a.parse().ok()).collect();
        let squeue = state::parse_squeue_value(&self.squeue_json(true)?.0)?;
        let mut comps: Vec<Vec<Component>> = refs
            .iter()
            .map(|r| r.map_or_else(Vec::new, |r| state::squeue_components(&squeue, r)))
            .collect();
        let mut missing: Vec<String> = refs
            .iter()
            .zip(&comps)
            .filter(|(_, c)| c.is_empty())
            .filter_map(|(r, _)| r.map(|r| r.job.to_string()))
            .collect();
        missing.sort();
        missing.dedup();
        if !missing.is_empty() {
            let list = missing.join(",");
            let args = ["--parsable2", "-o", SACCT_FIELDS, "-j", &list];
            if let Some(o) = run("sacct", &args, COMMAND_TIMEOUT).ok().filter(|o| o.ok) {
                for (r, c) in refs.iter().zip(&mut comps) {
                    if let (Some(r), true) = (r, c.is_empty()) {
                        *c = parse_sacct_parsable(&o.stdout, *r);
                    }
                }
            }
        }
        Ok(refs
            .iter()
            .zip(&comps)
            .map(|(r, c)| match r {
                Some(r) if !c.is_empty() => Some(self.describe_components(*r, c)),
                _ => None,
            })
            .collect())
    }

    pub(super) fn list_now(&self) -> Result<Vec<ListAppResponse>> {
        // squeue knows the live jobs (and recent ones, for MinJobAge); accounting knows the
        // history but lags a few seconds behind. Merge both, preferring squeue.
        let mut jobs = parse_list(&self.squeue_json(true)?.0, "squeue --json")?;
        let history = run(
            "sacct",
            &[
                "--parsable2",
                "-X",
                "-S",
                "1970-01-01T00:00:01",
                "-o",
                "JobID,JobName,State,Submit,End",
            ],
            COMMAND_TIMEOUT,
        );
        if let Some(o) = history.ok().filter(|o| o.ok) {
            for j in parse_list_parsable(&o.stdout) {
                if !jobs.iter().any(|k| k.job_id == j.job_id) {
                    jobs.push(j);
                }
            }
        }
        let mut out: Vec<ListAppResponse> = jobs
            .into_iter()
            .map(|j| ListAppResponse {
                app_id: j.job_id,
                state: j.state,
                app_handle: String::new(),
                name: j.name,
                start_time: j.start,
                end_time: j.end,
                other_state_dir: false,
            })
            .collect();
        out.sort_by(|a, b| {
            let key = |x: &ListAppResponse| {
                x.app_id
                    .parse::<JobRef>()
                    .map_or((0, None), |r| (r.job, r.task))
            };
            key(b).cmp(&key(a))
        });
        Ok(out)
    }

    pub(super) fn cancel_now(&self, app_id: &str) -> Result<()> {
        let id = parse_job_id(app_id).map_err(|_| unknown_app(app_id))?;
        if self.components(id)?.is_empty() {
            return Err(unknown_app(app_id));
        }
        run_ok("scancel", &[app_id]).map(drop)
    }

    /// `scontrol hold` first: Slurm refuses to hold a job that left the queue, and a held job
    /// cannot start, so the cancel that follows never meets a running job. Where the hold is
    /// refused, accounting says whether the job ever started.
    pub(super) fn cancel_pending_now(&self, app_id: &str) -> Result<bool> {
        parse_job_id(app_id).map_err(|_| unknown_app(app_id))?;
        match run_ok("scontrol", &["hold", app_id]) {
            Ok(_) => run_ok("scancel", &[app_id]).map(|_| true),
            Err(refused) => match never_started(app_id)? {
                Some(true) => match self.describe_now(app_id)?.map(|d| d.state) {
                    Some(AppState::Cancelled) => Ok(true),
                    Some(AppState::Pending | AppState::Submitted) => Err(refused),
                    _ => Ok(false),
                },
                Some(false) => Ok(false),
                None => Err(refused),
            },
        }
    }
}

/// Whether accounting says job `app_id` never started (its `Start` is `Unknown` or `None`);
/// `None` when accounting does not know the job.
fn never_started(app_id: &str) -> Result<Option<bool>> {
    let out = run_ok("sacct", &["-n", "-X", "-P", "-j", app_id, "-o", "Start"])?;
    Ok(out
        .lines()
        .next()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|start| start == "Unknown" || start == "None"))
}
