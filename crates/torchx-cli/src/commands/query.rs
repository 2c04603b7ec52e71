//! Commands about existing apps: status, describe, list, log, cancel, delete.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;
use torchx::scheduler::LogQuery;
use torchx::specs::{format_utc, AppState, Stream};
use torchx::{Error, Result};

use torchx::runner::Named;

use super::show::{log_app, unknown};
use crate::exit_codes;
use crate::output::print_json;
use clap::Args;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The app handle: scheduler://session/app_id.
    pub app_handle: String,
    /// Only these roles (comma-separated).
    #[arg(long)]
    pub roles: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct HandleArgs {
    /// The app handle: scheduler://session/app_id.
    pub app_handle: String,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The scheduler (default: local_cwd).
    #[arg(short = 's', long)]
    pub scheduler: Option<String>,
    /// Only apps in this state (e.g. RUNNING, SUCCEEDED).
    #[arg(long)]
    pub state: Option<String>,
    /// At most this many apps (newest first).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Also the apps of other state directories (local_docker's engine is shared: by default
    /// it lists this state directory's apps, as local_cwd does).
    #[arg(long)]
    pub all: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// scheduler://[session]/app_id[/role[/replica_ids,...]]
    pub identifier: String,
    /// Only lines matching this regex.
    #[arg(long)]
    pub regex: Option<String>,
    /// Follow the logs until the app ends.
    #[arg(short = 't', long)]
    pub tail: bool,
    /// stdout, stderr or combined.
    #[arg(long)]
    pub streams: Option<String>,
    /// Only lines since this time (unix seconds, or a duration ago such as 10m, 2h).
    #[arg(long)]
    pub since: Option<String>,
    /// Only lines until this time (same formats as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// The stacks captured when replicas hung (--hang_timeout) instead of the log lines: a
    /// block per process, headed by role, replica and rank.
    #[arg(long)]
    pub stacks: bool,
    /// With --stacks: of this attempt (default: each replica's latest that hung).
    #[arg(long, value_name = "N", requires = "stacks")]
    pub attempt: Option<u32>,
    /// With --stacks: as JSON.
    #[arg(long, requires = "stacks")]
    pub json: bool,
}

pub fn status(a: StatusArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    match super::block_on(runner.named(&a.app_handle))? {
        Named::Pipeline(pipeline) => return super::pipeline::status(&runner, &pipeline, a.json),
        Named::Group(group) => return super::group::status(&runner, &group, a.json),
        Named::App => {}
    }
    let status =
        super::block_on(runner.status(&a.app_handle))?.ok_or_else(|| unknown(&a.app_handle))?;
    let roles = a
        .roles
        .as_deref()
        .map(super::split_list)
        .unwrap_or_default();
    // A scheduler that reports roles can tell a typo from a role with nothing to show.
    let known: Vec<&str> = status.roles.iter().map(|r| r.role.as_str()).collect();
    if let Some(missing) = roles
        .iter()
        .find(|r| !known.is_empty() && !known.contains(&r.as_str()))
    {
        return Err(Error::not_found(
            "role",
            missing.as_str(),
            format!(" in {}; its roles are: {}", a.app_handle, known.join(", ")),
        ));
    }
    if a.json {
        print_json(&status.to_json_for(&a.app_handle, &roles));
    } else {
        println!("{}", status.format(&roles));
    }
    Ok(exit_codes::OK)
}

pub fn describe(a: HandleArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let app =
        super::block_on(runner.describe(&a.app_handle))?.ok_or_else(|| unknown(&a.app_handle))?;
    if a.json {
        print_json(&serde_json::to_value(&app).unwrap_or_default());
    } else {
        print!("{}", app.to_yaml());
    }
    Ok(exit_codes::OK)
}

fn fmt_time(t: Option<f64>) -> String {
    t.map(|t| format!("{}Z", format_utc(t as i64)))
        .unwrap_or_else(|| "-".into())
}

fn fmt_duration(start: Option<f64>, end: Option<f64>) -> String {
    let Some(start) = start else {
        return "-".into();
    };
    let end = end.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(start)
    });
    crate::output::duration((end - start).max(0.0))
}

pub fn list(a: ListArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let scheduler = a.scheduler.clone().unwrap_or_else(|| {
        runner
            .registry()
            .default_name()
            .unwrap_or("local_cwd")
            .to_string()
    });
    let state: Option<AppState> = a.state.as_deref().map(str::parse).transpose()?;
    let mut apps = super::block_on(runner.list(&scheduler))?;
    super::group::fold_into_groups(&scheduler, &mut apps);
    super::block_on(runner.fold_into_pipelines(&scheduler, &mut apps))?;
    apps.retain(|app| state.is_none_or(|s| app.state == s));
    let before = apps.len();
    if !a.all {
        apps.retain(|app| !app.other_state_dir);
    }
    let hidden = before - apps.len();
    if hidden > 0 {
        eprintln!(
            "torchx: {hidden} app(s) of other state directories on this {scheduler} engine not \
             shown (`--all` shows them)"
        );
    }
    if let Some(n) = a.limit {
        apps.truncate(n);
    }
    if a.json {
        print_json(&apps);
        return Ok(exit_codes::OK);
    }
    let rows: Vec<[String; 5]> = apps
        .iter()
        .map(|x| {
            [
                x.app_handle.clone(),
                x.name.clone(),
                x.state.to_string(),
                fmt_time(x.start_time),
                fmt_duration(
                    x.start_time,
                    if x.state.is_terminal() {
                        x.end_time
                    } else {
                        None
                    },
                ),
            ]
        })
        .collect();
    let header = ["APP HANDLE", "APP NAME", "APP STATUS", "START", "DURATION"].map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    // Buffered: stdout is line-buffered, and 10,000 rows would be 10,000 writes.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for r in std::iter::once(&header).chain(&rows) {
        let [cells @ .., last] = r;
        for (c, w) in cells.iter().zip(widths) {
            let _ = write!(out, "{c:<w$}  ");
        }
        let _ = writeln!(out, "{last}");
    }
    Ok(exit_codes::OK)
}

/// A point in time: unix seconds, or a duration ago (`30s`, `10m`, `2h`, `1d`).
fn parse_time(flag: &str, s: &str) -> Result<SystemTime> {
    let bad = || {
        Error::arg(format!("--{flag} `{s}` is not a time: give unix seconds (1700000000) or a duration ago (30s, 10m, 2h, 1d), within this millennium"))
    };
    let seconds = |n: f64| Duration::try_from_secs_f64(n).map_err(|_| bad());
    if let Ok(secs) = s.parse::<f64>() {
        return UNIX_EPOCH
            .checked_add(seconds(secs)?)
            .ok_or_else(bad)
            .and_then(|t| {
                // Beyond year 3000 is a typo, not a time.
                (t < UNIX_EPOCH + Duration::from_secs(32_503_680_000))
                    .then_some(t)
                    .ok_or_else(bad)
            });
    }
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(bad()),
    };
    SystemTime::now()
        .checked_sub(seconds(n * mult)?)
        .ok_or_else(bad)
}

pub fn log(a: LogArgs) -> Result<i32> {
    let re = Regex::new(r"^\w+://[^/]*/[^/]+(/[^/]+(/(\d+,?)+)?)?$").expect("valid regex");
    if !re.is_match(&a.identifier) {
        return Err(Error::arg(format!("`{}` is not of the form SCHEDULER://[SESSION_NAME]/APP_ID/[ROLE_NAME/[REPLICA_IDS,...]]", a.identifier)));
    }
    let (scheme, rest) = a.identifier.split_once("://").unwrap_or_default();
    let parts: Vec<&str> = rest.split('/').collect();
    let session = if parts[0].is_empty() {
        "default"
    } else {
        parts[0]
    };
    let handle = format!("{scheme}://{session}/{}", parts[1]);
    if a.stacks {
        return stacks(&handle, (parts.get(2).copied(), parts.get(3).copied()), &a);
    }
    let query = LogQuery {
        regex: a
            .regex
            .as_deref()
            .map(Regex::new)
            .transpose()
            .map_err(|e| Error::arg(format!("--regex: {e}")))?,
        since: a
            .since
            .as_deref()
            .map(|s| parse_time("since", s))
            .transpose()?,
        until: a
            .until
            .as_deref()
            .map(|s| parse_time("until", s))
            .transpose()?,
        should_tail: a.tail,
        streams: a.streams.as_deref().map(str::parse::<Stream>).transpose()?,
    };
    let runner = std::rc::Rc::new(super::runner_without_config()?);
    let query = std::rc::Rc::new(query);
    let selection = (parts.get(2).copied(), parts.get(3).copied());
    // A pipeline's steps: its record read again as it moves on.
    if torchx::pipeline::is_pipeline_handle(&handle) {
        return super::block_on(super::pipeline::log(
            &runner, &query, &handle, selection, a.tail,
        ));
    }
    // A group's tasks one after the other, each line labelled with the task's index; on one
    // runtime, which the schedulers' clients (a Kubernetes client's worker) live on.
    if let Named::Group(group) = super::block_on(runner.named(&handle))? {
        return super::block_on(async {
            for task in &group.tasks {
                if let Some(h) = &task.handle {
                    let label = format!("{}:", task.index);
                    log_app(&runner, &query, h, selection, a.tail, &label).await?;
                }
            }
            Ok(exit_codes::OK)
        });
    }
    super::block_on(log_app(&runner, &query, &handle, selection, a.tail, ""))
}

/// `torchx log --stacks`: the stacks captured when the app's replicas (those of the role, or
/// of its replica ids) hung.
fn stacks(handle: &str, (role, ids): (Option<&str>, Option<&str>), a: &LogArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let mut found = super::block_on(runner.hang_stacks(handle, a.attempt))?;
    found.retain(|s| {
        role.is_none_or(|r| r == s.role)
            && ids.is_none_or(|ids| ids.split(',').any(|k| k == s.replica.to_string()))
    });
    if a.json {
        print_json(&found);
        return Ok(exit_codes::OK);
    }
    if found.is_empty() {
        eprintln!(
            "torchx: no stacks of {handle}{}: none of its replicas hung (--hang_timeout)",
            a.attempt
                .map(|n| format!(" in attempt {n}"))
                .unwrap_or_default()
        );
    }
    let mut out = std::io::stdout().lock();
    for s in &found {
        let _ = writeln!(
            out,
            "--- {}/{} attempt {} ---",
            s.role, s.replica, s.attempt
        );
        let _ = write!(out, "{}", s.text);
    }
    Ok(exit_codes::OK)
}

pub fn cancel(a: HandleArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    super::block_on(runner.cancel(&a.app_handle))?;
    log::info!("cancelled {}", a.app_handle);
    Ok(exit_codes::OK)
}

pub fn delete(a: HandleArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    super::block_on(runner.delete(&a.app_handle))?;
    log::info!("deleted {}", a.app_handle);
    Ok(exit_codes::OK)
}
