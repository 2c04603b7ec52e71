//! Pipelines from the command line: `torchx run ./pipe.yaml` (a file whose top level has
//! `steps`) dry-runs every step, records the pipeline and starts its holder, `torchx
//! __pipeline <handle>`, which submits each step once the steps it runs after have ended as it
//! requires (see `torchx::pipeline` for the record and its rules, `Runner::hold_pipeline` for
//! the holder).
//! `status`, `log`, `cancel`, `delete`, `list` and `rerun --failed` know pipeline handles.

mod holder;
mod single;

pub use holder::{hold, submit_step, HoldPipelineArgs, SubmitStepArgs};
pub use single::{run_failover, run_held, step_name};

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use torchx::pipeline::PipelineSpec;
use torchx::pipeline::{pipeline_state, Phase, PipelineRecord, StepRecord, StepState};
use torchx::specs::AppState;
use torchx::{Error, Result, Runner};

use super::group::RerunArgs;
use super::run_args::{Reported, RunArgs, RunCommand};
use super::show::Shown;
use crate::exit_codes;
use crate::output::print_json;
use holder::step_run;

/// The `torchx run` options that mean something for a whole pipeline; any other is refused
/// (each step sets its own).
fn refuse_job_options(a: &RunArgs) -> Result<()> {
    let given = [
        ("cfg", !a.cfg.is_empty()),
        ("workspace", a.workspace.is_some()),
        ("after", !a.after.is_empty()),
        ("array", a.array.is_some()),
        ("sweep", !a.sweep.is_empty()),
        ("sweep_file", a.sweep_file.is_some()),
        ("max_concurrent", a.max_concurrent.is_some()),
        ("time_limit", a.time_limit.is_some()),
        ("checkpoint_signal", a.checkpoint_signal.is_some()),
        ("max_retries", a.max_retries.is_some()),
        ("requeue_exit_code", a.requeue_exit_code.is_some()),
        ("max_requeues", a.max_requeues.is_some()),
        ("checkpoint_dir", a.checkpoint_dir.is_some()),
        ("hang_timeout", a.hang_timeout.is_some()),
        ("parent_run_id", a.parent_run_id.is_some()),
        ("log", a.log),
    ];
    match given.iter().find(|(_, set)| *set) {
        Some((flag, _)) => Err(Error::arg(format!(
            "--{flag} does not apply to a pipeline file: give it to the steps that need it in \
             the file (each step takes the run options as keys)"
        ))),
        None => Ok(()),
    }
}

/// Whether `component` names a pipeline file, and its text if so.
pub fn pipeline_file(component: &str) -> Option<String> {
    let is_file = [".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| component.ends_with(ext));
    if !is_file {
        return None;
    }
    let text = std::fs::read_to_string(component).ok()?;
    torchx::pipeline::is_pipeline(&text).then_some(text)
}

/// Every step's dry run, in order, each a `torchx run --dryrun` in this process with what the
/// pipeline gives the step: what it shows. Any step that does not dry-run stops it all,
/// naming the step.
fn dryrun_steps(
    runner: &Runner,
    record: &PipelineRecord,
    json: bool,
    run: RunCommand,
) -> Result<Vec<Shown>> {
    let leading: &[&str] = if json {
        &["--dryrun", "--json"]
    } else {
        &["--dryrun"]
    };
    let mut shown = Vec::new();
    for step in &record.steps {
        let reported = step_run(runner, record, step, leading, run).map_err(|e| {
            let message = format!("step `{}` ({}): {}", step.name, step.scheduler, e.message());
            Error::arg(message).with_kind(e.kind())
        })?;
        shown.push(match reported {
            Some(Reported::Shown(s)) => s,
            _ => Shown::Text(String::new()),
        });
    }
    Ok(shown)
}

/// `torchx run <pipeline file>`.
pub fn run(a: &RunArgs, path: &str, text: &str, run: RunCommand) -> Result<i32> {
    refuse_job_options(a)?;
    let spec =
        PipelineSpec::parse(text).map_err(|e| Error::spec(format!("{path}: {}", e.message())))?;
    let runner = super::runner()?;
    let default = a.scheduler.clone().unwrap_or_else(|| {
        runner.config().cli_run().scheduler.unwrap_or_else(|| {
            runner
                .registry()
                .default_name()
                .unwrap_or("local_cwd")
                .to_string()
        })
    });
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    let mut record = PipelineRecord::new(&spec, runner.session_name(), &default, &cwd);
    if a.skip_preflight {
        for s in &mut record.steps {
            s.run_args.insert(0, "--skip_preflight".into());
        }
    }
    let dryruns = dryrun_steps(&runner, &record, a.json && a.dryrun, run)?;
    if a.dryrun {
        a.show(pipeline_dryrun_shown(&record, &dryruns, a.json));
        return Ok(exit_codes::OK);
    }
    launch(a, &runner, record)
}

/// Records the pipeline, starts its holder, prints its handle and, on local schedulers or
/// with `--wait`, waits for it.
fn launch(a: &RunArgs, runner: &Runner, record: PipelineRecord) -> Result<i32> {
    let record = start(record)?;
    let handle = record.handle();
    if a.report_submitted(&handle) {
        // A step of another pipeline: that pipeline's holder follows this one.
        return Ok(exit_codes::OK);
    }
    if a.json {
        print_json(&serde_json::json!({"handle": handle}));
    } else {
        println!("{handle}");
    }
    let _ = std::io::stdout().flush();
    let local = super::block_on(runner.pipeline_runs_locally(&record));
    if !(a.wait || (local && !a.detach)) {
        not_waiting(&handle, a.json);
        return Ok(exit_codes::OK);
    }
    let timeout = a
        .timeout
        .as_deref()
        .map(super::run_args::parse_timeout)
        .transpose()?;
    super::block_on(follow(runner, &record, timeout, a.json))
}

/// The pipeline's dry run: each step's, then the steps and what they run after.
fn pipeline_dryrun_shown(record: &PipelineRecord, dryruns: &[Shown], json: bool) -> Shown {
    use std::fmt::Write;
    if json {
        let steps: Vec<serde_json::Value> = record
            .steps
            .iter()
            .zip(dryruns)
            .map(|(s, shown)| {
                let dryrun = match shown {
                    Shown::Json(v) => v.clone(),
                    Shown::Text(_) => serde_json::Value::Null,
                };
                serde_json::json!({"name": s.name, "scheduler": s.scheduler,
                    "after": s.after.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "dryrun": dryrun})
            })
            .collect();
        return Shown::Json(serde_json::json!({"pipeline": record.name, "steps": steps}));
    }
    let mut out = String::new();
    for (step, shown) in record.steps.iter().zip(dryruns) {
        let text = match shown {
            Shown::Text(t) => t.clone(),
            Shown::Json(v) => v.to_string(),
        };
        let _ = writeln!(
            out,
            "=== STEP {} ({}) ===\n{text}",
            step.name, step.scheduler
        );
    }
    let _ = writeln!(
        out,
        "=== PIPELINE {}: {} steps ===",
        record.name,
        record.steps.len()
    );
    for step in &record.steps {
        let deps: Vec<String> = step.after.iter().map(ToString::to_string).collect();
        let after = if deps.is_empty() {
            String::new()
        } else {
            format!(" after {}", deps.join(", "))
        };
        let _ = writeln!(out, "{} ({}){after}", step.name, step.scheduler);
    }
    Shown::Text(out)
}

/// Records `record` and starts its holder.
fn start(record: PipelineRecord) -> Result<PipelineRecord> {
    let state_dir = torchx::schedulers::default_state_dir();
    record.save(&state_dir)?;
    torchx::pipeline::start_holder(&record)?;
    Ok(record)
}

/// The pipeline `handle` names, with a holder started again if it needs one
/// ([`torchx::pipeline::find`]).
pub use torchx::pipeline::find;

/// Waits for the pipeline with its progress on stderr, then sums it up. Ctrl-C or SIGTERM
/// cancels it.
async fn follow(
    runner: &Runner,
    record: &PipelineRecord,
    timeout: Option<Duration>,
    json: bool,
) -> Result<i32> {
    let mut interrupts = super::Interrupts::install()?;
    let handle = record.handle();
    let mut progress = crate::progress::GroupProgress::new(&handle, "steps");
    let wait = async {
        loop {
            let now = find(&handle)?.unwrap_or_else(|| record.clone());
            let steps = runner.pipeline_steps(&now).await?;
            let states: Vec<AppState> = steps.iter().map(|s| s.state).collect();
            progress.update(&states);
            let cancelled = now.cancel_requested(&torchx::schedulers::default_state_dir());
            let state = pipeline_state(&now, &steps, cancelled);
            let open = now.steps.iter().any(StepRecord::is_open);
            if state.is_terminal() && !open {
                return Ok::<_, Error>((state, steps));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let outcome = tokio::select! {
        done = super::within(timeout, &handle, wait) => Some(done),
        _ = interrupts.recv() => None,
    };
    progress.finish();
    let Some(done) = outcome else {
        eprintln!("torchx: interrupted, cancelling {handle}");
        runner.cancel_pipeline(record).await?;
        return Ok(exit_codes::INTERRUPTED);
    };
    let (state, steps) = done?;
    if json {
        print_json(&status_json(&handle, record, state, &steps));
    } else {
        eprintln!(
            "torchx: pipeline {handle}: {state} after {}",
            crate::progress::duration(progress.elapsed())
        );
        for s in &steps {
            eprintln!("  {}", step_line(s));
        }
        if state != AppState::Succeeded {
            eprintln!("  run the failed steps again: torchx rerun {handle} --failed");
        }
    }
    Ok(if state == AppState::Succeeded {
        exit_codes::OK
    } else {
        exit_codes::JOB_FAILED
    })
}

fn step_line(s: &StepState) -> String {
    let mut line = format!("[{}] {} {}", s.name, s.state, s.scheduler);
    if let Some(h) = &s.handle {
        line.push_str(&format!(" {h}"));
    }
    if !s.msg.is_empty() {
        line.push_str(&format!(" ({})", s.msg));
    }
    line
}

pub(crate) fn status_json(
    handle: &str,
    record: &PipelineRecord,
    state: AppState,
    steps: &[StepState],
) -> serde_json::Value {
    let states: Vec<AppState> = steps.iter().map(|s| s.state).collect();
    serde_json::json!({
        "pipeline_handle": handle,
        "name": record.name,
        "state": state.as_str(),
        "parent": record.parent,
        "counts": torchx::group::counts(&states),
        "steps": steps.iter().zip(&record.steps).map(|(s, r)| serde_json::json!({
            "name": s.name, "scheduler": s.scheduler, "state": s.state.as_str(),
            "handle": s.handle, "msg": s.msg,
            "after": r.after.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// `torchx status <pipeline>`.
pub fn status(runner: &Runner, record: &PipelineRecord, json: bool) -> Result<i32> {
    let steps = super::block_on(runner.pipeline_steps(record))?;
    let cancelled = record.cancel_requested(&torchx::schedulers::default_state_dir());
    let state = pipeline_state(record, &steps, cancelled);
    let handle = record.handle();
    if json {
        print_json(&status_json(&handle, record, state, &steps));
        return Ok(exit_codes::OK);
    }
    let states: Vec<AppState> = steps.iter().map(|s| s.state).collect();
    let counted: Vec<String> = torchx::group::counts(&states)
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    println!("Pipeline: {handle}\n  Name: {}", record.name);
    if let Some(parent) = &record.parent {
        println!("  Rerun of: {parent}");
    }
    println!(
        "  State: {state}\n  Steps: {} ({})",
        steps.len(),
        counted.join(", ")
    );
    for s in &steps {
        println!("  {}", step_line(s));
    }
    Ok(exit_codes::OK)
}

/// `torchx log <pipeline>`: each step's log in order, every line labelled `<step>:`; with
/// `--tail`, each step is followed once it is submitted, until the pipeline is over.
pub async fn log(
    runner: &std::rc::Rc<Runner>,
    query: &std::rc::Rc<torchx::scheduler::LogQuery>,
    handle: &str,
    selection: (Option<&str>, Option<&str>),
    tail: bool,
) -> Result<i32> {
    let mut shown = std::collections::BTreeSet::new();
    loop {
        let record = find(handle)?.ok_or_else(|| Error::not_found("pipeline", handle, ""))?;
        for step in &record.steps {
            let Some(h) = step.phase.handle() else {
                continue;
            };
            if !shown.insert(step.name.clone()) {
                continue;
            }
            let label = format!("{}:", step.name);
            match torchx::group::GroupRecord::find(h)? {
                Some(group) => {
                    for task in &group.tasks {
                        if let Some(t) = &task.handle {
                            let label = format!("{label}{}:", task.index);
                            log_step(runner, query, t, selection, tail, &label).await?;
                        }
                    }
                }
                None => {
                    log_step(runner, query, h, selection, tail, &label).await?;
                }
            }
        }
        let open = record.steps.iter().any(StepRecord::is_open);
        if !tail || !open {
            return Ok(exit_codes::OK);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One step's app in `torchx log <pipeline>`. Without `--streams` every step shows both its
/// streams, whatever its scheduler's own default: combined where the scheduler has it, else
/// (Slurm, LSF: separate files) its stdout's lines, then its stderr's.
async fn log_step(
    runner: &std::rc::Rc<Runner>,
    query: &std::rc::Rc<torchx::scheduler::LogQuery>,
    handle: &str,
    selection: (Option<&str>, Option<&str>),
    tail: bool,
    label: &str,
) -> Result<i32> {
    use torchx::specs::Stream;
    if query.streams.is_some() {
        return super::show::log_app(runner, query, handle, selection, tail, label).await;
    }
    let with = |streams| {
        std::rc::Rc::new(torchx::scheduler::LogQuery {
            streams: Some(streams),
            ..(**query).clone()
        })
    };
    let combined = with(Stream::Combined);
    match super::show::log_app(runner, &combined, handle, selection, tail, label).await {
        Err(e) if e.kind() == torchx::ErrorKind::Unsupported => {
            for stream in [Stream::Stdout, Stream::Stderr] {
                super::show::log_app(runner, &with(stream), handle, selection, tail, label).await?;
            }
            Ok(exit_codes::OK)
        }
        other => other,
    }
}

/// `torchx rerun <pipeline> --failed`: a new pipeline of the same steps in which those that
/// succeeded keep their outcome (not run again) and the others run.
pub fn rerun(a: RerunArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let parent = find(&a.group_handle)?.ok_or_else(|| Error::arg("not a pipeline"))?;
    let steps = super::block_on(runner.pipeline_steps(&parent))?;
    if let Some(s) = steps.iter().find(|s| !s.state.is_terminal()) {
        return Err(Error::arg(format!(
            "{} is not over: step {} is {} (rerun a finished pipeline)",
            parent.handle(),
            s.name,
            s.state
        )));
    }
    let mut record = parent.clone();
    record.id = format!("{}-{}", parent.name, torchx::scheduler::random_id());
    record.created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    record.parent = Some(parent.handle());
    record.holder = None;
    let mut again = 0;
    for (step, state) in record.steps.iter_mut().zip(&steps) {
        step.phase = match (&step.phase, state.state) {
            (Phase::Submitted { handle } | Phase::Reused { handle }, AppState::Succeeded) => {
                Phase::Reused {
                    handle: handle.clone(),
                }
            }
            _ => {
                again += 1;
                Phase::Waiting
            }
        };
    }
    if again == 0 {
        log::info!(
            "every step of {} succeeded: nothing to rerun",
            parent.handle()
        );
        return Ok(exit_codes::OK);
    }
    // The shared directory carries over: the steps that rerun read what the others wrote.
    let state_dir = torchx::schedulers::default_state_dir();
    record.save(&state_dir)?;
    copy_dir(
        &parent.shared_dir(&state_dir)?,
        &record.shared_dir(&state_dir)?,
    )?;
    torchx::pipeline::start_holder(&record)?;
    let handle = record.handle();
    if a.json {
        print_json(&serde_json::json!({"handle": handle, "parent": parent.handle()}));
    } else {
        println!("{handle}");
    }
    if !a.wait {
        not_waiting(&handle, a.json);
        return Ok(exit_codes::OK);
    }
    super::block_on(follow(&runner, &record, None, a.json))
}

/// Says on stderr that the pipeline goes on without this command, and how to follow it.
fn not_waiting(handle: &str, json: bool) {
    if !json {
        eprintln!(
            "torchx: {handle} goes on in the background (a detached torchx submits each step in \
             its turn): follow it with `torchx log {handle} --tail` or `torchx status {handle}`; \
             `torchx run --wait` waits for it"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(from) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("reading {}", from.display()), e)),
    };
    for entry in entries.flatten() {
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("reading a file type", e))?;
        if kind.is_dir() {
            std::fs::create_dir_all(&target)
                .map_err(|e| Error::io(format!("creating {}", target.display()), e))?;
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| Error::io(format!("copying to {}", target.display()), e))?;
        }
    }
    Ok(())
}
