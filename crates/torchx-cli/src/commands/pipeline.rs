//! Pipelines from the command line: `torchx run ./pipe.yaml` (a file whose top level has
//! `steps`) dry-runs every step, records the pipeline and starts its holder, `torchx
//! __pipeline <handle>`, which submits each step with `torchx run` once the steps it runs
//! after have ended as it requires (see `torchx::pipeline` for the record and its rules).
//! `status`, `log`, `cancel`, `delete`, `list` and `rerun --failed` know pipeline handles.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use torchx::group::Submitter;
use torchx::pipeline::{
    not_run_because, pipeline_state, step_states, try_lock_holder, Phase, PipelineRecord,
    StepRecord, StepState, CANCELLED_BEFORE_START,
};
use torchx::scheduler::WorkspaceSupport;
use torchx::specs::pipeline::{step_verdict, upstream_env_var, PipelineSpec};
use torchx::specs::{AppState, AppStatus, Verdict};
use torchx::{Error, ErrorKind, Result, Runner};

use crate::cli::RunArgs;
use crate::exit_codes;
use crate::output::print_json;

/// What a step's `torchx run` writes to its error output once it was told to go on: after
/// it, a submission may have happened; before it, none did.
const GO_MARK: &str = "torchx: submitting a pipeline step";

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
    torchx::specs::pipeline::is_pipeline(&text).then_some(text)
}

/// How the steps of a scheduler see the pipeline's shared directory.
enum Shared {
    /// At the host's path (processes, and clusters that share this machine's files).
    Host,
    /// The host's directory bind-mounted at the same path (local containers).
    Mounted,
    /// At the path the step gives, on a mount of its own.
    InContainer,
}

fn shared_kind(runner: &Runner, scheduler: &str) -> Result<Shared> {
    let caps = runner.scheduler(scheduler)?.capabilities();
    Ok(match caps.workspace {
        WorkspaceSupport::LocalImage => Shared::Mounted,
        WorkspaceSupport::PushedImage => Shared::InContainer,
        _ => Shared::Host,
    })
}

/// The hidden `torchx run` options that give a step its pipeline environment.
fn step_env_args(
    runner: &Runner,
    record: &PipelineRecord,
    step: &torchx::pipeline::StepRecord,
    upstream: &BTreeMap<String, String>,
) -> Result<Vec<String>> {
    if record.held_job {
        // A job held for its `--after`: it asked for nothing of a pipeline's.
        return Ok(Vec::new());
    }
    let state_dir = torchx::schedulers::default_state_dir();
    let host = record.shared_dir(&state_dir)?.display().to_string();
    let mut args = Vec::new();
    let dir = match (shared_kind(runner, &step.scheduler)?, &step.pipeline_dir) {
        (_, Some(dir)) => dir.clone(),
        (Shared::Host, None) => host,
        (Shared::Mounted, None) => {
            args.extend(["--pipeline_mount".to_string(), host.clone()]);
            host
        }
        (Shared::InContainer, None) => {
            return Err(Error::arg(format!(
                "step `{}` runs on {}, whose containers do not see this machine's files: give \
                 it `pipeline_dir: <path on one of its mounts>` for TORCHX_PIPELINE_DIR",
                step.name, step.scheduler
            )))
        }
    };
    let mut env = vec![
        ("TORCHX_PIPELINE_DIR".to_string(), dir),
        ("TORCHX_PIPELINE_HANDLE".to_string(), record.handle()),
    ];
    for dep in &step.after {
        let handle = upstream
            .get(&dep.step)
            .cloned()
            .unwrap_or_else(|| format!("<{} when it runs>", dep.step));
        env.push((upstream_env_var(&dep.step), handle));
    }
    for (k, v) in env {
        args.extend(["--pipeline_env".to_string(), format!("{k}={v}")]);
    }
    Ok(args)
}

/// The handles of the steps that have one, by step.
fn handles(record: &PipelineRecord) -> BTreeMap<String, String> {
    record
        .steps
        .iter()
        .filter_map(|s| Some((s.name.clone(), s.phase.handle()?.to_string())))
        .collect()
}

/// `torchx run ... <step's run args>`, for this program.
fn torchx_run(record: &PipelineRecord, leading: &[&str], rest: Vec<String>) -> Result<Command> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the torchx binary", e))?;
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .args(leading)
        .args(rest)
        .current_dir(&record.cwd);
    Ok(cmd)
}

/// Every step's dry run, in order: (step, its `torchx run --dryrun` output). Any step that
/// does not dry-run stops it all, naming the step.
fn dryrun_steps(
    runner: &Runner,
    record: &PipelineRecord,
    json: bool,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for step in &record.steps {
        let mut rest = step_env_args(runner, record, step, &handles(record)).map_err(|e| {
            let message = format!("step `{}` ({}): {}", step.name, step.scheduler, e.message());
            Error::arg(message).with_kind(e.kind())
        })?;
        rest.extend(step.run_args.iter().cloned());
        let leading: &[&str] = if json {
            &["--dryrun", "--json"]
        } else {
            &["--dryrun"]
        };
        let done = torchx_run(record, leading, rest)?
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(format!("dry-running step `{}`", step.name), e))?;
        if !done.status.success() {
            let err = String::from_utf8_lossy(&done.stderr);
            let err = err
                .trim()
                .trim_start_matches("torchx: ")
                .trim_start_matches("Error: ");
            let e = format!("step `{}` ({}): {err}", step.name, step.scheduler);
            let kind = match done.status.code() {
                Some(exit_codes::CONFIG) => ErrorKind::InvalidConfig,
                Some(exit_codes::NOT_FOUND) => ErrorKind::NotFound,
                Some(exit_codes::BACKEND) => ErrorKind::Backend,
                Some(exit_codes::UNSUPPORTED) => ErrorKind::Unsupported,
                _ => ErrorKind::InvalidArgument,
            };
            return Err(Error::arg(e).with_kind(kind));
        }
        out.push((
            step.name.clone(),
            String::from_utf8_lossy(&done.stdout).into_owned(),
        ));
    }
    Ok(out)
}

/// `torchx run <pipeline file>`.
pub fn run(a: &RunArgs, path: &str, text: &str) -> Result<i32> {
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
    let dryruns = dryrun_steps(&runner, &record, a.json && a.dryrun)?;
    if a.dryrun {
        print_pipeline_dryrun(&record, &dryruns, a.json);
        return Ok(exit_codes::OK);
    }
    launch(a, &runner, record)
}

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
            Ok(torchx::specs::pipeline::StepDependency {
                step: dep.handle,
                condition: dep.condition,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let step = torchx::specs::pipeline::Step {
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
/// pipeline whose holder submits it to the first scheduler whose plan was ok (`ok`, in order,
/// each with its `-cfg`), and while it stays pending past `after_secs`, cancels it (once the
/// cancel is confirmed: never two live copies) and submits it to the next.
pub fn run_failover(
    a: &RunArgs,
    runner: &Runner,
    ok: Vec<(String, String)>,
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
    let mut common = Vec::new();
    let mut recorded = super::group::rerun_argv(a, component, args).into_iter();
    while let Some(word) = recorded.next() {
        match word.as_str() {
            "--scheduler" | "--cfg" => {
                recorded.next();
            }
            _ => common.push(word),
        }
    }
    let mut candidates: Vec<(String, Vec<String>)> = ok
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
    let app_name = component
        .rsplit(['.', '/'])
        .next()
        .unwrap_or("job")
        .trim_end_matches(".yaml");
    let mut name: String = app_name
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
    let spec = PipelineSpec {
        name: name.clone(),
        steps: vec![torchx::specs::pipeline::Step {
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

/// Records the pipeline, starts its holder, prints its handle and, on local schedulers or
/// with `--wait`, waits for it.
fn launch(a: &RunArgs, runner: &Runner, record: PipelineRecord) -> Result<i32> {
    let record = start(record)?;
    let handle = record.handle();
    if a.json {
        print_json(&serde_json::json!({"handle": handle}));
    } else {
        println!("{handle}");
    }
    let _ = std::io::stdout().flush();
    let local = record.steps.iter().all(|s| {
        runner
            .scheduler(&s.scheduler)
            .is_ok_and(|s| s.capabilities().runs_locally)
    });
    if !(a.wait || (local && !a.detach)) {
        return Ok(exit_codes::OK);
    }
    let timeout = a
        .timeout
        .as_deref()
        .map(super::run::parse_timeout)
        .transpose()?;
    super::block_on(follow(runner, &record, timeout, a.json))
}

fn print_pipeline_dryrun(record: &PipelineRecord, dryruns: &[(String, String)], json: bool) {
    if json {
        let steps: Vec<serde_json::Value> = record
            .steps
            .iter()
            .zip(dryruns)
            .map(|(s, (_, out))| {
                serde_json::json!({"name": s.name, "scheduler": s.scheduler,
                    "after": s.after.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "dryrun": serde_json::from_str::<serde_json::Value>(out).unwrap_or_default()})
            })
            .collect();
        print_json(&serde_json::json!({"pipeline": record.name, "steps": steps}));
        return;
    }
    for (step, (_, out)) in record.steps.iter().zip(dryruns) {
        println!("=== STEP {} ({}) ===", step.name, step.scheduler);
        print!("{out}");
        println!();
    }
    println!(
        "=== PIPELINE {}: {} steps ===",
        record.name,
        record.steps.len()
    );
    for step in &record.steps {
        let deps: Vec<String> = step.after.iter().map(ToString::to_string).collect();
        if deps.is_empty() {
            println!("{} ({})", step.name, step.scheduler);
        } else {
            println!(
                "{} ({}) after {}",
                step.name,
                step.scheduler,
                deps.join(", ")
            );
        }
    }
}

/// Records `record` and starts its holder.
fn start(record: PipelineRecord) -> Result<PipelineRecord> {
    let state_dir = torchx::schedulers::default_state_dir();
    record.save(&state_dir)?;
    start_holder(&record)?;
    Ok(record)
}

/// Starts a holder for `record` in the background (one that finds another at work leaves).
pub fn start_holder(record: &PipelineRecord) -> Result<()> {
    let state_dir = torchx::schedulers::default_state_dir();
    let log_path = record.dir(&state_dir)?.join("holder.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::io(format!("opening {}", log_path.display()), e))?;
    let err_log = log
        .try_clone()
        .map_err(|e| Error::io("duplicating the holder's log", e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the torchx binary", e))?;
    Command::new(exe)
        .args(["__pipeline", &record.handle()])
        .env("TORCHX_STATE_DIR", &state_dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log)
        // Its own session: Ctrl-C at the terminal, or the end of the shell, stops not it.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("starting the pipeline's holder", e))?;
    Ok(())
}

/// The pipeline `handle` names, with a holder started again if it needs one and has none
/// (the last one died): what every command that reads a pipeline calls.
pub fn find(handle: &str) -> Result<Option<PipelineRecord>> {
    let record = PipelineRecord::find(handle)?;
    if let Some(r) = &record {
        if r.needs_holder() {
            start_holder(r)?;
        }
    }
    Ok(record)
}

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

fn status_json(
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
                            super::query::log_app(runner, query, t, selection, tail, &label)
                                .await?;
                        }
                    }
                }
                None => {
                    super::query::log_app(runner, query, h, selection, tail, &label).await?;
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

/// `torchx rerun <pipeline> --failed`: a new pipeline of the same steps in which those that
/// succeeded keep their outcome (not run again) and the others run.
pub fn rerun(a: crate::cli::RerunArgs) -> Result<i32> {
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
    start_holder(&record)?;
    let handle = record.handle();
    if a.json {
        print_json(&serde_json::json!({"handle": handle, "parent": parent.handle()}));
    } else {
        println!("{handle}");
    }
    if !a.wait {
        return Ok(exit_codes::OK);
    }
    super::block_on(follow(&runner, &record, None, a.json))
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

/// `torchx __pipeline <handle>`: the pipeline's holder. Takes the pipeline's lock (or leaves:
/// another holder is at work), then until no step waits: settles submissions a dead holder
/// left, submits each step whose dependencies are met, records those that can no longer
/// run, and on a cancel stops submitting and cancels what was submitted.
pub fn hold(a: crate::cli::HoldPipelineArgs) -> Result<i32> {
    let state_dir = torchx::schedulers::default_state_dir();
    let handle = a.pipeline_handle;
    let Some(record) = PipelineRecord::find(&handle)? else {
        return Err(Error::arg(format!("`{handle}` is not a pipeline handle")));
    };
    let Some(_lock) = try_lock_holder(&state_dir, &record)? else {
        return Ok(exit_codes::OK);
    };
    // Read again under the lock: the holder before may have moved it on.
    let mut record = PipelineRecord::load(&state_dir, &record.id)?
        .ok_or_else(|| Error::not_found("pipeline", handle.as_str(), ""))?;
    record.holder = Some(Submitter::this_process());
    record.save(&state_dir)?;
    let runner = super::runner()?;
    let mut holder = Holder {
        runner,
        state_dir,
        children: BTreeMap::new(),
        ended: BTreeMap::new(),
    };
    let outcome = super::block_on(holder.run(&mut record));
    record.holder = None;
    record.save(&holder.state_dir)?;
    outcome.map(|()| exit_codes::OK)
}

struct Holder {
    runner: Runner,
    state_dir: std::path::PathBuf,
    /// The `torchx run`s this holder started, by step (reaped as they end).
    children: BTreeMap<String, Child>,
    /// The final status of each step's job (by step) and of each job outside the pipeline
    /// that a step runs after (by handle), once over: it does not change again.
    ended: BTreeMap<String, AppStatus>,
}

impl Holder {
    async fn run(&mut self, record: &mut PipelineRecord) -> Result<()> {
        let mut pause = Duration::from_millis(20);
        loop {
            let mut changed = self.settle_submissions(record)?;
            let cancelled = record.cancel_requested(&self.state_dir);
            let steps = self.step_states(record).await;
            for i in 0..record.steps.len() {
                if record.steps[i].phase != Phase::Waiting {
                    continue;
                }
                if cancelled {
                    record.steps[i].phase = Phase::NotRun {
                        why: CANCELLED_BEFORE_START.into(),
                        outside: false,
                    };
                    changed = true;
                    continue;
                }
                let upstream = |name: &str| {
                    let state = if name.contains("://") {
                        self.ended.get(name).map(|s| s.state)
                    } else {
                        steps.iter().find(|s| s.name == name).map(|s| s.state)
                    };
                    state.filter(|s| s.is_terminal())
                };
                match step_verdict(&record.steps[i].after, upstream) {
                    (Verdict::Satisfied, _) => {
                        self.submit(record, i)?;
                        changed = true;
                        pause = Duration::from_millis(20);
                    }
                    (Verdict::Impossible, Some(dep)) => {
                        let why = match self.ended.get(&dep.step) {
                            Some(s) if dep.is_external() => {
                                torchx::pipeline::not_run_after(dep, s.state)
                            }
                            _ => not_run_because(dep, &steps),
                        };
                        record.steps[i].phase = Phase::NotRun {
                            why,
                            outside: dep.is_external(),
                        };
                        changed = true;
                    }
                    _ => {}
                }
            }
            if !cancelled && self.fail_over(record, &steps).await {
                changed = true;
                pause = Duration::from_millis(20);
            }
            if cancelled {
                // A cancelled job moves nowhere.
                for f in record.steps.iter_mut().filter_map(|s| s.failover.as_mut()) {
                    if !f.next.is_empty() {
                        f.next.clear();
                        changed = true;
                    }
                }
                for step in &record.steps {
                    if let Phase::Submitted { handle } = &step.phase {
                        if !self.ended.contains_key(&step.name) {
                            let _ = self.runner.cancel(handle).await;
                        }
                    }
                }
            }
            if changed {
                record.save(&self.state_dir)?;
            }
            let open = record.steps.iter().any(StepRecord::is_open);
            if !open {
                return Ok(());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// Moves each step with a failover whose job is still pending past its limit to the next
    /// scheduler: cancels it and, once the cancel is confirmed (the job is over and never
    /// started), makes the step wait for its next submission there; a job that started stays.
    /// True if the record changed.
    async fn fail_over(&mut self, record: &mut PipelineRecord, steps: &[StepState]) -> bool {
        let mut changed = false;
        for (step, state) in record.steps.iter_mut().zip(steps) {
            let Phase::Submitted { handle } = &step.phase else {
                continue;
            };
            let Some(failover) = step.failover.as_mut().filter(|f| !f.next.is_empty()) else {
                continue;
            };
            let ours = failover.cancelling.as_deref() == Some(handle.as_str());
            match state.state {
                AppState::Pending | AppState::Submitted if !ours => {
                    if now_secs() - failover.submitted_at < failover.after_secs as f64 {
                        continue;
                    }
                    // Recorded first: a holder that dies now still knows the cancel was its.
                    failover.cancelling = Some(handle.clone());
                    changed = true;
                    if let Err(e) = self.runner.cancel(handle).await {
                        log::warn!("failover of step {}: cancelling {handle}: {e}", step.name);
                    }
                }
                // Confirmed over and never started: it goes to the next scheduler.
                AppState::Cancelled if ours => {
                    let (scheduler, run_args) = failover.next.remove(0);
                    failover.moved_from.push(handle.clone());
                    failover.cancelling = None;
                    step.scheduler = scheduler;
                    step.run_args = run_args;
                    step.phase = Phase::Waiting;
                    self.ended.remove(&step.name);
                    changed = true;
                }
                // Still pending, the cancel in flight; or its state unknown for now.
                AppState::Pending | AppState::Submitted | AppState::Unknown => {}
                // It started (or ended on its own): it stays where it is.
                _ => {
                    failover.next.clear();
                    changed = true;
                }
            }
        }
        changed
    }

    /// The steps' states, asking the schedulers only about jobs not known to be over.
    async fn step_states(&mut self, record: &PipelineRecord) -> Vec<StepState> {
        let mut jobs: BTreeMap<String, Option<AppStatus>> = BTreeMap::new();
        for step in &record.steps {
            let Phase::Submitted { handle } = &step.phase else {
                continue;
            };
            if let Some(s) = self.ended.get(&step.name) {
                jobs.insert(handle.clone(), Some(s.clone()));
                continue;
            }
            match self.runner.status(handle).await {
                Ok(Some(s)) => {
                    if s.is_terminal() {
                        self.ended.insert(step.name.clone(), s.clone());
                    }
                    jobs.insert(handle.clone(), Some(s));
                }
                // Not known (yet, or any more): waits, as for a job not yet visible.
                Ok(None) => {}
                Err(e) => log::warn!("step {} ({handle}): {e}", step.name),
            }
        }
        // Jobs outside the pipeline that waiting steps run after (kept once over).
        for step in record.steps.iter().filter(|s| s.phase == Phase::Waiting) {
            for dep in step.after.iter().filter(|d| d.is_external()) {
                if self.ended.contains_key(&dep.step) {
                    continue;
                }
                match self.runner.status(&dep.step).await {
                    Ok(Some(s)) if s.is_terminal() => {
                        self.ended.insert(dep.step.clone(), s);
                    }
                    Ok(_) => {}
                    Err(e) => log::warn!("{}: {e}", dep.step),
                }
            }
        }
        step_states(record, |h| jobs.get(h).cloned().flatten())
            .into_iter()
            .map(|mut s| {
                // A job its scheduler does not report yet is still being submitted for us.
                if s.state == AppState::Unknown && s.handle.is_some() {
                    s.state = AppState::Submitted;
                }
                s
            })
            .collect()
    }

    /// Moves each step being submitted whose `torchx run` ended to what it did: submitted
    /// (its handle), failed (its error), or back to waiting when it never went on.
    fn settle_submissions(&mut self, record: &mut PipelineRecord) -> Result<bool> {
        let mut changed = false;
        let files = record.clone();
        for step in &mut record.steps {
            let Phase::Submitting { submitter } = &step.phase else {
                continue;
            };
            let running = match self.children.get_mut(&step.name) {
                Some(child) => matches!(child.try_wait(), Ok(None)),
                None => submitter.alive(),
            };
            if running {
                continue;
            }
            let exit = self
                .children
                .remove(&step.name)
                .and_then(|mut c| c.wait().ok())
                .and_then(|s| s.code());
            let read = |ext| {
                files
                    .submission_file(&self.state_dir, &step.name, ext)
                    .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            };
            let (out, err) = (read("out")?, read("err")?);
            let handle = serde_json::Deserializer::from_str(&out)
                .into_iter::<serde_json::Value>()
                .filter_map(std::result::Result::ok)
                .find_map(|v| v["handle"].as_str().map(String::from));
            step.phase = match handle {
                Some(handle) => Phase::Submitted { handle },
                // It never went on: nothing was submitted, so it may go again.
                None if !err.contains(GO_MARK) => Phase::Waiting,
                None => {
                    let error: Vec<&str> = err
                        .lines()
                        .filter(|l| !l.contains(GO_MARK) && !l.trim().is_empty())
                        .collect();
                    let code = exit.map(|c| format!(" (exit {c})")).unwrap_or_default();
                    Phase::SubmitFailed {
                        error: format!("torchx run{code}: {}", error.join(" ")),
                    }
                }
            };
            changed = true;
        }
        Ok(changed)
    }

    /// Starts the `torchx run` of step `i`: recorded as submitting before it may go on.
    fn submit(&mut self, record: &mut PipelineRecord, i: usize) -> Result<()> {
        let step = &record.steps[i];
        let mut rest = match step_env_args(&self.runner, record, step, &handles(record)) {
            Ok(args) => args,
            Err(e) => {
                record.steps[i].phase = Phase::SubmitFailed {
                    error: e.to_string(),
                };
                return Ok(());
            }
        };
        rest.extend(step.run_args.iter().cloned());
        let name = step.name.clone();
        let out = record.submission_file(&self.state_dir, &name, "out")?;
        let err = record.submission_file(&self.state_dir, &name, "err")?;
        let create = |p: &Path| {
            std::fs::File::create(p).map_err(|e| Error::io(format!("creating {}", p.display()), e))
        };
        let mut child = torchx_run(record, &["--detach", "--json", "--pipeline_go"], rest)?
            .stdin(Stdio::piped())
            .stdout(create(&out)?)
            .stderr(create(&err)?)
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(format!("starting the submission of step `{name}`"), e))?;
        record.steps[i].phase = Phase::Submitting {
            submitter: Submitter::of(child.id()),
        };
        if let Some(f) = record.steps[i].failover.as_mut() {
            f.submitted_at = now_secs();
        }
        let saved = record.save(&self.state_dir);
        let mut stdin = child.stdin.take();
        if saved.is_ok() {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(b"go\n");
            }
        }
        drop(stdin);
        self.children.insert(name, child);
        saved
    }
}

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// For a step's `torchx run --pipeline_go`: waits for the holder's go-ahead (false: none
/// came, submit nothing), then marks that it went on.
pub fn await_go() -> bool {
    let mut go = String::new();
    if std::io::stdin().read_line(&mut go).is_err() || go.trim() != "go" {
        return false;
    }
    eprintln!("{GO_MARK}");
    true
}

/// `torchx list`: the pipelines whose steps ran on `scheduler` become one row each (their
/// steps' rows are folded into it).
pub fn fold_into_pipelines(
    runner: &Runner,
    scheduler: &str,
    apps: &mut Vec<torchx::specs::ListAppResponse>,
) {
    let state_dir = torchx::schedulers::default_state_dir();
    for record in PipelineRecord::list(&state_dir) {
        if !record.steps.iter().any(|s| s.scheduler == scheduler) {
            continue;
        }
        let members: Vec<String> = record
            .steps
            .iter()
            .filter_map(|s| s.phase.handle().map(String::from))
            .collect();
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(apps)
            .into_iter()
            .partition(|a| members.contains(&a.app_handle));
        *apps = rest;
        let Ok(steps) = super::block_on(runner.pipeline_steps(&record)) else {
            continue;
        };
        let state = pipeline_state(&record, &steps, record.cancel_requested(&state_dir));
        apps.push(torchx::specs::ListAppResponse {
            app_id: record.id.clone(),
            app_handle: record.handle(),
            name: record.name.clone(),
            state,
            start_time: Some(record.created),
            end_time: state
                .is_terminal()
                .then(|| mine.iter().filter_map(|a| a.end_time).reduce(f64::max))
                .flatten(),
        });
    }
    torchx::specs::sort_newest_first(apps);
}
