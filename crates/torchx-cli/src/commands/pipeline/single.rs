//! Single jobs held as the one step of a pipeline: `--after` a scheduler cannot hold itself,
//! and `-s auto:... --failover_after`, whose handle follows the job to where it went.

use torchx::pipeline::PipelineRecord;
use torchx::pipeline::PipelineSpec;
use torchx::{Error, Result, Runner};

use crate::commands::plan::AutoChoice;
use crate::commands::run_args::RunArgs;
use crate::exit_codes;

use super::launch;

/// `torchx run --after HANDLE ...` on a scheduler that cannot hold the job for that
/// dependency itself (it has no dependencies, or not on another scheduler's jobs): the job
/// becomes the one step of a pipeline whose holder submits it once the dependencies ended as
/// required. Its handle is the pipeline's.
pub fn run_held(
    a: &RunArgs,
    runner: &Runner,
    scheduler: &str,
    run_args: Vec<String>,
    name: &str,
) -> Result<i32> {
    let after = a
        .after
        .iter()
        .map(|d| {
            let dep: torchx::specs::Dependency = d.parse()?;
            Ok(torchx::pipeline::StepDependency {
                step: dep.handle,
                condition: dep.condition,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let step = torchx::pipeline::Step {
        name: name.to_string(),
        scheduler: Some(scheduler.to_string()),
        pipeline_dir: None,
        after,
        run_args,
    };
    let spec = PipelineSpec {
        name: name.to_string(),
        steps: vec![step],
    };
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    let mut record = PipelineRecord::new(&spec, runner.session_name(), scheduler, &cwd);
    record.held_job = true;
    let deps: Vec<&str> = a.after.iter().map(String::as_str).collect();
    log::warn!(
        "{scheduler} cannot hold this job for {} itself: a detached torchx process submits it \
         once they ended as required (the handle below follows it)",
        deps.join(", ")
    );
    launch(a, runner, record)
}

/// `torchx run -s auto:S1,S2,... --failover_after DURATION`: the job is the one step of a
/// pipeline (named, as a held job's, after the app) whose holder submits it to the first
/// scheduler whose plan was ok (in order, each with its `-cfg`), and while it stays pending
/// past `after_secs`, cancels it (once the cancel is confirmed: never two live copies) and
/// submits it to the next.
pub fn run_failover(
    a: &RunArgs,
    runner: &Runner,
    choice: AutoChoice,
    after_secs: u64,
) -> Result<i32> {
    let mut tokens: Vec<String> = a.component_and_args.clone();
    if tokens.first().map(String::as_str) == Some("--") {
        tokens.remove(0);
    }
    let (component, args) = tokens
        .split_first()
        .ok_or_else(|| Error::arg("missing component name"))?;
    // The run's own arguments, without the scheduler, its options and the failover.
    let common =
        crate::commands::group::rerun_argv_without(a, component, args, &["--scheduler", "--cfg"]);
    let mut candidates: Vec<(String, Vec<String>)> = choice
        .ok
        .into_iter()
        .map(|(scheduler, cfg)| {
            let mut run_args = vec!["--scheduler".to_string(), scheduler.clone()];
            if !cfg.is_empty() {
                run_args.extend(["--cfg".to_string(), cfg]);
            }
            run_args.extend(common.iter().cloned());
            (scheduler, run_args)
        })
        .collect();
    let (scheduler, run_args) = candidates.remove(0);
    let name = step_name(choice.app_name.as_deref().unwrap_or(component));
    let spec = PipelineSpec {
        name: name.clone(),
        steps: vec![torchx::pipeline::Step {
            name,
            scheduler: Some(scheduler.clone()),
            pipeline_dir: None,
            after: Vec::new(),
            run_args,
        }],
    };
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    let mut record = PipelineRecord::new(&spec, runner.session_name(), &scheduler, &cwd);
    record.held_job = true;
    if !candidates.is_empty() {
        record.steps[0].failover = Some(torchx::pipeline::Failover {
            after_secs,
            next: candidates,
            submitted_at: 0.0,
            moved_from: Vec::new(),
            cancelling: None,
        });
    }
    if a.dryrun {
        println!("=== FAILOVER: {scheduler} first; still pending after {after_secs}s: the next of these ===");
        for (s, args) in record.steps[0].failover.iter().flat_map(|f| f.next.iter()) {
            println!("{s}: torchx run {}", args.join(" "));
        }
        return Ok(exit_codes::OK);
    }
    launch(a, runner, record)
}

/// A step name (a letter, then letters, digits, `_`, `-`) made of a job's name.
pub fn step_name(job: &str) -> String {
    let mut name: String = job
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert_str(0, "job-");
    }
    name
}
