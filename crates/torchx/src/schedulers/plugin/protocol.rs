//! The wire format of protocol version 1 (docs/scheduler-plugins.md is its reference): request
//! objects, the messages a plugin answers with, and their mapping to torchx types. Pure: no I/O.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorKind, Subject};
use crate::opts::{CfgValue, OptSpec, OptType, RunOpts};
use crate::scheduler::{Capabilities, WorkspaceSupport};
use crate::specs::{AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus};

/// The protocol version this torchx speaks.
pub(super) const VERSION: u64 = 1;

/// The request for `op`: `body`'s fields plus `protocol` and `op`.
pub(super) fn request(op: &str, body: Value) -> Value {
    let mut obj = match body {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    obj.insert("protocol".into(), json!(VERSION));
    obj.insert("op".into(), json!(op));
    Value::Object(obj)
}

/// One message of a plugin's answer (one JSON object per stdout line).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Message {
    /// `log_lines` only: the app is known and lines follow.
    Streaming,
    /// `log_lines` only: a log line, without its newline.
    Line(String),
    /// The final answer: the operation's result.
    Ok(Value),
    /// The final answer: the operation failed.
    Error {
        /// One of [`ErrorKind`]'s names (`not_found`, `backend`, ...).
        kind: String,
        /// What went wrong, for the user.
        message: String,
    },
}

/// Parses one stdout line. `Err` says what is wrong with it (for an error naming the plugin).
pub(super) fn parse_message(line: &str) -> Result<Message, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| {
        format!(
            "sent a line that is not JSON ({e}): `{}`",
            crate::text::truncate(line, 200)
        )
    })?;
    let Value::Object(obj) = v else {
        return Err(format!(
            "sent JSON that is not an object: `{}`",
            crate::text::truncate(line, 200)
        ));
    };
    match obj.get("protocol").and_then(Value::as_u64) {
        Some(VERSION) => {}
        Some(other) => {
            return Err(format!(
                "speaks protocol version {other}, but this torchx speaks version {VERSION}"
            ))
        }
        None => {
            return Err(format!(
                "sent a message without `\"protocol\": {VERSION}`: `{}`",
                crate::text::truncate(line, 200)
            ))
        }
    }
    if let Some(l) = obj.get("line") {
        return match l {
            Value::String(s) => Ok(Message::Line(s.clone())),
            _ => Err("sent a `line` that is not a string".into()),
        };
    }
    if obj.get("streaming") == Some(&Value::Bool(true)) {
        return Ok(Message::Streaming);
    }
    if let Some(e) = obj.get("error") {
        let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        return Ok(Message::Error {
            kind: field("kind"),
            message: field("message"),
        });
    }
    match obj.get("ok") {
        Some(v) => Ok(Message::Ok(v.clone())),
        None => Err("sent a message with none of `ok`, `error`, `streaming` or `line`".into()),
    }
}

/// The torchx error for a plugin's `error` answer. `app_id` is the app the operation was about.
pub(super) fn to_error(
    scheduler: &str,
    app_id: Option<&str>,
    kind: &str,
    message: String,
) -> Error {
    match (ErrorKind::from_name(kind), app_id) {
        (Some(ErrorKind::NotFound), Some(id)) => Error::app_not_found(id, format!(": {message}")),
        // Outside an app's operations: the host found no scheduler by that name.
        (Some(ErrorKind::NotFound), None) => {
            Error::not_found("scheduler", scheduler, format!(": {message}"))
                .about(Subject::Scheduler)
        }
        (Some(ErrorKind::Unsupported), _) => Error::unsupported(scheduler, message),
        // The caller's mistakes: named after the scheduler that found them.
        (
            Some(
                kind @ (ErrorKind::InvalidArgument
                | ErrorKind::InvalidSpec
                | ErrorKind::InvalidConfig
                | ErrorKind::Timeout),
            ),
            _,
        ) => Error::arg(format!("{scheduler}: {message}")).with_kind(kind),
        // The backend's: already exists, permission denied, unavailable, failed.
        (kind, _) => {
            Error::backend(scheduler, message).with_kind(kind.unwrap_or(ErrorKind::Backend))
        }
    }
}

/// What a plugin says about itself in answer to `info`.
#[derive(Debug, Clone)]
pub(super) struct Info {
    /// One line for listings.
    pub description: String,
    /// What it supports.
    pub capabilities: Capabilities,
    /// Its run options.
    pub run_opts: RunOpts,
}

fn bad(what: impl std::fmt::Display) -> String {
    format!("answered `info` with {what}")
}

/// Reads the `info` answer.
pub(super) fn parse_info(v: &Value) -> Result<Info, String> {
    let description = v
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("a scheduler plugin")
        .to_string();
    let caps = v.get("capabilities").cloned().unwrap_or(json!({}));
    let flag = |k: &str| caps.get(k).and_then(Value::as_bool).unwrap_or(false);
    let capabilities = Capabilities {
        describe_replicas: flag("describe_replicas"),
        list: flag("list"),
        cancel: flag("cancel"),
        delete: flag("delete"),
        logs: flag("logs"),
        log_streams: flag("log_streams"),
        log_since_until: flag("log_since_until"),
        log_tail: flag("log_tail"),
        mounts: flag("mounts"),
        retries: flag("retries"),
        multi_role: flag("multi_role"),
        recovery: flag("recovery"),
        runs_locally: flag("runs_locally"),
        // Workspaces need image builds torchx does and plugins cannot see: not offered.
        workspace: WorkspaceSupport::None,
        // The protocol's dry run carries no dependencies: a plugin cannot hold a job back.
        dependencies: false,
        // Nor watch its replicas for progress.
        hang_watch: false,
    };
    let mut opts = Vec::new();
    for o in v
        .get("run_opts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad(format!("a run option without a name: {o}")))?;
        let ty = match o.get("type").and_then(Value::as_str).unwrap_or("str") {
            "str" => OptType::Str,
            "int" => OptType::Int,
            "float" => OptType::Float,
            "bool" => OptType::Bool,
            "list" => OptType::List,
            "dict" => OptType::Dict,
            t => {
                return Err(bad(format!(
                    "run option `{name}` of unknown type `{t}` (str, int, float, bool, list, dict)"
                )))
            }
        };
        let default = match o.get("default") {
            None | Some(Value::Null) => None,
            Some(d) => Some(
                serde_json::from_value::<CfgValue>(d.clone())
                    .ok()
                    .and_then(|d| ty.check(name, d).ok())
                    .ok_or_else(|| {
                        bad(format!(
                            "run option `{name}` whose default {d} is not a {ty:?}"
                        ))
                    })?,
            ),
        };
        // Schemas are built once per plugin per process; their names live as long.
        let name: &'static str = name.to_string().leak();
        opts.push(OptSpec::new(
            name,
            ty,
            o.get("required").and_then(Value::as_bool).unwrap_or(false),
            default,
            o.get("help")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ));
    }
    Ok(Info {
        description,
        capabilities,
        run_opts: RunOpts::new(opts),
    })
}

fn state(v: &Value, what: &str) -> Result<AppState, String> {
    let s = v.get("state").and_then(Value::as_str).unwrap_or("");
    AppState::ALL
        .into_iter()
        .find(|st| st.to_string() == s)
        .ok_or_else(|| format!("answered with an unknown {what} state `{s}`"))
}

fn str_field(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// Reads the `describe` answer (`null` = unknown app).
pub(super) fn parse_describe(
    app_id: &str,
    v: &Value,
) -> Result<Option<DescribeAppResponse>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let mut d = DescribeAppResponse::new(app_id, state(v, "app")?);
    d.msg = str_field(v, "msg");
    d.num_restarts = v.get("num_restarts").and_then(Value::as_i64).unwrap_or(0);
    d.ui_url = v.get("ui_url").and_then(Value::as_str).map(String::from);
    if let Some(e) = v.get("structured_error_msg").and_then(Value::as_str) {
        d.structured_error_msg = e.to_string();
    }
    if let Some(m) = v.get("metadata").and_then(Value::as_object) {
        d.metadata = m
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), String::from),
                )
            })
            .collect::<BTreeMap<_, _>>();
    }
    for role in v
        .get("roles")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let name = str_field(role, "role");
        for r in role
            .get("replicas")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let id = r.get("id").and_then(Value::as_u64).unwrap_or(0) as u32;
            let mut rs =
                ReplicaStatus::new(id, state(r, "replica")?, &name, str_field(r, "hostname"));
            if let Some(e) = r.get("structured_error_msg").and_then(Value::as_str) {
                rs.structured_error_msg = e.to_string();
            }
            d.add_replica(rs);
        }
    }
    d.roles_from_statuses();
    Ok(Some(d))
}

/// Reads the `list` answer.
pub(super) fn parse_list(v: &Value) -> Result<Vec<ListAppResponse>, String> {
    let Some(items) = v.as_array() else {
        return Err("answered `list` with something other than an array".into());
    };
    items
        .iter()
        .map(|a| {
            let app_id = str_field(a, "app_id");
            if app_id.is_empty() {
                return Err(format!("listed an app without an `app_id`: {a}"));
            }
            Ok(ListAppResponse {
                state: state(a, "app")?,
                name: str_field(a, "name"),
                app_handle: String::new(),
                start_time: a.get("start_time").and_then(Value::as_f64),
                end_time: a.get("end_time").and_then(Value::as_f64),
                app_id,
                other_state_dir: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn messages_need_the_protocol_version() {
        assert_eq!(
            parse_message(r#"{"protocol":1,"ok":{"app_id":"a"}}"#),
            Ok(Message::Ok(json!({"app_id": "a"})))
        );
        assert_eq!(
            parse_message(r#"{"protocol":1,"line":"hi"}"#),
            Ok(Message::Line("hi".into()))
        );
        let e = parse_message(r#"{"protocol":2,"ok":null}"#).unwrap_err();
        assert!(
            e.contains("protocol version 2") && e.contains("version 1"),
            "{e}"
        );
        let e = parse_message(r#"{"ok":null}"#).unwrap_err();
        assert!(e.contains("without"), "{e}");
        let e = parse_message("Traceback (most recent call last):").unwrap_err();
        assert!(e.contains("not JSON") && e.contains("Traceback"), "{e}");
        let e = parse_message(r#"[1]"#).unwrap_err();
        assert!(e.contains("not an object"), "{e}");
    }

    #[test]
    fn error_kinds_map_to_torchx_errors() {
        let e = to_error("p", Some("a-1"), "not_found", "gone".into());
        assert!(e.is_not_found(Subject::App), "{e:?}");
        assert_eq!(
            to_error("p", None, "unsupported", "x".into()).kind(),
            ErrorKind::Unsupported
        );
        assert_eq!(
            to_error("p", None, "invalid_config", "x".into()).kind(),
            ErrorKind::InvalidConfig
        );
        assert_eq!(
            to_error("p", None, "weird", "x".into()).kind(),
            ErrorKind::Backend
        );
        assert_eq!(
            to_error("p", None, "unavailable", "x".into()).kind(),
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn info_builds_a_run_option_schema() {
        let info = parse_info(&json!({
            "description": "d",
            "capabilities": {"list": true, "logs": true, "future_flag": true},
            "run_opts": [
                {"name": "root", "type": "str", "help": "where"},
                {"name": "n", "type": "int", "default": 3, "required": false},
            ]
        }))
        .unwrap();
        assert!(info.capabilities.list && info.capabilities.logs && !info.capabilities.cancel);
        let cfg = info.run_opts.parse_cli("root=/x").unwrap();
        let resolved = info.run_opts.resolve(&cfg).unwrap();
        assert_eq!(resolved["n"], CfgValue::Int(3));
        let e = parse_info(&json!({"run_opts": [{"name": "n", "type": "int", "default": "x"}]}))
            .unwrap_err();
        assert!(e.contains("`n`"), "{e}");
        let e = parse_info(&json!({"run_opts": [{"name": "n", "type": "tuple"}]})).unwrap_err();
        assert!(e.contains("tuple"), "{e}");
    }

    #[test]
    fn describe_answers_become_responses() {
        assert_eq!(parse_describe("a", &Value::Null), Ok(None));
        let d = parse_describe(
            "a",
            &json!({"state": "RUNNING", "roles": [{"role": "main", "replicas": [
                {"id": 0, "state": "SUCCEEDED", "hostname": "h"},
                {"id": 1, "state": "RUNNING", "hostname": "h"}]}]}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.state, AppState::Running);
        assert_eq!(d.roles[0].num_replicas, 2);
        let e = parse_describe("a", &json!({"state": "DONE"})).unwrap_err();
        assert!(e.contains("DONE"), "{e}");
    }
}
