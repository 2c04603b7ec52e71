//! How the commands show an app: its dry run, a replica's lines as they come, its replicas'
//! logs.

use torchx::scheduler::{DryRunInfo, LogQuery};
use torchx::specs::parse_app_handle;
use torchx::{Error, Result, Runner};

use crate::exit_codes;
use crate::output::{copy_log_lines, print_json, Sink};

/// What a command shows on stdout: text, or one JSON document.
#[derive(Debug, Clone)]
pub enum Shown {
    /// Printed as it is.
    Text(String),
    /// Printed pretty.
    Json(serde_json::Value),
}

impl Shown {
    pub fn print(&self) {
        match self {
            Shown::Text(t) => print!("{t}"),
            Shown::Json(v) => print_json(v),
        }
    }
}

pub fn print_dryrun(info: &DryRunInfo, json: bool) {
    dryrun_shown(info, json).print();
}

/// An app's dry run: the app and the scheduler's request, the images to build and what the
/// pre-flight checks found.
pub fn dryrun_shown(info: &DryRunInfo, json: bool) -> Shown {
    if json {
        return Shown::Json(serde_json::json!({
            "scheduler": info.scheduler,
            "app": info.app,
            "cfg": info.cfg,
            "request": info.request.to_json(),
            "images": info.images,
            "preflight": info.preflight,
        }));
    }
    Shown::Text(dryrun_text(info))
}

/// An app's dry run as text.
pub fn dryrun_text(info: &DryRunInfo) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "\n=== APPLICATION ===\n{}\n=== SCHEDULER REQUEST ===\n{}\n",
        info.app.to_yaml(),
        info.request.render()
    );
    if !info.images.is_empty() {
        s.push_str("\n=== WORKSPACE IMAGES (built before submitting) ===\n");
        for i in &info.images {
            let push = if i.push { ", pushed" } else { "" };
            let _ = writeln!(
                s,
                "{}: workspace {} on top of {}{push}; run by {}",
                i.image,
                i.workspace,
                i.base_image,
                i.roles.join(", ")
            );
        }
    }
    if !info.preflight.is_empty() {
        s.push_str("\n=== PRE-FLIGHT: `torchx run` would refuse this job (--skip_preflight) ===\n");
        for problem in &info.preflight {
            let _ = writeln!(s, "{problem}");
        }
    }
    s
}

/// Follows replica `role/k` of `handle` on stderr, each line after `prefix`, until it ends.
pub async fn stream_replica(
    runner: &Runner,
    handle: &str,
    role: &str,
    k: u32,
    prefix: &str,
) -> Result<()> {
    let query = LogQuery {
        should_tail: true,
        ..LogQuery::default()
    };
    let mut lines = runner.log_lines(handle, role, k, &query).await?;
    copy_log_lines(lines.as_mut(), prefix, Sink::Stderr).await
}

/// The log lines of one app's replicas (those of `role`, or of its replica ids), labelled
/// `{label}{role}/{k}`: followed at once with `tail`, else one replica after the other.
pub async fn log_app(
    runner: &std::rc::Rc<torchx::Runner>,
    query: &std::rc::Rc<LogQuery>,
    handle: &str,
    (role_filter, ids): (Option<&str>, Option<&str>),
    tail: bool,
    label: &str,
) -> Result<i32> {
    let handle = handle.to_string();
    let app = runner
        .describe(&handle)
        .await?
        .ok_or_else(|| unknown(&handle))?;
    let mut targets: Vec<(String, u32)> = Vec::new();
    for role in &app.roles {
        if role_filter.is_some_and(|r| r != role.name) {
            continue;
        }
        match ids {
            Some(ids) => {
                for id in ids.split(',').filter(|s| !s.is_empty()) {
                    let k: u32 = id
                        .parse()
                        .map_err(|_| Error::arg(format!("replica id `{id}` is not a number")))?;
                    if k >= role.num_replicas {
                        return Err(Error::not_found(
                            "replica",
                            format!("{}/{k}", role.name),
                            format!(": role {} has {} replica(s)", role.name, role.num_replicas),
                        ));
                    }
                    targets.push((role.name.clone(), k));
                }
            }
            None => targets.extend((0..role.num_replicas).map(|k| (role.name.clone(), k))),
        }
    }
    if let (Some(r), true) = (role_filter, targets.is_empty()) {
        let names: Vec<&str> = app.roles.iter().map(|x| x.name.as_str()).collect();
        return Err(Error::not_found(
            "role",
            r,
            format!(" in {handle}; its roles are: {}", names.join(", ")),
        ));
    }
    let mut tasks = Vec::new();
    for (role, k) in targets {
        let (runner, query, handle) = (runner.clone(), query.clone(), handle.clone());
        let prefix = format!("{label}{role}/{k}");
        tasks.push(async move {
            let mut lines = runner.log_lines(&handle, &role, k, &query).await?;
            copy_log_lines(lines.as_mut(), &prefix, Sink::Stdout).await
        });
    }
    // Follow every replica at once when tailing; otherwise print them in order.
    if tail {
        let mut set = tokio::task::JoinSet::new();
        let local = tokio::task::LocalSet::new();
        let results = local
            .run_until(async {
                for t in tasks {
                    set.spawn_local(t);
                }
                let mut out = Vec::new();
                while let Some(r) = set.join_next().await {
                    out.push(r.map_err(|e| Error::backend("log", e.to_string()))?);
                }
                Ok::<_, Error>(out)
            })
            .await?;
        results.into_iter().collect::<Result<Vec<()>>>()?;
    } else {
        for t in tasks {
            t.await?;
        }
    }
    Ok(exit_codes::OK)
}

/// The error for an app its scheduler does not know (as TorchX words it).
pub fn unknown(handle: &str) -> Error {
    match parse_app_handle(handle) {
        Ok(h) => Error::not_found(
            "app",
            handle,
            format!(
                ": AppDef {} does not exist or has been removed from {}'s data plane",
                h.app_id(),
                h.scheduler()
            ),
        ),
        Err(e) => e,
    }
}
