//! Where a job's files are (the job-dir index kept in the state directory: Slurm itself does
//! not remember where a job ran from) and its replicas' log lines, followed from those files.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::{aggregate, parse_job_id, unknown_app, JobRef, SlurmScheduler, JOB_DIRS_FILE, NAME};
use crate::error::{Error, Result};
use crate::scheduler::{
    follow_file, Follow, FollowedFile, LogLines, LogQuery, Replica, Step, Take,
};
use crate::schedulers::blocking;
use crate::specs::Stream;

impl SlurmScheduler {
    pub(super) fn job_dirs_file(&self) -> PathBuf {
        self.state_dir.join(NAME).join("job_dirs")
    }

    /// Remembers where a job runs (appending `id = dir` lines; last one wins).
    pub(super) fn remember_job_dir(
        &self,
        job_id: &str,
        dir: &Path,
        torchx_compat: bool,
    ) -> Result<()> {
        let line = format!("{job_id} = {}\n", dir.display());
        let ours = self.job_dirs_file();
        crate::schedulers::create_private_dir(ours.parent().unwrap_or(&self.state_dir))?;
        let mut targets = vec![ours];
        if torchx_compat {
            targets.push(PathBuf::from(JOB_DIRS_FILE));
        }
        for path in targets {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(line.as_bytes()))
                .map_err(|e| {
                    Error::io(format!("recording the job dir in {}", path.display()), e)
                })?;
        }
        Ok(())
    }

    /// Where job `job_id` runs: our index, then `./.torchxslurmjobdirs`, else the cwd. An
    /// array's tasks run where the array does.
    pub(super) fn job_dir(&self, job_id: JobRef) -> PathBuf {
        let job_id = job_id.job.to_string();
        let lookup = |path: &Path| -> Option<PathBuf> {
            let text = fs::read_to_string(path).ok()?;
            text.lines()
                .rev()
                .filter_map(|l| l.split_once(" = "))
                .find(|(id, _)| id.trim() == job_id)
                .map(|(_, d)| PathBuf::from(d.trim()))
        };
        lookup(&self.job_dirs_file())
            .or_else(|| lookup(Path::new(JOB_DIRS_FILE)))
            .unwrap_or_else(|| PathBuf::from("."))
    }

    pub(super) fn log_lines_now(
        &self,
        replica: Replica<'_>,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        let id = parse_job_id(app_id).map_err(|_| unknown_app(app_id))?;
        if query.since.is_some() || query.until.is_some() {
            return Err(Error::unsupported(
                NAME,
                "log --since/--until (its log files carry no timestamps)",
            ));
        }
        let comps = self.components(id)?;
        if comps.is_empty() {
            return Err(unknown_app(app_id));
        }
        if !comps.iter().any(|c| c.role == role && c.replica == k) {
            return Err(Error::not_found(
                "replica",
                format!("{role}/{k}"),
                format!(" in slurm job {app_id}"),
            ));
        }
        let ext = match query.streams {
            Some(Stream::Stdout) => "out",
            None | Some(Stream::Stderr) => "err",
            Some(Stream::Combined) => {
                return Err(Error::unsupported(
                    NAME,
                    "combined logs (slurm writes stdout and stderr to separate files: ask for stdout or stderr)",
                ))
            }
        };
        let path = self
            .job_dir(id)
            .join(format!("slurm-{id}-{role}-{k}.{ext}"));
        Ok(Box::new(SlurmLogLines {
            file: FollowedFile::new(path),
            tail: query.should_tail,
            job_id: id,
            // Shares the squeue cache: following N replicas costs one squeue per interval.
            scheduler: self.clone(),
        }))
    }
}

/// Lines of a replica's log file, optionally followed until the job ends.
struct SlurmLogLines {
    file: FollowedFile,
    tail: bool,
    job_id: JobRef,
    scheduler: SlurmScheduler,
}

#[async_trait]
impl Follow for SlurmLogLines {
    /// Polls the file until it has what `take` asks for or ends.
    /// Asks squeue/sacct (on the blocking pool) only when the file has nothing more.
    async fn follow(&mut self, take: Take<'_>) -> Result<Step> {
        let (scheduler, job_id) = (&self.scheduler, self.job_id);
        let ended = || {
            let scheduler = scheduler.clone();
            blocking(NAME, move || {
                Ok(scheduler
                    .components(job_id)
                    .map_or(true, |c| aggregate(c.iter().map(|c| c.state)).is_terminal()))
            })
        };
        let interval = Duration::from_millis(500);
        follow_file(&mut self.file, take, self.tail, interval, ended).await
    }
}
