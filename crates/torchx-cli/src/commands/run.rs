//! `torchx run`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use torchx::config::CliRunDefaults;
use torchx::runner::{ComponentOutcome, RoleDefaults, RunArgs as LibRunArgs};
use torchx::scheduler::{DryRunInfo, WorkspaceSupport};
use torchx::specs::{parse_duration, AppState, AppStatus, CheckpointSignal, Workspace};
use torchx::{Error, Result, Runner};

use super::run_args::{parse_timeout, RunArgs};
use super::show::{dryrun_shown, print_dryrun, stream_replica, Shown};
use crate::exit_codes;
use crate::output::print_json;

/// Whether `job_dir` is set for `scheduler`: by `-cfg` or by its `.torchxconfig` section.
fn has_job_dir(runner: &Runner, scheduler: &str, cfg: &torchx::opts::Cfg) -> bool {
    cfg.get("job_dir").is_some()
        || runner
            .config()
            .section(scheduler)
            .iter()
            .any(|(k, v)| k == "job_dir" && !v.is_empty())
}

pub fn run(a: RunArgs) -> Result<i32> {
    if let Some(first) = a.component_and_args.iter().find(|w| *w != "--") {
        if let Some(text) = super::pipeline::pipeline_file(first) {
            let first = first.clone();
            return super::pipeline::run(&a, &first, &text, run);
        }
    }
    let timeout = a.timeout.as_deref().map(parse_timeout).transpose()?;
    let runner = super::runner()?;
    let cli_run = runner.config().cli_run();
    for key in &cli_run.unknown {
        log::warn!(
            "{}",
            torchx::config::CliRunDefaults::unknown_key_warning(key)
        );
    }
    let (scheduler, raw_cfg) = match choose_scheduler(&a, &runner, &cli_run)? {
        Chosen::On(scheduler, raw_cfg) => (scheduler, raw_cfg),
        Chosen::FailedOver(code) => return Ok(code),
    };
    // One runtime for the scheduler and its options (the scheduler is made once).
    let (cfg, warnings, capabilities) = super::block_on(async {
        let (cfg, warnings) = runner.cfg_from_str(&scheduler, &raw_cfg).await?;
        let capabilities = runner.scheduler(&scheduler).await?.capabilities();
        Ok::<_, Error>((cfg, warnings, capabilities))
    })?;
    for w in warnings {
        log::warn!("{w}");
    }
    let (component, args) = component_and_args(&a, &cli_run)?;
    if let Some(new) = torchx::components::replaced_by(&component) {
        // As TorchX's nightly, whose Python component warns (UserWarning) on stderr.
        log::warn!("[Deprecated] {component} is deprecated; use {new} instead.");
    }
    let workspace = workspace(
        &a,
        &runner,
        &scheduler,
        capabilities.workspace,
        &cfg,
        &cli_run,
    )?;
    let lib_args = LibRunArgs {
        workspace,
        parent_run_id: a.parent_run_id.clone(),
        role_defaults: role_defaults(&a, &cli_run.recovery)?,
        extra_env: a
            .step
            .as_ref()
            .map(|s| s.context.env.clone())
            .unwrap_or_default(),
        extra_mounts: a
            .step
            .iter()
            .filter_map(|s| s.context.mount.clone())
            .map(|dir| torchx::specs::Mount::Bind {
                src_path: dir.clone(),
                dst_path: dir,
                read_only: false,
            })
            .collect(),
        after: a
            .after
            .iter()
            .map(|d| d.parse())
            .collect::<Result<Vec<torchx::specs::Dependency>>>()?,
        skip_preflight: a.skip_preflight,
    };
    if a.array.is_some()
        || !a.sweep.is_empty()
        || a.sweep_file.is_some()
        || a.rerun_of.is_some()
        || a.rest_of.is_some()
    {
        let group = super::group::GroupRun {
            component: &component,
            args: &args,
            scheduler: &scheduler,
            cfg: &cfg,
            lib_args,
            runs_locally: capabilities.runs_locally,
        };
        return group.run(runner, &a);
    }
    let dryrun = runner.dryrun_component(&component, &args, &scheduler, &cfg, &lib_args);
    // A dry run is all this process does: its blocking reads need no pool thread.
    let dryrun = if a.dryrun {
        super::block_on(torchx::runner::in_place(dryrun))
    } else {
        super::block_on(dryrun)
    };
    let dryrun = match dryrun {
        // The scheduler cannot hold the job for these dependencies: a detached process does.
        Err(e) if e.kind() == torchx::ErrorKind::Unsupported && !lib_args.after.is_empty() => {
            let job = HeldJob {
                scheduler: &scheduler,
                cfg: &raw_cfg,
                component: &component,
                args: &args,
            };
            return hold_instead(&a, &runner, job, &cfg, &lib_args, e);
        }
        other => other?,
    };
    let info = match dryrun {
        ComponentOutcome::Help(h) => {
            a.show(Shown::Text(h));
            return Ok(exit_codes::OK);
        }
        ComponentOutcome::Done(info) => info,
    };
    if a.dryrun {
        a.show(dryrun_shown(&info, a.json));
        return Ok(exit_codes::OK);
    }
    if a.step.is_some() {
        // A pipeline's step: submitted, reported, not waited for.
        let handle = super::block_on(runner.schedule(&info))?;
        a.report_submitted(&handle);
        return Ok(exit_codes::OK);
    }
    let local = capabilities.runs_locally;
    let attached = local && !a.detach;
    // A job on this machine is asked about often; a cluster is spared.
    let poll = if local {
        Duration::from_millis(20)
    } else {
        Duration::from_secs(1)
    };
    let runner = Arc::new(runner);
    super::block_on(submit_and_wait(
        runner,
        info,
        attached || a.wait || a.log,
        attached || a.log,
        poll,
        timeout,
        a.json,
    ))
}

/// Where `run` submits.
enum Chosen {
    /// This scheduler, with this `-cfg`.
    On(String, String),
    /// `--failover_after`: a held one-step pipeline took the job, with this exit code.
    FailedOver(i32),
}

/// The scheduler and its `-cfg`: `-s`, else `[cli:run] scheduler`, else the default; with
/// `-s auto:S1,S2,...` the first whose plan is ok.
fn choose_scheduler(a: &RunArgs, runner: &Runner, cli_run: &CliRunDefaults) -> Result<Chosen> {
    let default_scheduler = runner
        .registry()
        .default_name()
        .unwrap_or("local_cwd")
        .to_string();
    let scheduler = a
        .scheduler
        .clone()
        .or(cli_run.scheduler.clone())
        .unwrap_or(default_scheduler);
    if a.cfg.len() > 1 {
        return Err(Error::config(
            "-cfg/--cfg was given more than once; give all options once, as k1=v1,k2=v2",
        ));
    }
    let raw_cfg = a.cfg.first().cloned().unwrap_or_default();
    match scheduler.strip_prefix("auto:") {
        Some(spec) => {
            let mut choice = super::plan::choose(
                runner,
                spec,
                &raw_cfg,
                a.workspace.as_deref(),
                &a.component_and_args,
            )?;
            if let Some(after) = &a.failover_after {
                let after = parse_duration(after).map_err(|e| {
                    Error::arg(format!("--failover_after `{after}`: {}", e.message()))
                })?;
                return super::pipeline::run_failover(a, runner, choice, after)
                    .map(Chosen::FailedOver);
            }
            let (scheduler, cfg) = choice.ok.remove(0);
            Ok(Chosen::On(scheduler, cfg))
        }
        None if scheduler == "auto" => Err(Error::arg(
            "-s auto needs the schedulers to try, in order: -s auto:slurm,local_cwd",
        )),
        None if a.failover_after.is_some() => Err(Error::arg(
            "--failover_after moves a pending job to the next scheduler of -s auto:S1,S2,...: \
             give the schedulers to try",
        )),
        None => Ok(Chosen::On(scheduler, raw_cfg)),
    }
}

/// The component (else `[cli:run] component`) and its arguments.
fn component_and_args(a: &RunArgs, cli_run: &CliRunDefaults) -> Result<(String, Vec<String>)> {
    let mut tokens: Vec<String> = a.component_and_args.clone();
    if tokens.first().map(String::as_str) == Some("--") {
        tokens.remove(0);
    }
    match tokens.first() {
        Some(first) if !first.starts_with('-') => Ok((first.clone(), tokens[1..].to_vec())),
        _ => match cli_run.component.clone() {
            Some(c) => Ok((c, tokens)),
            None => Err(Error::arg(
                "missing component name, either provide it from the CLI or in .torchxconfig \
                 ([cli:run] component = ...); run `torchx builtins` to list components",
            )),
        },
    }
}

/// `--workspace`, else TorchX's defaults (`[cli:run] workspace`, else `file://$PWD`) where the
/// scheduler supports workspaces; given explicitly, one is refused elsewhere.
fn workspace(
    a: &RunArgs,
    runner: &Runner,
    scheduler: &str,
    support: WorkspaceSupport,
    cfg: &torchx::opts::Cfg,
    cli_run: &CliRunDefaults,
) -> Result<Option<Workspace>> {
    let workspace = match (&a.workspace, &cli_run.workspace) {
        (Some(w), _) => Some(w.clone()),
        (None, default) => {
            match default {
                _ if support == WorkspaceSupport::None => None,
                // As TorchX: a directory workspace without a job_dir to copy it into is
                // ignored (the job runs in place), with a warning here.
                Some(w)
                    if support == WorkspaceSupport::Directory
                        && !has_job_dir(runner, scheduler, cfg) =>
                {
                    log::warn!(
                        "[cli:run] workspace `{w}` is ignored: {scheduler} without job_dir runs \
                         the job in the current directory (give -cfg job_dir=<new directory> \
                         to run from a copy of the workspace)"
                    );
                    None
                }
                Some(w) => Some(w.clone()),
                None => Some(current_dir()?.display().to_string()),
            }
        }
    };
    workspace
        .filter(|w| !w.is_empty())
        .map(|w| Workspace::parse(w.as_str()))
        .transpose()
}

/// `--after` the scheduler cannot hold: the dry run without it (shown as HELD), or the job
/// handed to a holder; `refused` if even that is not possible.
fn hold_instead(
    a: &RunArgs,
    runner: &Runner,
    job: HeldJob<'_>,
    cfg: &torchx::opts::Cfg,
    lib_args: &LibRunArgs,
    refused: Error,
) -> Result<i32> {
    let free = LibRunArgs {
        after: Vec::new(),
        ..lib_args.clone()
    };
    let without = runner.dryrun_component(job.component, job.args, job.scheduler, cfg, &free);
    match super::block_on(without) {
        Ok(ComponentOutcome::Done(info)) if a.dryrun => {
            print_dryrun(&info, a.json);
            if !a.json {
                println!(
                    "\n=== HELD: {} cannot hold this job for {} itself; a detached torchx \
                     process submits it once they ended as required ===",
                    job.scheduler,
                    a.after.join(", ")
                );
            }
            Ok(exit_codes::OK)
        }
        Ok(ComponentOutcome::Done(info)) if a.step.is_none() => {
            held(a, runner, job, &info.app.name)
        }
        _ => Err(refused),
    }
}

/// What `run` submits once a holder lets it: the scheduler, its `-cfg` (as chosen by `-s
/// auto`), the component and its arguments.
struct HeldJob<'a> {
    scheduler: &'a str,
    cfg: &'a str,
    component: &'a str,
    args: &'a [String],
}

/// The job, held by a pipeline's holder for its `--after` dependencies.
fn held(a: &RunArgs, runner: &Runner, job: HeldJob<'_>, app_name: &str) -> Result<i32> {
    let mut run_args = vec!["--scheduler".to_string(), job.scheduler.to_string()];
    if !job.cfg.is_empty() {
        run_args.extend(["--cfg".to_string(), job.cfg.to_string()]);
    }
    run_args.extend(super::group::rerun_argv_without(
        a,
        job.component,
        job.args,
        &["--after", "--scheduler", "--cfg"],
    ));
    let name = super::pipeline::step_name(app_name);
    super::pipeline::run_held(a, runner, job.scheduler, run_args, &name)
}

/// `--time_limit`, `--checkpoint_signal`, `--max_retries`, `--requeue_exit_code`,
/// `--max_requeues` and `--checkpoint_dir`, else their `[cli:run]` defaults, checked.
fn role_defaults(
    a: &RunArgs,
    config: &std::collections::BTreeMap<String, String>,
) -> Result<RoleDefaults> {
    let value = |flag: &Option<String>, key: &str| -> Option<(String, String)> {
        match flag {
            Some(v) => Some((format!("--{key}"), v.clone())),
            None => config
                .get(key)
                .map(|v| (format!("[cli:run] {key} in .torchxconfig"), v.clone())),
        }
    };
    let context = |(whence, v): &(String, String), e: Error| {
        Error::arg(format!("{whence} `{v}`: {}", e.message()))
    };
    let number = |given: Option<(String, String)>, what: &str| -> Result<Option<i64>> {
        given
            .map(|(whence, v)| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| Error::arg(format!("{whence} `{v}` is not {what}")))
            })
            .transpose()
    };
    let time_limit = value(&a.time_limit, "time_limit")
        .map(|g| parse_duration(&g.1).map_err(|e| context(&g, e)))
        .transpose()?;
    let checkpoint_signal = value(&a.checkpoint_signal, "checkpoint_signal")
        .map(|g| g.1.parse::<CheckpointSignal>().map_err(|e| context(&g, e)))
        .transpose()?;
    let count = |n: Option<i64>, key: &str| -> Result<Option<u32>> {
        n.map(|n| {
            u32::try_from(n).map_err(|_| Error::arg(format!("--{key} must be 0 or more, got {n}")))
        })
        .transpose()
    };
    let max_retries = count(
        number(value(&a.max_retries, "max_retries"), "a number of retries")?,
        "max_retries",
    )?;
    let max_requeues = count(
        number(
            value(&a.max_requeues, "max_requeues"),
            "a number of requeues",
        )?,
        "max_requeues",
    )?;
    let requeue_exit_code = number(
        value(&a.requeue_exit_code, "requeue_exit_code"),
        "an exit code (1-255)",
    )?
    .map(|c| {
        i32::try_from(c)
            .ok()
            .filter(|c| (1..=255).contains(c))
            .ok_or_else(|| {
                Error::arg(format!(
                    "--requeue_exit_code {c} is not an exit code (1-255)"
                ))
            })
    })
    .transpose()?;
    let checkpoint_dir = value(&a.checkpoint_dir, "checkpoint_dir").map(|(_, v)| v);
    let hang_timeout = value(&a.hang_timeout, "hang_timeout")
        .map(|g| match parse_duration(&g.1) {
            Ok(0) => Err(Error::arg(format!(
                "{} `{}`: a hang timeout must be more than 0",
                g.0, g.1
            ))),
            other => other.map_err(|e| context(&g, e)),
        })
        .transpose()?;
    if let (Some(limit), None) = (time_limit, checkpoint_signal) {
        let fitted = torchx::specs::default_checkpoint_signal(limit);
        if fitted != torchx::specs::DEFAULT_CHECKPOINT_SIGNAL {
            eprintln!(
                "torchx: the checkpoint signal is {fitted}: the default {} fitted to the time \
                 limit of {} (a quarter of it); give --checkpoint_signal to choose",
                torchx::specs::DEFAULT_CHECKPOINT_SIGNAL,
                torchx::specs::format_duration(limit)
            );
        }
    }
    Ok(RoleDefaults {
        time_limit,
        checkpoint_signal,
        max_retries,
        requeue_exit_code,
        max_requeues,
        checkpoint_dir,
        hang_timeout,
    })
}

fn current_dir() -> Result<std::path::PathBuf> {
    std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))
}

async fn submit_and_wait(
    runner: Arc<Runner>,
    info: DryRunInfo,
    wait: bool,
    stream_logs: bool,
    poll: Duration,
    timeout: Option<Duration>,
    json: bool,
) -> Result<i32> {
    let mut interrupts = super::Interrupts::install()?;
    let handle = runner.schedule(&info).await?;
    if !json {
        println!("{handle}");
        let _ = std::io::stdout().flush();
    }
    if !wait {
        if json {
            // The state and UI URL the scheduler tells right after the submission.
            let status = runner.status(&handle).await.ok().flatten();
            print_json(&torchx::specs::run_json(&handle, status.as_ref()));
        }
        return Ok(exit_codes::OK);
    }
    let mut log_tasks = tokio::task::JoinSet::new();
    if stream_logs {
        for role in &info.app.roles {
            for k in 0..role.num_replicas {
                let (runner, handle, role) =
                    (Arc::clone(&runner), handle.clone(), role.name.clone());
                log_tasks.spawn(async move {
                    let prefix = format!("{role}/{k}");
                    stream_replica(&runner, &handle, &role, k, &prefix).await
                });
            }
        }
    }
    // The log streams end when the app does; only then is its final state worth asking for.
    let finish = async {
        while let Some(res) = log_tasks.join_next().await {
            if let Ok(Err(e)) = res {
                log::warn!("logs of {handle}: {e}");
            }
        }
        runner.wait(&handle, poll, None).await
    };
    let status = tokio::select! {
        s = super::within(timeout, &handle, finish) => s?,
        _ = interrupts.recv() => return interrupted(&runner, &handle).await,
    };
    let status = status.unwrap_or_else(|| AppStatus::new(AppState::Unknown));
    if json {
        let mut out = torchx::specs::run_json(&handle, Some(&status));
        out["status"] = status.to_json(&[]);
        print_json(&out);
    } else if status.state != AppState::Succeeded {
        eprintln!(
            "torchx: job {handle} did not succeed: {}{}",
            status.state,
            if status.msg.is_empty() {
                String::new()
            } else {
                format!(" ({})", status.msg)
            }
        );
    }
    Ok(if status.state == AppState::Succeeded {
        exit_codes::OK
    } else {
        exit_codes::JOB_FAILED
    })
}

async fn interrupted(runner: &Runner, handle: &str) -> Result<i32> {
    eprintln!("torchx: interrupted, cancelling {handle}");
    // local_cwd records the cancel request and signals the supervisor before its cancel first
    // waits, so after a second the rest of the stop is safely the supervisor's. Elsewhere the
    // cancel is a call in flight that must not be dropped.
    let local_cwd = torchx::specs::parse_app_handle(handle)
        .is_ok_and(|h| h.scheduler() == torchx::schedulers::local_cwd::NAME);
    if local_cwd {
        match tokio::time::timeout(Duration::from_secs(1), runner.cancel(handle)).await {
            Ok(result) => result?,
            Err(_) => {
                eprintln!("torchx: {handle} is stopping; `torchx status {handle}` shows when")
            }
        }
    } else {
        runner.cancel(handle).await?;
    }
    Ok(exit_codes::INTERRUPTED)
}
