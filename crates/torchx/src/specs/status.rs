//! Application and replica states, and the `torchx status` text and JSON formats.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::time::{format_time, local_time_zone};
use super::{Role, NONE};
use crate::error::{Error, Result};

/// The state of an app or of one replica. The integer values are TorchX's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum AppState {
    /// Not submitted yet.
    Unsubmitted = 0,
    /// Accepted by the scheduler.
    Submitted = 1,
    /// Waiting for resources.
    Pending = 2,
    /// Running.
    Running = 3,
    /// Finished successfully.
    Succeeded = 4,
    /// Finished with an error.
    Failed = 5,
    /// Stopped by a user.
    Cancelled = 6,
    /// The scheduler reported something we cannot map.
    Unknown = 7,
}

impl AppState {
    /// All states in TorchX order.
    pub const ALL: [AppState; 8] = [
        AppState::Unsubmitted,
        AppState::Submitted,
        AppState::Pending,
        AppState::Running,
        AppState::Succeeded,
        AppState::Failed,
        AppState::Cancelled,
        AppState::Unknown,
    ];

    /// SUCCEEDED, FAILED or CANCELLED.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            AppState::Succeeded | AppState::Failed | AppState::Cancelled
        )
    }

    /// Terminal or RUNNING.
    pub fn is_started(self) -> bool {
        self.is_terminal() || self == AppState::Running
    }

    /// The upper-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::Unsubmitted => "UNSUBMITTED",
            AppState::Submitted => "SUBMITTED",
            AppState::Pending => "PENDING",
            AppState::Running => "RUNNING",
            AppState::Succeeded => "SUCCEEDED",
            AppState::Failed => "FAILED",
            AppState::Cancelled => "CANCELLED",
            AppState::Unknown => "UNKNOWN",
        }
    }

    /// TorchX's `repr`: `"RUNNING (3)"`.
    pub fn repr(self) -> String {
        format!("{} ({})", self.as_str(), self as i32)
    }
}

/// Why one attempt of a replica (or of a whole job) ended: what `torchx status` shows per attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// It exited with code 0.
    Succeeded,
    /// It failed: spends the retry budget.
    Failed,
    /// It outlived its time limit without asking to be requeued: a failure.
    Timeout,
    /// It was killed for using too much memory (the engine says so): a failure, even under
    /// the recovery contract.
    Oom,
    /// It exited with the requeue code: started again without spending the retry budget.
    Requeued,
    /// The scheduler preempted or evicted it: started again without spending the budget.
    Preempted,
    /// Its node failed: started again without spending the budget.
    NodeFailure,
    /// A user (or a restart of its peers) stopped it.
    Cancelled,
    /// It made no progress for its role's `hang_timeout`: its stacks were captured and it was
    /// stopped. Requeued under the recovery contract, else a failure.
    Hung,
}

impl EndReason {
    /// Every reason, in declaration order.
    pub const ALL: [EndReason; 9] = [
        EndReason::Succeeded,
        EndReason::Failed,
        EndReason::Timeout,
        EndReason::Oom,
        EndReason::Requeued,
        EndReason::Preempted,
        EndReason::NodeFailure,
        EndReason::Cancelled,
        EndReason::Hung,
    ];

    /// The snake_case name used in `status --json` and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Succeeded => "succeeded",
            EndReason::Failed => "failed",
            EndReason::Timeout => "timeout",
            EndReason::Oom => "oom",
            EndReason::Requeued => "requeued",
            EndReason::Preempted => "preempted",
            EndReason::NodeFailure => "node_failure",
            EndReason::Cancelled => "cancelled",
            EndReason::Hung => "hung",
        }
    }

    /// Whether the attempt is started again without spending the retry budget.
    pub fn is_requeue(self) -> bool {
        matches!(
            self,
            EndReason::Requeued | EndReason::Preempted | EndReason::NodeFailure
        )
    }
}

impl std::str::FromStr for EndReason {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        EndReason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown end reason `{s}`"))
    }
}

impl fmt::Display for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AppState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        AppState::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = AppState::ALL.iter().map(|s| s.as_str()).collect();
                Error::arg(format!(
                    "invalid state `{s}`, must be one of: {}",
                    names.join(", ")
                ))
            })
    }
}

/// The log streams of a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// Both, interleaved.
    Combined,
}

impl Stream {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Combined => "combined",
        }
    }
}

impl std::str::FromStr for Stream {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "stdout" => Ok(Stream::Stdout),
            "stderr" => Ok(Stream::Stderr),
            "combined" => Ok(Stream::Combined),
            _ => Err(Error::arg(format!(
                "invalid stream `{s}`, must be one of: stdout, stderr, combined"
            ))),
        }
    }
}

/// One attempt of a replica: a start of its process (or container), and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// 0 first, then +1 per restart (after a failure or a requeue).
    pub attempt: u32,
    /// When it started (seconds since the epoch).
    pub started: Option<f64>,
    /// When it ended; `None` while it runs.
    pub ended: Option<f64>,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// Why it ended; `None` while it runs (or where the scheduler cannot tell).
    pub reason: Option<EndReason>,
}

/// The status of one replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaStatus {
    /// The replica index within its role.
    pub id: u32,
    /// Its state.
    pub state: AppState,
    /// Its role's name.
    pub role: String,
    /// Where it runs.
    pub hostname: String,
    /// A torchelastic error JSON, or `<NONE>`.
    pub structured_error_msg: String,
    /// Its attempts, oldest first, where the scheduler records them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
}

impl ReplicaStatus {
    /// A replica status without an error message.
    pub fn new(
        id: u32,
        state: AppState,
        role: impl Into<String>,
        hostname: impl Into<String>,
    ) -> Self {
        ReplicaStatus {
            id,
            state,
            role: role.into(),
            hostname: hostname.into(),
            structured_error_msg: NONE.into(),
            attempts: Vec::new(),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "state": self.state as i32,
            "role": self.role,
            "hostname": self.hostname,
            "structured_error_msg": self.structured_error_msg,
            // 0.8's address to reach the replica at; no scheduler here knows one apart from
            // the hostname.
            "hostaddr": self.hostname,
        });
        if !self.attempts.is_empty() {
            v["attempts"] = serde_json::to_value(&self.attempts).unwrap_or_default();
        }
        v
    }

    /// `    attempt 1: requeued (exit code 75) after 3s` lines, when there is more to say than one
    /// attempt that is running or succeeded.
    fn format_attempts(&self) -> String {
        let plain = self.attempts.len() == 1
            && matches!(self.attempts[0].reason, None | Some(EndReason::Succeeded));
        if self.attempts.is_empty() || plain {
            return String::new();
        }
        let mut out = String::new();
        for a in &self.attempts {
            let how = match (a.exit_code, a.signal) {
                (Some(c), _) => format!(" (exit code {c})"),
                (None, Some(s)) => format!(" (signal {s})"),
                (None, None) => String::new(),
            };
            let took = match (a.started, a.ended) {
                (Some(s), Some(e)) if e >= s => {
                    format!(" after {}", super::format_duration((e - s).round() as u64))
                }
                _ => String::new(),
            };
            let reason = a.reason.map_or("running", EndReason::as_str);
            out.push_str(&format!("\n    attempt {}: {reason}{how}{took}", a.attempt));
        }
        out
    }
}

/// The statuses of one role's replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleStatus {
    /// The role's name.
    pub role: String,
    /// Its replicas.
    pub replicas: Vec<ReplicaStatus>,
}

impl RoleStatus {
    /// TorchX's `RoleStatus.to_json()` (replica states as integers).
    pub fn to_json(&self) -> Value {
        json!({"role": self.role, "replicas": self.replicas.iter().map(ReplicaStatus::to_json).collect::<Vec<_>>()})
    }
}

/// The status of an app as `torchx status` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppStatus {
    /// The app's state.
    pub state: AppState,
    /// How many times the app (or its replicas) were restarted.
    pub num_restarts: i64,
    /// A scheduler message.
    pub msg: String,
    /// A torchelastic error JSON, or `<NONE>`.
    pub structured_error_msg: String,
    /// A URL to look at the app, if any.
    pub ui_url: Option<String>,
    /// Per-role replica statuses.
    pub roles: Vec<RoleStatus>,
}

impl AppStatus {
    /// A status with only a state.
    pub fn new(state: AppState) -> AppStatus {
        AppStatus {
            state,
            num_restarts: 0,
            msg: String::new(),
            structured_error_msg: NONE.into(),
            ui_url: None,
            roles: Vec::new(),
        }
    }

    /// True when the state is terminal.
    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }

    /// `Ok(())` when SUCCEEDED; otherwise an error saying the job did not succeed.
    pub fn raise_for_status(&self) -> std::result::Result<(), AppStatusError> {
        if self.state == AppState::Succeeded {
            Ok(())
        } else {
            Err(AppStatusError {
                status: self.clone(),
            })
        }
    }

    fn filtered<'a>(
        &'a self,
        filter_roles: &'a [String],
    ) -> impl Iterator<Item = &'a RoleStatus> + 'a {
        self.roles
            .iter()
            .filter(move |r| filter_roles.is_empty() || filter_roles.contains(&r.role))
    }

    /// TorchX's `AppStatus.to_json()` (top-level state by name, replica states as integers).
    pub fn to_json(&self, filter_roles: &[String]) -> Value {
        json!({
            "state": self.state.as_str(),
            "num_restarts": self.num_restarts,
            "roles": self.filtered(filter_roles).map(RoleStatus::to_json).collect::<Vec<_>>(),
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "url": self.ui_url,
        })
    }

    /// `torchx status --json` as TorchX's nightly: [`to_json`](Self::to_json) with the app's
    /// `handle`, `app_id`, `scheduler` and `ui_url` (the same value as `url`, its new name).
    pub fn to_json_for(&self, handle: &str, filter_roles: &[String]) -> Value {
        let mut v = self.to_json(filter_roles);
        if let Value::Object(m) = &mut v {
            m.extend(handle_keys(handle));
            m.insert("ui_url".into(), json!(self.ui_url));
        }
        v
    }

    /// TorchX's `AppStatus.format()`, the text of `torchx status`; timestamps in the local
    /// time zone (`$TZ`, else the system's), as TorchX shows them.
    pub fn format(&self, filter_roles: &[String]) -> String {
        self.format_in(filter_roles, &local_time_zone())
    }

    /// [`AppStatus::format`] with timestamps in the time zone `tz`.
    pub fn format_in(&self, filter_roles: &[String], tz: &jiff::tz::TimeZone) -> String {
        let mut roles = String::new();
        for role in self.filtered(filter_roles) {
            let mut replicas: Vec<&ReplicaStatus> = role.replicas.iter().collect();
            replicas.sort_by_key(|r| r.id);
            for r in replicas {
                let marker = if r.id == 0 { '*' } else { ' ' };
                roles.push_str(&format!(
                    "\n {marker}{}[{}]:{}{}",
                    r.role,
                    r.id,
                    format_replica(r, tz),
                    r.format_attempts()
                ));
            }
        }
        format!(
            "AppStatus:\n    State: {}\n    Num Restarts: {}\n    Roles: {roles}\n    Msg: {}\n    Structured Error Msg: {}\n    UI URL: {}\n    ",
            self.state,
            self.num_restarts,
            self.msg,
            self.structured_error_msg,
            self.ui_url.as_deref().unwrap_or("None"),
        )
    }
}

fn format_replica(r: &ReplicaStatus, tz: &jiff::tz::TimeZone) -> String {
    if r.structured_error_msg == NONE {
        let mut data = r.state.to_string();
        if matches!(r.state, AppState::Cancelled | AppState::Failed) {
            data.push_str(" (no reply file)");
        }
        return data;
    }
    let Ok(err) = serde_json::from_str::<Value>(&r.structured_error_msg) else {
        return r.structured_error_msg.clone();
    };
    // Reply files come in two shapes (TorchX 0.8): torchelastic's error file nests the error,
    // `{"message": {"message", "errorCode", "extraInfo": {"timestamp"}}}`; a scheduler's is
    // flat, `{"message", "errorCode", "timestamp"}`. Anything else is the job's own text and
    // is shown as it is.
    let (message, timestamp, exitcode) = match &err["message"] {
        Value::Object(nested) => match nested.get("message").and_then(Value::as_str) {
            Some(m) => (
                m,
                &err["message"]["extraInfo"]["timestamp"],
                &err["message"]["errorCode"],
            ),
            None => return r.structured_error_msg.clone(),
        },
        Value::String(m) => (m.as_str(), &err["timestamp"], &err["errorCode"]),
        _ => return r.structured_error_msg.clone(),
    };
    let timestamp = match timestamp {
        Value::String(s) => s.trim().parse::<i64>().ok(),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        _ => None,
    };
    let exitcode = match exitcode {
        Value::Null | Value::Bool(false) => "<N/A>".to_string(),
        Value::Number(n) if n.as_f64() == Some(0.0) => "<N/A>".to_string(),
        Value::String(s) if s.is_empty() => "<N/A>".to_string(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let timestamp = timestamp.map_or_else(|| "<N/A>".to_string(), |t| format_time(t, tz));
    format!(
        "{} (exitcode: {exitcode})\n        timestamp: {timestamp}\n        hostname: {}\n    {}",
        r.state,
        r.hostname,
        wrap_error_message(message, "    error_msg: ", 80)
    )
}

/// TorchX's `_format_error_message`: keeps the interesting part of RPC and nested exceptions and
/// wraps at spaces after `width` characters (the regexes are TorchX's).
pub fn wrap_error_message(msg: &str, header: &str, width: usize) -> String {
    static RPC_ERROR: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\w*\('On WorkerInfo\(.+\):\n(.*\n)*'\)").expect("valid regex")
    });
    static EMBEDDED_ERROR: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?P<msg>.+)\nException.*").expect("valid regex")
    });
    let mut msg = msg;
    if let Some(m) = RPC_ERROR.find(msg) {
        msg = m.as_str();
    }
    if let Some(c) = EMBEDDED_ERROR.captures(msg) {
        msg = c.name("msg").map_or(msg, |m| m.as_str());
    }
    let chars: Vec<char> = msg.chars().collect();
    let mut lines = Vec::new();
    let mut header = header.to_string();
    let mut length = 0usize;
    for i in 0..=chars.len() {
        if i == chars.len() || (chars[i] == ' ' && length >= width) {
            let line: String = chars[i - length..i].iter().collect();
            lines.push(format!("{header}{line}"));
            header = " ".repeat(header.len());
            length = 0;
        }
        length += 1;
    }
    lines.join("\n")
}

/// Returned by [`AppStatus::raise_for_status`] when the app did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("job did not succeed: {}", status.state)]
pub struct AppStatusError {
    /// The status that was not SUCCEEDED.
    pub status: AppStatus,
}

/// What a scheduler knows about an app.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribeAppResponse {
    /// The scheduler's app id.
    pub app_id: String,
    /// The app's state.
    pub state: AppState,
    /// Restarts so far.
    pub num_restarts: i64,
    /// A scheduler message (e.g. why it failed).
    pub msg: String,
    /// A torchelastic error JSON, or `<NONE>`.
    pub structured_error_msg: String,
    /// A URL to look at the app.
    pub ui_url: Option<String>,
    /// Scheduler metadata.
    pub metadata: BTreeMap<String, String>,
    /// Per-role replica statuses.
    pub roles_statuses: Vec<RoleStatus>,
    /// The roles as the scheduler knows them.
    pub roles: Vec<Role>,
}

impl DescribeAppResponse {
    /// A response with the given id and state and nothing else.
    pub fn new(app_id: impl Into<String>, state: AppState) -> Self {
        DescribeAppResponse {
            app_id: app_id.into(),
            state,
            num_restarts: 0,
            msg: String::new(),
            structured_error_msg: NONE.into(),
            ui_url: None,
            metadata: BTreeMap::new(),
            roles_statuses: Vec::new(),
            roles: Vec::new(),
        }
    }

    /// Adds a replica's status under its role (creating the role's entry on first sight).
    pub fn add_replica(&mut self, status: ReplicaStatus) {
        match self
            .roles_statuses
            .iter_mut()
            .find(|r| r.role == status.role)
        {
            Some(rs) => rs.replicas.push(status),
            None => self.roles_statuses.push(RoleStatus {
                role: status.role.clone(),
                replicas: vec![status],
            }),
        }
    }

    /// Fills `roles` from `roles_statuses` (name and replica count only), for schedulers that
    /// know no more of the original AppDef.
    pub fn roles_from_statuses(&mut self) {
        self.roles = self
            .roles_statuses
            .iter()
            .map(|rs| {
                let mut role = Role::new(&rs.role, "");
                role.num_replicas = rs.replicas.len() as u32;
                role
            })
            .collect();
    }

    /// The [`AppStatus`] view of this response.
    pub fn to_status(&self) -> AppStatus {
        AppStatus {
            state: self.state,
            num_restarts: self.num_restarts,
            msg: self.msg.clone(),
            structured_error_msg: self.structured_error_msg.clone(),
            ui_url: self.ui_url.clone(),
            roles: self.roles_statuses.clone(),
        }
    }
}

/// One row of `torchx list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListAppResponse {
    /// The scheduler's app id.
    pub app_id: String,
    /// The app's state.
    pub state: AppState,
    /// The full handle (filled in by the runner).
    pub app_handle: String,
    /// The app's name, if known.
    pub name: String,
    /// Start time (unix seconds), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<f64>,
    /// End time (unix seconds), if known and finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
    /// Submitted from another state directory: local_docker's engine is shared, and `torchx
    /// list` shows only its own state directory's apps unless `--all`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other_state_dir: bool,
}

/// Sorts apps newest first (apps without a start time last).
pub fn sort_newest_first(apps: &mut [ListAppResponse]) {
    apps.sort_by(|a, b| {
        b.start_time
            .partial_cmp(&a.start_time)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}

/// The keys TorchX's nightly names an app by in its JSON: `handle`, and the `app_id` and
/// `scheduler` in it (a handle that does not parse gives only `handle`).
pub fn handle_keys(handle: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("handle".into(), json!(handle));
    if let Ok(h) = crate::specs::parse_app_handle(handle) {
        m.insert("app_id".into(), json!(h.app_id()));
        m.insert("scheduler".into(), json!(h.scheduler()));
    }
    m
}

/// `torchx run --json` as TorchX's nightly: the [`handle_keys`], and the app's `state` and
/// `ui_url` where the scheduler told them (`null` otherwise).
pub fn run_json(handle: &str, status: Option<&AppStatus>) -> Value {
    let mut m = handle_keys(handle);
    m.insert("state".into(), json!(status.map(|s| s.state.as_str())));
    m.insert(
        "ui_url".into(),
        json!(status.and_then(|s| s.ui_url.clone())),
    );
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_the_app_as_the_nightly() {
        let mut st = AppStatus::new(AppState::Running);
        st.ui_url = Some("http://ui".into());
        let v = st.to_json_for("slurm://s/123", &[]);
        assert_eq!(
            (
                &v["handle"],
                &v["app_id"],
                &v["scheduler"],
                &v["ui_url"],
                &v["url"]
            ),
            (
                &json!("slurm://s/123"),
                &json!("123"),
                &json!("slurm"),
                &json!("http://ui"),
                &json!("http://ui")
            )
        );
        assert_eq!(
            run_json("slurm://s/123", None),
            json!({"handle": "slurm://s/123", "app_id": "123", "scheduler": "slurm", "state": null, "ui_url": null})
        );
        assert_eq!(run_json("slurm://s/123", Some(&st))["state"], "RUNNING");
        assert_eq!(
            handle_keys("not a handle"),
            json!({"handle": "not a handle"})
                .as_object()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn replicas_are_grouped_by_role_and_roles_counted() {
        let mut r = DescribeAppResponse::new("a", AppState::Running);
        for (id, role) in [(0, "a"), (0, "b"), (1, "a")] {
            r.add_replica(ReplicaStatus::new(id, AppState::Running, role, "h"));
        }
        r.roles_from_statuses();
        let grouped: Vec<(&str, usize)> = r
            .roles_statuses
            .iter()
            .map(|rs| (rs.role.as_str(), rs.replicas.len()))
            .collect();
        assert_eq!(grouped, [("a", 2), ("b", 1)]);
        let counts: Vec<u32> = r.roles.iter().map(|r| r.num_replicas).collect();
        assert_eq!(counts, [2, 1]);
    }

    fn status() -> AppStatus {
        AppStatus {
            state: AppState::Running,
            num_restarts: 0,
            msg: "hi".into(),
            structured_error_msg: NONE.into(),
            ui_url: Some("http://x".into()),
            roles: vec![RoleStatus {
                role: "trainer".into(),
                replicas: vec![
                    ReplicaStatus::new(1, AppState::Failed, "trainer", "h1"),
                    ReplicaStatus::new(0, AppState::Running, "trainer", "h0"),
                ],
            }],
        }
    }

    #[test]
    fn format_matches_torchx() {
        let want = "AppStatus:\n    State: RUNNING\n    Num Restarts: 0\n    Roles: \n *trainer[0]:RUNNING\n  trainer[1]:FAILED (no reply file)\n    Msg: hi\n    Structured Error Msg: <NONE>\n    UI URL: http://x\n    ";
        assert_eq!(status().format(&[]), want);
        let filtered = status().format(&["other".to_string()]);
        assert!(filtered.contains("    Roles: \n    Msg"), "{filtered}");
    }

    #[test]
    fn format_torchelastic_error() {
        let mut s = status();
        s.roles[0].replicas[1].structured_error_msg = json!({
            "message": {"message": "RuntimeError: boom\nException raised", "extraInfo": {"timestamp": "1700000000"}, "errorCode": null}
        })
        .to_string();
        insta::assert_snapshot!(s.format_in(&[], &jiff::tz::TimeZone::UTC));
    }

    #[test]
    fn reply_files_of_either_schema_or_none() {
        let tz = jiff::tz::TimeZone::UTC;
        let replica = |error: String| {
            let mut s = status();
            // The failed replica, trainer[1].
            s.roles[0].replicas[0].structured_error_msg = error;
            s.format_in(&[], &tz)
        };
        // A scheduler's flat reply file.
        let flat = replica(
            json!({"message": "OOM killed", "errorCode": 137, "timestamp": 1_700_000_000})
                .to_string(),
        );
        assert!(flat.contains("trainer[1]:FAILED (exitcode: 137)"), "{flat}");
        assert!(flat.contains("timestamp: 2023-11-14 22:13:20"), "{flat}");
        assert!(flat.contains("error_msg: OOM killed"), "{flat}");
        // Missing fields read as not available, not as the epoch.
        let bare = replica(json!({"message": {"message": "boom"}}).to_string());
        assert!(
            bare.contains("(exitcode: <N/A>)") && bare.contains("timestamp: <N/A>"),
            "{bare}"
        );
        // What is neither (the job's own text, other JSON) is shown as it is.
        assert!(replica("not json".into()).contains("trainer[1]:not json"));
        assert!(replica(r#"{"other": 1}"#.into()).contains(r#"trainer[1]:{"other": 1}"#));
    }

    #[test]
    fn json_matches_torchx() {
        assert_eq!(
            status().to_json(&[]),
            json!({"state": "RUNNING", "num_restarts": 0, "roles": [{"role": "trainer", "replicas": [
                {"id": 1, "state": 5, "role": "trainer", "hostname": "h1", "structured_error_msg": "<NONE>", "hostaddr": "h1"},
                {"id": 0, "state": 3, "role": "trainer", "hostname": "h0", "structured_error_msg": "<NONE>", "hostaddr": "h0"}]}],
                "msg": "hi", "structured_error_msg": "<NONE>", "url": "http://x"})
        );
    }

    #[test]
    fn states() {
        assert_eq!(AppState::Running.repr(), "RUNNING (3)");
        assert!(AppState::Cancelled.is_terminal() && !AppState::Unknown.is_terminal());
        assert!(AppState::Running.is_started() && !AppState::Pending.is_started());
        assert_eq!(
            "succeeded".parse::<AppState>().unwrap(),
            AppState::Succeeded
        );
        assert!(
            status().raise_for_status().unwrap_err().to_string() == "job did not succeed: RUNNING"
        );
    }
}
