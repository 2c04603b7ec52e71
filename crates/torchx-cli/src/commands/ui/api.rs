//! The JSON API the page uses (documented in the README): `GET /api/info`, `GET /api/apps`,
//! `GET /api/apps/<handle>`, and the POSTs `/api/cancel`, `/api/delete`, `/api/rerun` with
//! `{"handle": ...}`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use torchx::pipeline::{pipeline_state, PipelineRecord};
use torchx::runner::Named;
use torchx::specs::{AppState, ListAppResponse};
use torchx::{Error, ErrorKind};

use super::Ui;
use crate::commands::{group, pipeline};

/// How long one scheduler may take to list its jobs before the page shows it as unanswered.
const LIST_TIMEOUT: Duration = Duration::from_secs(20);

/// An error as the page shows it: `{"error": ..., "kind": ...}` with a status that fits.
pub struct ApiError(pub Error);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.kind() {
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::InvalidArgument | ErrorKind::InvalidSpec | ErrorKind::InvalidConfig => {
                StatusCode::BAD_REQUEST
            }
            ErrorKind::Unsupported | ErrorKind::AlreadyExists => StatusCode::CONFLICT,
            ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        };
        let body = json!({"error": self.0.to_string(), "kind": self.0.kind().as_str()});
        (status, Json(body)).into_response()
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError(e)
    }
}

type ApiResult = std::result::Result<Json<Value>, ApiError>;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Small record files (groups, pipelines) are read on the blocking pool, never on the
/// executor.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> torchx::Result<T> + Send + 'static,
) -> torchx::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Error::backend("ui", format!("a blocking task did not finish: {e}")).with_source(e)
    })?
}

/// `GET /api/info`: what the page needs to know about this server.
pub async fn info(State(ui): State<Arc<Ui>>) -> Json<Value> {
    Json(json!({
        "read_only": ui.read_only,
        // Only a same-origin page can read this answer (no CORS), and it needs the token for
        // the header its changes carry.
        "csrf": ui.token,
        "schedulers": ui.schedulers,
        "session": ui.runner.session_name(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// What kind of thing a handle names.
fn kind_of(handle: &str) -> &'static str {
    if torchx::pipeline::is_pipeline_handle(handle) {
        "pipeline"
    } else if torchx::specs::parse_app_handle(handle).is_ok_and(|h| h.names_group()) {
        "group"
    } else {
        "app"
    }
}

/// One row of the jobs page.
fn row(scheduler: &str, app: &ListAppResponse, now: f64) -> Value {
    let kind = kind_of(&app.app_handle);
    let end = app.end_time.filter(|_| app.state.is_terminal());
    json!({
        "handle": app.app_handle,
        "name": app.name,
        "scheduler": if kind == "pipeline" { "pipeline" } else { scheduler },
        "kind": kind,
        "state": app.state.as_str(),
        "terminal": app.state.is_terminal(),
        "start": app.start_time,
        "end": end,
        "duration": app.start_time.map(|s| (end.unwrap_or(now) - s).max(0.0)),
    })
}

/// The jobs of one scheduler as `torchx list` shows them: a group or pipeline is one row.
async fn list_one(ui: &Ui, scheduler: &str) -> torchx::Result<Vec<ListAppResponse>> {
    let listed = tokio::time::timeout(LIST_TIMEOUT, ui.runner.list(scheduler))
        .await
        .map_err(|_| {
            Error::timeout(format!(
                "{scheduler} did not list its jobs within {}s",
                LIST_TIMEOUT.as_secs()
            ))
        })??;
    let name = scheduler.to_string();
    let mut apps = blocking(move || {
        let mut apps = listed;
        group::fold_into_groups(&name, &mut apps);
        Ok(apps)
    })
    .await?;
    ui.runner.fold_into_pipelines(scheduler, &mut apps).await?;
    Ok(apps)
}

/// `GET /api/apps`: every job of every listed scheduler, newest first, and the schedulers that
/// could not be asked (`errors`).
pub async fn apps(State(ui): State<Arc<Ui>>) -> Json<Value> {
    let listed =
        futures_util::future::join_all(ui.schedulers.iter().map(|s| list_one(&ui, s))).await;
    let now = now();
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (scheduler, result) in ui.schedulers.iter().zip(listed) {
        match result {
            Ok(apps) => rows.extend(
                apps.iter()
                    // A pipeline with steps on two schedulers is listed by both.
                    .filter(|a| seen.insert(a.app_handle.clone()))
                    .map(|a| (a.start_time, row(scheduler, a, now))),
            ),
            Err(e) => errors.push(json!({"scheduler": scheduler, "error": e.to_string()})),
        }
    }
    rows.sort_by(|a, b| b.0.unwrap_or(0.0).total_cmp(&a.0.unwrap_or(0.0)));
    let apps: Vec<Value> = rows.into_iter().map(|(_, r)| r).collect();
    Json(json!({"apps": apps, "errors": errors, "now": now}))
}

#[derive(serde::Deserialize)]
pub struct Detail {
    /// Also the AppDef, the native request and the commands to run it again (the page asks
    /// once, then polls without).
    #[serde(default)]
    full: bool,
}

/// `GET /api/apps/<handle>`: an app's status with its replicas' attempts; a group's tasks; a
/// pipeline's steps.
pub async fn app(
    State(ui): State<Arc<Ui>>,
    Path(handle): Path<String>,
    Query(detail): Query<Detail>,
) -> ApiResult {
    let named = ui.runner.named(&handle).await?;
    if let Named::Pipeline(record) = &named {
        return Ok(Json(pipeline_detail(&ui, record).await?));
    }
    if let Named::Group(record) = named {
        let states = ui.runner.group_states(&record).await?;
        let mut v = group::status_json(&record, &states);
        v["kind"] = json!("group");
        v["handle"] = json!(record.handle());
        v["name"] = json!(record.name);
        v["rerun"] = json!([format!("torchx rerun {} --failed", record.handle())]);
        return Ok(Json(v));
    }
    let status = ui.runner.status(&handle).await?.ok_or_else(|| {
        Error::not_found("app", handle.as_str(), ": the scheduler does not know it")
    })?;
    let mut v = json!({
        "kind": "app",
        "handle": handle,
        "scheduler": torchx::specs::parse_app_handle(&handle)?.scheduler(),
        "state": status.state.as_str(),
        "terminal": status.state.is_terminal(),
        "msg": status.msg,
        "num_restarts": status.num_restarts,
        "structured_error_msg": status.structured_error_msg,
        "ui_url": status.ui_url,
        "roles": serde_json::to_value(&status.roles).unwrap_or_default(),
    });
    // What the watchdog captured, once an attempt hung.
    let hung = v["roles"].as_array().into_iter().flatten().any(|role| {
        role["replicas"].as_array().into_iter().flatten().any(|r| {
            r["attempts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a["reason"] == "hung")
        })
    });
    if hung {
        v["stacks"] = json!(ui.runner.hang_stacks(&handle, None).await?);
    }
    if detail.full {
        if let Some(app) = ui.runner.describe(&handle).await? {
            v["name"] = json!(app.name);
            v["appdef"] = json!(app.to_yaml());
            v["native"] = native_request(&ui, &handle, app).await;
            v["rerun"] = json!([
                format!("torchx describe {handle} > app.yaml"),
                format!(
                    "torchx run -s {} ./app.yaml",
                    v["scheduler"].as_str().unwrap_or("")
                ),
            ]);
        }
    }
    Ok(Json(v))
}

/// What the scheduler would be asked to run this AppDef again, with its configured options
/// (schedulers do not keep the request they were sent): its text, or why there is none.
async fn native_request(ui: &Ui, handle: &str, app: torchx::specs::AppDef) -> Value {
    let Ok(h) = torchx::specs::parse_app_handle(handle) else {
        return Value::Null;
    };
    let dry = async {
        let (cfg, _) = ui.runner.cfg_from_str(h.scheduler(), "").await?;
        let args = torchx::runner::RunArgs::default();
        ui.runner.dryrun(app, h.scheduler(), &cfg, &args).await
    };
    match tokio::time::timeout(Duration::from_secs(10), dry).await {
        Ok(Ok(info)) => json!({"text": info.to_string()}),
        Ok(Err(e)) => json!({"error": e.to_string()}),
        Err(_) => json!({"error": "the dry run did not finish within 10s"}),
    }
}

async fn pipeline_detail(ui: &Ui, record: &PipelineRecord) -> torchx::Result<Value> {
    let steps = ui.runner.pipeline_steps(record).await?;
    let state_dir = torchx::schedulers::default_state_dir();
    let cancelled = record.cancel_requested(&state_dir);
    let state: AppState = pipeline_state(record, &steps, cancelled);
    let handle = record.handle();
    let mut v = pipeline::status_json(&handle, record, state, &steps);
    v["kind"] = json!("pipeline");
    v["handle"] = json!(handle);
    v["rerun"] = json!([format!("torchx rerun {handle} --failed")]);
    Ok(v)
}

#[derive(serde::Deserialize)]
pub struct Target {
    handle: String,
}

/// `POST /api/cancel`.
pub async fn cancel(State(ui): State<Arc<Ui>>, Json(t): Json<Target>) -> ApiResult {
    ui.runner.cancel(&t.handle).await?;
    Ok(Json(json!({"ok": true, "handle": t.handle})))
}

/// `POST /api/delete`.
pub async fn delete(State(ui): State<Arc<Ui>>, Json(t): Json<Target>) -> ApiResult {
    ui.runner.delete(&t.handle).await?;
    Ok(Json(json!({"ok": true, "handle": t.handle})))
}

/// `POST /api/rerun`: `torchx rerun <group or pipeline> --failed`, as the command does it
/// (this binary, in the background of the server): the new handle.
pub async fn rerun(Json(t): Json<Target>) -> ApiResult {
    if kind_of(&t.handle) == "app" {
        return Err(Error::arg(format!(
            "`{}` is not a group or pipeline: only those can rerun their failed part",
            t.handle
        ))
        .into());
    }
    let handle = t.handle.clone();
    let output = blocking(move || {
        let exe =
            std::env::current_exe().map_err(|e| Error::io("finding this torchx binary", e))?;
        std::process::Command::new(exe)
            .args(["rerun", &handle, "--failed", "--json"])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::io("running torchx rerun", e))
    })
    .await?;
    if !output.status.success() {
        let why = String::from_utf8_lossy(&output.stderr);
        return Err(Error::backend("rerun", why.trim().to_string()).into());
    }
    let printed: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&output.stdout).trim()));
    Ok(Json(
        json!({"ok": true, "handle": t.handle, "rerun": printed}),
    ))
}
