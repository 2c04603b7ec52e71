//! Schedulers in other programs: an executable `torchx-scheduler-<name>` on PATH is scheduler
//! `<name>`, spoken to through a small versioned JSON-over-stdio protocol, one process per
//! operation (a Python scheduler's host instead serves every operation from one process,
//! forked by a warm host where it can) (docs/scheduler-plugins.md is the reference;
//! `protocol.rs` the wire format, `process.rs` the I/O, `warm.rs` warm hosts). Builtin
//! schedulers always win over a plugin of the same name.
//!
//! `submit_dryrun` runs the plugin's `dryrun` operation, which the protocol requires to be pure
//! and deterministic like every builtin's.

mod process;
mod protocol;
mod warm;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::error::{Error, Result, Subject};
use crate::opts::{Cfg, RunOpts};
use crate::scheduler::{
    downcast_request, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery, NativeRequest,
    Scheduler,
};
use crate::specs::{AppDef, DescribeAppResponse, ListAppResponse, Stream};
use process::{Call, Program};
use protocol::{Info, Message};

/// Scheduler plugin programs are named `torchx-scheduler-<name>`.
pub(crate) const PREFIX: &str = "torchx-scheduler-";

/// The plugin program for scheduler `name` on PATH.
pub(crate) fn find(name: &str) -> Option<PathBuf> {
    crate::plugins::find(PREFIX, name)
}

/// Every scheduler plugin on PATH, sorted by name.
pub(crate) fn all() -> Vec<(String, PathBuf)> {
    crate::plugins::all(PREFIX, |_| true, &super::default_state_dir())
}

/// A scheduler served by a plugin program.
#[derive(Debug)]
pub struct PluginScheduler {
    program: Program,
    info: Info,
}

/// The native request a plugin rendered in its dry run.
#[derive(Debug)]
pub(crate) struct PluginRequest {
    /// What the plugin will get back in `schedule`.
    pub request: Value,
    /// What `torchx run --dryrun` prints.
    pub rendered: String,
}

impl NativeRequest for PluginRequest {
    fn render(&self) -> String {
        self.rendered.clone()
    }
    fn to_json(&self) -> Value {
        self.request.clone()
    }
}

impl PluginScheduler {
    /// Starts `path` once to learn its description, capabilities and run options (a broken
    /// plugin fails here, with an error naming it).
    pub fn connect(name: &str, path: &Path) -> Result<PluginScheduler> {
        Self::connected(Program::new(name, path)?)
    }

    /// [`connect`](Self::connect) to a Python scheduler hosted by interpreter `python`
    /// (`torchx.cli._scheduler_host` with `plugin`'s arguments: `<name> [<module:attr>]`),
    /// whose one host serves every operation of this scheduler.
    pub fn connect_python(
        name: &str,
        python: &Path,
        plugin: Vec<String>,
    ) -> Result<PluginScheduler> {
        Self::connected(Program::new(name, python)?.python_host(plugin)?)
    }

    fn connected(program: Program) -> Result<PluginScheduler> {
        let name = program.scheduler.clone();
        let v = program.call("info", json!({ "scheduler": name }), None)?;
        let info = protocol::parse_info(&v).map_err(|w| program.fail("info", w))?;
        Ok(PluginScheduler { program, info })
    }

    /// What the plugin says it is.
    pub fn description(&self) -> &str {
        &self.info.description
    }

    /// The plugin program.
    pub fn path(&self) -> &Path {
        &self.program.path
    }

    /// Runs `op` off the async executor (plugins may take their time).
    async fn call(&self, op: &'static str, body: Value, app_id: Option<&str>) -> Result<Value> {
        let program = self.program.clone();
        let app_id = app_id.map(String::from);
        tokio::task::spawn_blocking(move || program.call(op, body, app_id.as_deref()))
            .await
            .map_err(|e| self.program.fail(op, e))?
    }
}

fn unix_seconds(t: Option<std::time::SystemTime>) -> Value {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(Value::Null, |d| json!(d.as_secs_f64()))
}

#[async_trait]
impl Scheduler for PluginScheduler {
    fn name(&self) -> &str {
        &self.program.scheduler
    }

    fn capabilities(&self) -> Capabilities {
        self.info.capabilities
    }

    fn run_opts(&self) -> RunOpts {
        self.info.run_opts.clone()
    }

    fn dryrun_is_a_round_trip(&self) -> bool {
        true
    }

    fn submit_dryrun(
        &self,
        app: &AppDef,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<Box<dyn NativeRequest>> {
        crate::scheduler::check_recovery(self.name(), self.capabilities(), app)?;
        crate::scheduler::check_hang_watch(self.name(), self.capabilities(), app)?;
        crate::scheduler::check_after(self.name(), self.capabilities(), ctx)?;
        let body = json!({
            "app": app,
            "cfg": cfg,
            "context": {
                "session_name": ctx.session_name,
                "unique": ctx.unique,
                "cwd": ctx.cwd,
            },
        });
        let v = self.program.call("dryrun", body, None)?;
        let request = v
            .get("request")
            .cloned()
            .ok_or_else(|| self.program.fail("dryrun", "answered without a `request`"))?;
        let rendered = match v.get("rendered").and_then(Value::as_str) {
            Some(r) => r.to_string(),
            None => serde_json::to_string_pretty(&request).unwrap_or_default(),
        };
        Ok(Box::new(PluginRequest { request, rendered }))
    }

    async fn schedule(&self, info: &DryRunInfo) -> Result<String> {
        let request = downcast_request::<PluginRequest>(info, self.name())?;
        let body = json!({ "app": info.app, "cfg": info.cfg, "request": request.request });
        let v = self.call("schedule", body, None).await?;
        match v.get("app_id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() && !id.contains('/') => Ok(id.to_string()),
            _ => Err(self.program.fail(
                "schedule",
                format!("answered without a usable `app_id` (non-empty, no `/`): {v}"),
            )),
        }
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let v = self
            .call("describe", json!({ "app_id": app_id }), Some(app_id))
            .await;
        let v = match v {
            Err(e) if e.is_not_found(Subject::App) => return Ok(None),
            other => other?,
        };
        protocol::parse_describe(app_id, &v).map_err(|w| self.program.fail("describe", w))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        if !self.info.capabilities.list {
            return Err(Error::unsupported(self.name(), "list"));
        }
        let v = self.call("list", json!({}), None).await?;
        protocol::parse_list(&v).map_err(|w| self.program.fail("list", w))
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        if !self.info.capabilities.cancel {
            return Err(Error::unsupported(self.name(), "cancel"));
        }
        self.call("cancel", json!({ "app_id": app_id }), Some(app_id))
            .await
            .map(drop)
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        if !self.info.capabilities.delete {
            return Err(Error::unsupported(self.name(), "delete"));
        }
        self.call("delete", json!({ "app_id": app_id }), Some(app_id))
            .await
            .map(drop)
    }

    async fn log_iter(
        &self,
        app_id: &str,
        role: &str,
        k: u32,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        if !self.info.capabilities.logs {
            return Err(Error::unsupported(self.name(), "logs"));
        }
        let streams = query.streams.map(|s| match s {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Combined => "combined",
        });
        let body = json!({
            "app_id": app_id, "role": role, "k": k, "streams": streams,
            "since": unix_seconds(query.since), "until": unix_seconds(query.until),
            "should_tail": query.should_tail,
            "regex": query.regex.as_ref().map(regex::Regex::as_str),
        });
        let program = self.program.clone();
        let call = tokio::task::spawn_blocking(move || program.start("log_lines", body))
            .await
            .map_err(|e| self.program.fail("log_lines", e))??;
        // The opening message tells an unknown app (an error) from one without output yet.
        let call = tokio::task::spawn_blocking({
            let (timeout, app_id) = (self.program.timeout, app_id.to_string());
            move || {
                let mut call = call;
                match call.next(Some(timeout), Some(&app_id))? {
                    Some(Message::Streaming) => Ok(call),
                    other => Err(call.protocol_error(format!(
                        "answered `log_lines` with {other:?} before `{{\"streaming\": true}}`"
                    ))),
                }
            }
        })
        .await
        .map_err(|e| self.program.fail("log_lines", e))??;
        Ok(Box::new(PluginLogLines {
            call: Arc::new(Mutex::new(call)),
            app_id: app_id.to_string(),
            // A follower may wait as long as the app runs; a plain read has the usual deadline.
            timeout: (!query.should_tail).then_some(self.program.timeout),
        }))
    }
}

struct PluginLogLines {
    call: Arc<Mutex<Call>>,
    app_id: String,
    timeout: Option<std::time::Duration>,
}

#[async_trait]
impl LogLines for PluginLogLines {
    async fn next_line(&mut self) -> Result<Option<String>> {
        let call = Arc::clone(&self.call);
        let (timeout, app_id) = (self.timeout, self.app_id.clone());
        let message = tokio::task::spawn_blocking(move || match call.lock() {
            Ok(mut c) => c.next(timeout, Some(&app_id)),
            Err(_) => Ok(None),
        })
        .await
        .map_err(|e| Error::backend("plugin", e.to_string()).with_source(e))??;
        Ok(match message {
            Some(Message::Line(l)) => Some(l),
            _ => None,
        })
    }
}
