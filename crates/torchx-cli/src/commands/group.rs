//! Arrays and sweeps from the command line: `torchx run --array/--sweep/--sweep_file` submits
//! one app per task (the component built with the task's arguments) and records them as one
//! group (through `Runner::run_group`); `status`, `log` and `list` show groups their own way
//! (the Runner's status, cancel and delete know group handles), and `rerun --failed` runs a
//! group's failed tasks again.

use torchx::group::Task;
use torchx::group::{counts, group_state, GroupDryRun, GroupPlan, GroupRecord, GroupSpec};
use torchx::opts::Cfg;
use torchx::runner::{ComponentOutcome, RunArgs as LibRunArgs};
use torchx::scheduler::ArrayRequest;
use torchx::specs::AppState;
use torchx::{Error, Result, Runner};

use clap::Args;

use super::run_args::{RerunOf, RunArgs, RunCommand};
use super::show::Shown;
use crate::exit_codes;
use crate::output::print_json;
use crate::progress::GroupProgress;

#[derive(Debug, Args)]
pub struct RerunArgs {
    /// The group handle (scheduler://session/~group_id) or pipeline handle
    /// (pipeline://session/id).
    pub group_handle: String,
    /// Only the tasks (or steps) that failed or were cancelled (or never started).
    #[arg(long, required = true)]
    pub failed: bool,
    /// Wait for the new group to finish.
    #[arg(long)]
    pub wait: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SubmitGroupArgs {
    /// The group handle.
    pub group_handle: String,
}

/// One `torchx run` of a group.
pub struct GroupRun<'a> {
    pub component: &'a str,
    pub args: &'a [String],
    pub scheduler: &'a str,
    pub cfg: &'a Cfg,
    pub lib_args: LibRunArgs,
    /// The scheduler runs jobs on this machine (then a group is waited for unless detached).
    pub runs_locally: bool,
}

/// A group's dry run: the one native request, or each task's with why they go one by one.
fn group_dryrun_shown(dryrun: &GroupDryRun, json: bool) -> Shown {
    let text = super::show::dryrun_text;
    match (&dryrun.array, json) {
        (ArrayRequest::Native(info), true) => Shown::Json(serde_json::json!({
            "native_array": true,
            "tasks": dryrun.tasks.iter().map(|(t, _)| t.index).collect::<Vec<_>>(),
            "scheduler": info.scheduler,
            "app": info.app,
            "cfg": info.cfg,
            "request": info.request.to_json(),
            "images": info.images,
        })),
        (ArrayRequest::Native(info), false) => Shown::Text(format!(
            "=== ONE NATIVE ARRAY OF {} TASKS (the app of the first task below) ===\n{}",
            dryrun.tasks.len(),
            text(info)
        )),
        (ArrayRequest::PerTask(why), true) => Shown::Json(serde_json::json!({
            "native_array": false,
            "per_task_because": why,
            "tasks": dryrun.tasks.iter().map(|(t, info)| serde_json::json!({
                "index": t.index,
                "params": t.params,
                "app": info.app,
                "request": info.request.to_json(),
            })).collect::<Vec<_>>(),
        })),
        (ArrayRequest::PerTask(why), false) => {
            let mut s = format!(
                "=== ONE SUBMISSION PER TASK ({} tasks): {why} ===\n",
                dryrun.tasks.len()
            );
            for (task, info) in &dryrun.tasks {
                s.push_str(&format!("\n=== TASK {} ===\n{}", task.index, text(info)));
            }
            Shown::Text(s)
        }
    }
}

/// The group's tasks, its spec as given, its cap and its size (what a task sees as
/// `TORCHX_ARRAY_SIZE`: the whole group's, when these are the rest of it or a rerun of some).
fn plan(a: &RunArgs) -> Result<(Vec<Task>, String, Option<u32>, usize)> {
    if let Some(group) = &a.rest_of {
        let pending = group.tasks.iter().filter(|t| t.is_pending());
        let tasks = pending
            .map(|t| Task {
                index: t.index,
                params: t.params.clone(),
            })
            .collect();
        return Ok((
            tasks,
            group.spec.clone(),
            group.max_concurrent,
            group.size(),
        ));
    }
    if let Some(rerun) = &a.rerun_of {
        let spec = format!("rerun of {} ({})", rerun.group.handle(), rerun.group.spec);
        let size = rerun.group.size();
        return Ok((rerun.tasks.clone(), spec, rerun.group.max_concurrent, size));
    }
    let (tasks, spec, cap) = GroupSpec {
        array: a.array.clone(),
        sweep: a.sweep.clone(),
        sweep_file: a.sweep_file.clone(),
        max_concurrent: a.max_concurrent,
    }
    .plan()?;
    let size = tasks.len();
    Ok((tasks, spec, cap, size))
}

impl GroupRun<'_> {
    pub fn run(self, runner: Runner, a: &RunArgs) -> Result<i32> {
        let (tasks, spec, max_concurrent, size) = plan(a)?;
        let plan = GroupPlan {
            size,
            component: self.component.to_string(),
            args: self.args.to_vec(),
            tasks,
            spec,
            max_concurrent,
            argv: rerun_argv(a, self.component, self.args),
            parent: a.rerun_of.as_ref().map(|r| r.group.handle()),
        };
        let dryrun = runner.dryrun_group(&plan, self.scheduler, self.cfg, &self.lib_args);
        let dryrun = match super::block_on(dryrun)? {
            ComponentOutcome::Help(h) => {
                a.show(Shown::Text(h));
                return Ok(exit_codes::OK);
            }
            ComponentOutcome::Done(dryrun) => dryrun,
        };
        if a.dryrun {
            a.show(group_dryrun_shown(&dryrun, a.json));
            return Ok(exit_codes::OK);
        }
        if let Some(group) = &a.rest_of {
            let mut group = group.clone();
            super::block_on(runner.submit_pending(&mut group, dryrun.tasks))?;
            return Ok(exit_codes::OK);
        }
        // As for one job: a group on this machine is waited for unless detached.
        let wait = a.wait || a.log || (self.runs_locally && !a.detach);
        let timeout = a
            .timeout
            .as_deref()
            .map(super::run_args::parse_timeout)
            .transpose()?;
        // Capped tasks submitted one by one need someone to wait for the cap: a background
        // `torchx __submit-group`, so that `run` has the handle at once (and shows the
        // group's progress while it waits).
        let capped =
            plan.max_concurrent.is_some() && matches!(dryrun.array, ArrayRequest::PerTask(_));
        let group = if capped {
            start_submitter(runner.new_group(&plan, &dryrun)?)?
        } else {
            super::block_on(runner.schedule_group(&plan, dryrun))?
        };
        let handle = group.handle();
        let unsubmitted = group.tasks.iter().filter(|t| t.error.is_some()).count();
        if a.report_submitted(&handle) {
            return Ok(exit_codes::OK);
        }
        if !a.json {
            println!("{handle}");
        } else if !wait {
            print_json(&serde_json::json!({"handle": handle}));
        }
        if unsubmitted > 0 {
            log::error!(
                "{unsubmitted} of the group's {} tasks could not be submitted; `torchx status \
                 {handle}` says why",
                group.tasks.len()
            );
        }
        if !wait {
            return Ok(if unsubmitted == 0 {
                exit_codes::OK
            } else {
                exit_codes::JOB_FAILED
            });
        }
        // As a single run streams its replicas' lines when it runs here (or with --log), a
        // group streams its tasks', labelled as `torchx log <group>` labels them.
        let stream_logs = a.log || (self.runs_locally && !a.json);
        super::block_on(follow(
            std::sync::Arc::new(runner),
            &group,
            timeout,
            a.json,
            stream_logs,
        ))
    }
}

/// Waits for `group` with its progress on stderr, then sums it up: the counts, each task that
/// did not succeed with its handle and why, and the command that runs them again. Ctrl-C or
/// SIGTERM cancels the group, as it does a job `run` waits for.
async fn follow(
    runner: std::sync::Arc<Runner>,
    group: &GroupRecord,
    timeout: Option<std::time::Duration>,
    json: bool,
    stream_logs: bool,
) -> Result<i32> {
    let mut interrupts = super::Interrupts::install()?;
    let handle = group.handle();
    let progress = std::cell::RefCell::new(GroupProgress::new(&handle, "tasks"));
    let latest = std::cell::RefCell::new(group.clone());
    // Each task's lines, followed from when its handle is known until its app ends.
    let streams = std::cell::RefCell::new(tokio::task::JoinSet::new());
    let mut streamed = std::collections::HashSet::new();
    let wait = runner.wait_group_with(group, |now, states| {
        if stream_logs {
            for task in &now.tasks {
                if let Some(h) = task.handle.as_ref().filter(|_| streamed.insert(task.index)) {
                    let (runner, h) = (runner.clone(), h.clone());
                    streams
                        .borrow_mut()
                        .spawn(stream_task(runner, h, task.index));
                }
            }
        }
        latest.replace(now.clone());
        progress.borrow_mut().update(states);
    });
    let interrupted = tokio::select! {
        states = super::within(timeout, &handle, wait) => Err(states),
        _ = interrupts.recv() => Ok(()),
    };
    let mut streams = streams.into_inner();
    if let Err(Ok(_)) = &interrupted {
        // The apps ended, so do their streams: the last lines first, then the summary.
        while streams.join_next().await.is_some() {}
    }
    drop(streams);
    progress.borrow_mut().finish();
    let states = match interrupted {
        Err(states) => states?,
        Ok(()) => {
            eprintln!("torchx: interrupted, cancelling {handle}");
            let group = latest.borrow().clone();
            runner.cancel_group(&group).await?;
            return Ok(exit_codes::INTERRUPTED);
        }
    };
    let group = latest.into_inner();
    let elapsed = progress.borrow().elapsed();
    let unsuccessful = unsuccessful_tasks(&runner, &group, &states).await;
    let state = group_state(&states);
    if json {
        let failed: Vec<serde_json::Value> = unsuccessful
            .iter()
            .map(|(index, state, handle, why)| {
                serde_json::json!({"index": index, "state": state.as_str(), "handle": handle,
                    "msg": why})
            })
            .collect();
        print_json(
            &serde_json::json!({"handle": handle, "state": state.as_str(),
            "counts": counts(&states), "unsuccessful": failed}),
        );
    } else {
        let counted: Vec<String> = counts(&states)
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        eprintln!(
            "torchx: group {handle}: {state} after {}: {} tasks, {}",
            crate::progress::duration(elapsed),
            states.len(),
            counted.join(", ")
        );
        for (index, state, task, why) in &unsuccessful {
            let task = task.as_deref().unwrap_or("never submitted");
            eprintln!("  task {index} {state}: {task}{}", parenthesised(why));
        }
        if !unsuccessful.is_empty() {
            eprintln!("  run them again: torchx rerun {handle} --failed");
        }
    }
    Ok(if state == AppState::Succeeded {
        exit_codes::OK
    } else {
        exit_codes::JOB_FAILED
    })
}

/// Follows every replica of task `index`'s app on stderr, each line labelled
/// `{index}:{role}/{k}` (as `torchx log <group>` prints it), until the app ends.
async fn stream_task(runner: std::sync::Arc<Runner>, handle: String, index: u32) {
    let app = match runner.describe(&handle).await {
        Ok(Some(app)) => app,
        Ok(None) => return,
        Err(e) => return log::warn!("logs of {handle}: {e}"),
    };
    let mut replicas = tokio::task::JoinSet::new();
    for role in &app.roles {
        for k in 0..role.num_replicas {
            let (runner, handle, role) = (runner.clone(), handle.clone(), role.name.clone());
            let prefix = format!("{index}:{role}/{k}");
            replicas.spawn(async move {
                super::show::stream_replica(&runner, &handle, &role, k, &prefix).await
            });
        }
    }
    while let Some(done) = replicas.join_next().await {
        if let Ok(Err(e)) = done {
            log::warn!("logs of {handle}: {e}");
        }
    }
}

/// The tasks of `group` that did not succeed: (index, state, handle, why).
async fn unsuccessful_tasks(
    runner: &Runner,
    group: &GroupRecord,
    states: &[AppState],
) -> Vec<(u32, AppState, Option<String>, String)> {
    let mut out = Vec::new();
    for (task, state) in group.tasks.iter().zip(states) {
        if *state == AppState::Succeeded {
            continue;
        }
        let why = match &task.handle {
            Some(h) => match runner.status(h).await {
                Ok(Some(s)) => s.msg,
                Ok(None) => "its scheduler no longer knows it".to_string(),
                Err(e) => e.to_string(),
            },
            None => task.error.clone().unwrap_or_default(),
        };
        out.push((task.index, *state, task.handle.clone(), why));
    }
    out
}

fn parenthesised(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" ({s})")
    }
}

/// Records `group` with its submitter: a `torchx __submit-group` in the background, started
/// first and told to go on only once the record names it (so no reader ever sees tasks that
/// nobody will submit). Its output goes to `<state>/groups/<id>.log`. Returns the record.
fn start_submitter(mut group: GroupRecord) -> Result<GroupRecord> {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    let state_dir = torchx::schedulers::default_state_dir();
    let handle = group.handle();
    let log_path = state_dir
        .join("groups")
        .join(format!("{}.log", group.group_id.trim_start_matches('~')));
    torchx::schedulers::create_private_dir(&state_dir.join("groups"))?;
    // Its log is its lock: locked here and inherited, it is held from before the record
    // names the submitter until the submitter (and anything it left with the log) ends.
    let log = torchx::durable::try_lock(&log_path)?.ok_or_else(|| {
        Error::backend(
            "group",
            format!("{} is locked by another process", log_path.display()),
        )
    })?;
    let err_log = log
        .try_clone()
        .map_err(|e| Error::io("duplicating the submitter's log", e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the torchx binary", e))?;
    let mut child = std::process::Command::new(exe)
        .args(["__submit-group", &handle])
        .stdin(std::process::Stdio::piped())
        .stdout(log)
        .stderr(err_log)
        // Its own process group: Ctrl-C at the terminal that ran `torchx run` stops not it.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("starting the group's submitter", e))?;
    group.submitter = Some(torchx::group::Submitter::of(child.id()));
    let saved = group.save(&state_dir);
    // Go (closing its stdin), or stop: without a record it must not submit anything.
    let mut stdin = child.stdin.take();
    match saved {
        Ok(()) => {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(b"go\n");
            }
            drop(stdin);
            Ok(group)
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// `torchx __submit-group <group>`: once told to go, submits the group's pending tasks
/// (built again from the recorded `torchx run` arguments) with `run`, `torchx run`'s own, as
/// the foreground would have.
pub fn submit_rest(a: SubmitGroupArgs, run: RunCommand) -> Result<i32> {
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .map_err(|e| Error::io("reading the go-ahead", e))?;
    if go.trim() != "go" {
        return Ok(exit_codes::OK);
    }
    let group = GroupRecord::find(&a.group_handle)?
        .ok_or_else(|| Error::arg(format!("`{}` is not a group handle", a.group_handle)))?;
    let mut argv = vec!["torchx".to_string(), "run".to_string()];
    argv.extend(group.argv.iter().cloned());
    let args = super::run_args::parse_recorded(&argv).map_err(|e| {
        Error::backend(
            "group",
            format!("the record holds arguments torchx run refuses: {e}"),
        )
    });
    let outcome = args.and_then(|mut args| {
        args.rest_of = Some(group.clone());
        run(args)
    });
    if let Err(e) = &outcome {
        // Nothing more will be submitted: say why on every task left.
        if let Some(mut group) = GroupRecord::find(&a.group_handle)? {
            for t in group.tasks.iter_mut().filter(|t| t.is_pending()) {
                t.error = Some(format!("its submitter stopped: {e}"));
            }
            group.submitter = None;
            group.save(&torchx::schedulers::default_state_dir())?;
        }
    }
    outcome
}

/// [`rerun_argv`] without the given flags and their values (a run moved elsewhere sets its
/// own scheduler and options).
pub(super) fn rerun_argv_without(
    a: &RunArgs,
    component: &str,
    args: &[String],
    flags: &[&str],
) -> Vec<String> {
    let mut kept = Vec::new();
    let mut words = rerun_argv(a, component, args).into_iter();
    while let Some(word) = words.next() {
        if flags.contains(&word.as_str()) {
            words.next();
        } else {
            kept.push(word);
        }
    }
    kept
}

/// The `torchx run` arguments that make this group's tasks again (the group flags aside).
pub(super) fn rerun_argv(a: &RunArgs, component: &str, args: &[String]) -> Vec<String> {
    if let Some(rerun) = &a.rerun_of {
        return rerun.group.argv.clone();
    }
    let mut argv: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<&String>| {
        if let Some(v) = value {
            argv.extend([format!("--{name}"), v.clone()]);
        }
    };
    flag("scheduler", a.scheduler.as_ref());
    for cfg in &a.cfg {
        flag("cfg", Some(cfg));
    }
    flag("workspace", a.workspace.as_ref());
    flag("parent_run_id", a.parent_run_id.as_ref());
    flag("time_limit", a.time_limit.as_ref());
    flag("checkpoint_signal", a.checkpoint_signal.as_ref());
    flag("max_retries", a.max_retries.as_ref());
    flag("requeue_exit_code", a.requeue_exit_code.as_ref());
    flag("max_requeues", a.max_requeues.as_ref());
    flag("checkpoint_dir", a.checkpoint_dir.as_ref());
    for dep in &a.after {
        flag("after", Some(dep));
    }
    if a.skip_preflight {
        argv.push("--skip_preflight".into());
    }
    argv.push("--".into());
    argv.push(component.into());
    argv.extend(args.iter().cloned());
    argv
}

/// `torchx rerun <group> --failed`: the group's failed, cancelled or never started tasks, run
/// again with their indexes and points as a new group linked to this one.
pub fn rerun(a: RerunArgs, run: RunCommand) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let group = GroupRecord::find(&a.group_handle)?.ok_or_else(|| {
        Error::arg(format!(
            "`{}` is not a group handle (scheduler://session/~id)",
            a.group_handle
        ))
    })?;
    let states = super::block_on(runner.group_states(&group))?;
    if let Some((t, s)) = group
        .tasks
        .iter()
        .zip(&states)
        .find(|(_, s)| !s.is_terminal())
    {
        return Err(Error::arg(format!(
            "{} is not over: task {} is {s} (rerun a finished group)",
            group.handle(),
            t.index
        )));
    }
    let tasks: Vec<Task> = group
        .tasks
        .iter()
        .zip(&states)
        .filter(|(_, s)| **s != AppState::Succeeded)
        .map(|(t, _)| Task {
            index: t.index,
            params: t.params.clone(),
        })
        .collect();
    if tasks.is_empty() {
        log::info!(
            "every task of {} succeeded: nothing to rerun",
            group.handle()
        );
        return Ok(exit_codes::OK);
    }
    let mut argv = vec!["torchx".to_string(), "run".to_string()];
    // `rerun` waits when asked to, wherever the group runs.
    argv.push(if a.wait { "--wait" } else { "--detach" }.into());
    // The first run's dependencies are over: the rerun does not wait for them again.
    let mut recorded = group.argv.iter();
    let mut kept = Vec::new();
    while let Some(word) = recorded.next() {
        if word == "--after" {
            recorded.next();
        } else {
            kept.push(word.clone());
        }
    }
    if a.json {
        argv.push("--json".into());
    }
    argv.extend(kept);
    let mut args = super::run_args::parse_recorded(&argv).map_err(|e| {
        Error::backend(
            "group",
            format!(
                "the record of {} holds arguments torchx run refuses: {e}",
                group.handle()
            ),
        )
    })?;
    args.rerun_of = Some(RerunOf { group, tasks });
    run(args)
}

/// `torchx status --json <group>` (and the dashboard's group page): the group, its state,
/// counts and tasks, given its tasks' states.
pub(crate) fn status_json(group: &GroupRecord, states: &[AppState]) -> serde_json::Value {
    let tasks: Vec<serde_json::Value> = group
        .tasks
        .iter()
        .zip(states)
        .map(|(t, s)| {
            serde_json::json!({"index": t.index, "params": t.params, "handle": t.handle,
                "state": s.to_string(), "error": t.error})
        })
        .collect();
    serde_json::json!({"group_handle": group.handle(), "state": group_state(states).to_string(),
        "spec": group.spec, "native_array": group.native, "parent": group.parent,
        "counts": counts(states), "tasks": tasks})
}

/// `torchx status <group>`.
pub fn status(runner: &Runner, group: &GroupRecord, json: bool) -> Result<i32> {
    let states = super::block_on(runner.group_states(group))?;
    let state = group_state(&states);
    let counts = counts(&states);
    if json {
        print_json(&status_json(group, &states));
        return Ok(exit_codes::OK);
    }
    let counted: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    println!("Group: {}\n  Spec: {}", group.handle(), group.spec);
    if let Some(array) = &group.native {
        println!("  Native array: {array}");
    }
    println!(
        "  State: {state}\n  Tasks: {} ({})",
        states.len(),
        counted.join(", ")
    );
    for (t, s) in group.tasks.iter().zip(&states) {
        let params: Vec<String> = t.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let what = t.handle.as_deref().or(t.error.as_deref()).unwrap_or("-");
        println!("  [{}] {s} {} {what}", t.index, params.join(" "));
    }
    Ok(exit_codes::OK)
}

/// `torchx list`: a group's tasks become one row (its handle, its state from theirs); groups
/// whose tasks the scheduler no longer lists are left out.
pub fn fold_into_groups(scheduler: &str, apps: &mut Vec<torchx::specs::ListAppResponse>) {
    let groups = GroupRecord::list(&torchx::schedulers::default_state_dir(), scheduler);
    for group in groups {
        let members: Vec<&str> = group
            .tasks
            .iter()
            .filter_map(|t| t.handle.as_deref())
            .collect();
        // A native array's tasks, listed by the scheduler, may include its pending ones as one
        // row (`<array>_[2-9%2]`).
        let array_prefix = group.native.as_ref().map(|h| format!("{h}_"));
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(apps).into_iter().partition(|a| {
            members.contains(&a.app_handle.as_str())
                || group.native.as_deref() == Some(a.app_handle.as_str())
                || array_prefix
                    .as_ref()
                    .is_some_and(|p| a.app_handle.starts_with(p.as_str()))
        });
        *apps = rest;
        if mine.is_empty() {
            continue;
        }
        // Tasks not submitted yet (a capped group) count too: the group is not over.
        let submitting = group.submitting(&torchx::schedulers::default_state_dir());
        let states: Vec<AppState> = mine
            .iter()
            .map(|a| a.state)
            .chain(
                group
                    .tasks
                    .iter()
                    .filter_map(|t| t.unsubmitted_state(submitting)),
            )
            .collect();
        let state = group_state(&states);
        apps.push(torchx::specs::ListAppResponse {
            app_id: group.group_id.clone(),
            app_handle: group.handle(),
            name: group.name.clone(),
            state,
            start_time: Some(group.created),
            end_time: state
                .is_terminal()
                .then(|| mine.iter().filter_map(|a| a.end_time).reduce(f64::max))
                .flatten(),
            other_state_dir: false,
        });
    }
    torchx::specs::sort_newest_first(apps);
}
