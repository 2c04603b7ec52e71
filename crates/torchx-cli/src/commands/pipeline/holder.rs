//! The processes behind a pipeline: its holder, `torchx __pipeline <handle>` (a `main` around
//! [`Runner::hold_pipeline`](torchx::Runner::hold_pipeline)), and the submission of one of its
//! steps, `torchx __pipeline-step <handle> <step>`, which the holder starts: the step's run
//! options resolved as `torchx run` resolves them, its outcome written as a typed record
//! ([`torchx::pipeline::Submission`]).

use std::cell::RefCell;
use std::io::Read;
use std::rc::Rc;

use clap::Args;
use torchx::pipeline::{PipelineRecord, StepRecord, Submission};
use torchx::{Error, Result, Runner};

use crate::commands::run_args::{parse_recorded, Reported, RunCommand, StepRun};
use crate::exit_codes;

#[derive(Debug, Args)]
pub struct HoldPipelineArgs {
    /// The pipeline handle.
    pub pipeline_handle: String,
}

/// `torchx __pipeline <handle>`: the pipeline's holder (returns at once if another is at
/// work).
pub fn hold(a: HoldPipelineArgs) -> Result<i32> {
    let runner = crate::commands::runner()?;
    crate::commands::block_on(runner.hold_pipeline(&a.pipeline_handle))?;
    Ok(exit_codes::OK)
}

#[derive(Debug, Args)]
pub struct SubmitStepArgs {
    /// The pipeline handle.
    pub pipeline_handle: String,
    /// The step to submit.
    pub step: String,
}

/// `torchx __pipeline-step <handle> <step>`: waits for the holder's go-ahead (a byte on
/// stdin, sent once the record names this process; none: submit nothing), records that it
/// went on, submits the step with `run` and records what it submitted or why it could not.
pub fn submit_step(a: SubmitStepArgs, run: RunCommand) -> Result<i32> {
    let mut go = [0u8; 1];
    if !matches!(std::io::stdin().read(&mut go), Ok(1)) {
        return Ok(exit_codes::OK);
    }
    let state_dir = torchx::schedulers::default_state_dir();
    let record = PipelineRecord::find(&a.pipeline_handle)?
        .ok_or_else(|| Error::arg(format!("`{}` is not a pipeline handle", a.pipeline_handle)))?;
    let paths = record.submission_paths(&state_dir, &a.step)?;
    paths.write(&Submission::Going)?;
    torchx::durable::failpoint(&state_dir, "pipeline.step.going");
    let outcome = match submitted(&record, &a.step, run) {
        Ok(handle) => Submission::Submitted { handle },
        Err(e) => Submission::Failed {
            error: e.to_string(),
        },
    };
    torchx::durable::failpoint(&state_dir, "pipeline.step.submitted");
    paths.write(&outcome)?;
    Ok(exit_codes::OK)
}

/// Submits `step` of `record`; its handle.
fn submitted(record: &PipelineRecord, step: &str, run: RunCommand) -> Result<String> {
    let step = record
        .steps
        .iter()
        .find(|s| s.name == step)
        .ok_or_else(|| Error::arg(format!("{} has no step `{step}`", record.handle())))?;
    let runner = crate::commands::runner()?;
    let reported = step_run(&runner, record, step, &["--detach"], run)?;
    match reported {
        Some(Reported::Submitted(handle)) => Ok(handle),
        _ => Err(Error::arg("its run options submitted nothing")),
    }
}

/// Runs `step`'s `torchx run` (with `leading` options first) as a step of `record`, in this
/// process, with what `runner` says the pipeline gives it: what it reported.
pub(super) fn step_run(
    runner: &Runner,
    record: &PipelineRecord,
    step: &StepRecord,
    leading: &[&str],
    run: RunCommand,
) -> Result<Option<Reported>> {
    let context = crate::commands::block_on(runner.step_context(record, step))?;
    let argv: Vec<String> = ["torchx", "run"]
        .iter()
        .chain(leading)
        .map(|s| s.to_string())
        .chain(step.run_args.iter().cloned())
        .collect();
    let mut a = parse_recorded(&argv).map_err(|e| {
        let e = e.to_string();
        let first = e
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ");
        Error::arg(format!(
            "its run options `{}`: {first}",
            step.run_args.join(" ")
        ))
    })?;
    let reported = Rc::new(RefCell::new(None));
    a.step = Some(StepRun {
        context,
        reported: Rc::clone(&reported),
    });
    run(a)?;
    Ok(reported.take())
}
