//! What Slurm can tell about a job before it is queued: `sbatch --test-only` with the job's
//! own options and script.

use std::fs;

use super::{run, state, tempfile_dir, SbatchRequest, COMMAND_TIMEOUT};
use crate::error::Result;
use crate::scheduler::{PlanCheck, PlanReport};

/// `sbatch --test-only` with the job's own options and script: Slurm's controller checks the
/// partition, account, QoS and whether any node can ever hold the request, and says when the
/// job would start, without queueing anything.
pub(super) fn plan_now(req: &SbatchRequest) -> Result<PlanReport> {
    let dir = tempfile_dir()?;
    let script = dir.join("torchx-sbatch.sh");
    let written = crate::schedulers::write_private_file(&script, req.materialize().as_bytes());
    let mut args: Vec<String> = vec!["--test-only".into()];
    // `--parsable` and `--chdir` change nothing a test-only run checks; the job_dir need not
    // exist yet.
    let mut options = req.cmd[1..].iter();
    while let Some(a) = options.next() {
        if a == "--parsable" || a.starts_with("--chdir=") {
            continue;
        }
        if a == "--chdir" {
            options.next();
            continue;
        }
        args.push(a.clone());
    }
    args.push(script.display().to_string());
    let out = written.and_then(|()| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&req.cmd[0], &args, COMMAND_TIMEOUT)
    });
    let _ = fs::remove_dir_all(&dir);
    let out = out?;
    let said = format!("{}{}", out.stdout, out.stderr);
    let said = said.trim().replace("sbatch: ", "");
    let mut report = PlanReport::default();
    if out.ok {
        report.checks.push(PlanCheck::ok(
            "sbatch --test-only",
            said.lines().last().unwrap_or_default(),
        ));
        report.start = state::test_only_start(&said);
    } else {
        let why = said
            .lines()
            .map(|l| l.trim_start_matches("error: "))
            .collect::<Vec<_>>()
            .join("; ");
        let fix = if why.contains("partition") {
            "give an existing partition (run option `partition=...`; `sinfo -s` lists them)"
        } else if why.contains("node configuration is not available") {
            "ask for less per replica (CPUs, GPUs, memory) than the largest node has, or a \
             partition with bigger nodes (`sinfo -o '%P %c %m %G'`)"
        } else if why.contains("account") || why.contains("Invalid qos") {
            "give an account and QoS you belong to (`sacctmgr show assoc user=$USER`)"
        } else {
            "change what Slurm names above"
        };
        report
            .checks
            .push(PlanCheck::fails("sbatch --test-only", why, fix));
    }
    Ok(report)
}
