//! Slurm states and the parsers of `squeue --json`, `sacct --json` and `sacct --parsable2`
//! across Slurm versions (22.05 through 25.05). Pure: text in, components out.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::specs::{AppState, Attempt, EndReason};

use super::NAME;

/// Every Slurm job state [`app_state`] maps (TorchX's `SLURM_STATES` and the transient ones
/// newer Slurm versions report).
pub const KNOWN_STATES: [&str; 19] = [
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "COMPLETING",
    "CONFIGURING",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PENDING",
    "PREEMPTED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "REVOKED",
    "RUNNING",
    "SUSPENDED",
    "TIMEOUT",
];

/// TorchX's mapping of Slurm job states.
pub fn app_state(slurm: &str) -> AppState {
    match slurm {
        "BOOT_FAIL" | "DEADLINE" | "FAILED" | "NODE_FAIL" | "OUT_OF_MEMORY" | "PREEMPTED"
        | "REVOKED" | "TIMEOUT" => AppState::Failed,
        "CANCELLED" => AppState::Cancelled,
        "COMPLETED" => AppState::Succeeded,
        "PENDING" | "REQUEUED" | "RESIZING" | "SUSPENDED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        | "CONFIGURING" => AppState::Pending,
        "RUNNING" | "COMPLETING" => AppState::Running,
        _ => AppState::Unknown,
    }
}

/// One heterogeneous component of a job: one replica.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// The role (job name before the last `-`).
    pub role: String,
    /// The replica index (after the last `-`).
    pub replica: u32,
    /// Slurm's state name (first word, without a trailing `+`).
    pub slurm_state: String,
    /// Its mapping.
    pub state: AppState,
    /// Exit code, when known.
    pub exit_code: Option<i32>,
    /// Terminating signal, when known.
    pub signal: Option<i32>,
    /// The node it runs (ran) on.
    pub hostname: String,
    /// How often Slurm restarted (requeued) it.
    pub restarts: i64,
    /// Start and end times (unix seconds), when known.
    pub start: Option<f64>,
    /// End time.
    pub end: Option<f64>,
    /// What holds or ended it, where Slurm says (`waiting for afterok:23(unfulfilled)`).
    pub why: String,
    /// Its working directory, where Slurm's JSON says (what TorchX's describe calls the image).
    pub workdir: String,
    /// Its batch script, where `squeue --json` says (TorchX's describe: the entrypoint).
    pub command: String,
}

impl Component {
    /// Replica `replica` of `role` in Slurm state `slurm_state`; no restarts, times or reason
    /// known yet.
    fn new(
        (role, replica): (String, u32),
        slurm_state: String,
        (exit_code, signal): (Option<i32>, Option<i32>),
        hostname: String,
    ) -> Component {
        Component {
            state: app_state(&slurm_state),
            role,
            replica,
            slurm_state,
            exit_code,
            signal,
            hostname,
            restarts: 0,
            start: None,
            end: None,
            why: String::new(),
            workdir: String::new(),
            command: String::new(),
        }
    }
}

/// What Slurm's reason and dependency of a job say, for its status message: what it waits
/// for (`--after`), or why it never ran.
fn why(job: &Value) -> String {
    let reason = job["state_reason"]
        .as_str()
        .or_else(|| job["state"]["reason"].as_str())
        .unwrap_or("");
    let dependency = job["dependency"].as_str().unwrap_or("");
    let on = if dependency.is_empty() {
        String::new()
    } else {
        format!(" ({dependency})")
    };
    match reason {
        "Dependency" => format!("waiting for its dependencies{on}"),
        "DependencyNeverSatisfied" => {
            format!("not started: a dependency can never be satisfied{on}")
        }
        _ => String::new(),
    }
}

/// A listed job (`list`).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedJob {
    /// Job id (the het leader's).
    pub job_id: String,
    /// Job name (of the first component).
    pub name: String,
    /// Mapped state.
    pub state: AppState,
    /// Submit/start time.
    pub start: Option<f64>,
    /// End time.
    pub end: Option<f64>,
}

/// A number that newer Slurm wraps as `{"set": true, "number": n}`.
fn num(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::Object(o) if o.get("set").and_then(Value::as_bool) != Some(false) => {
            o.get("number").and_then(Value::as_i64)
        }
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A state that newer Slurm gives as a list of flags, older as a string.
fn state_str(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
        Value::Object(o) => return o.get("current").map(state_str).unwrap_or_default(),
        _ => String::new(),
    };
    s.split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches('+')
        .to_string()
}

/// (exit code, signal) from a raw wait status (22.05) or an exit-code object (23.02+).
fn exit_of(v: &Value) -> (Option<i32>, Option<i32>) {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(raw) if raw & 0x7f != 0 => (None, Some((raw & 0x7f) as i32)),
            Some(raw) => (Some(((raw >> 8) & 0xff) as i32), None),
            None => (None, None),
        },
        Value::Object(o) => {
            let code = o.get("return_code").and_then(num).map(|c| c as i32);
            let signal = o
                .get("signal")
                .and_then(|s| s.get("id").or(Some(s)))
                .and_then(num)
                .filter(|s| *s != 0)
                .map(|s| s as i32);
            (code, signal)
        }
        _ => (None, None),
    }
}

fn role_and_replica(name: &str) -> Option<(String, u32)> {
    let (role, id) = name.rsplit_once('-')?;
    Some((role.to_string(), id.parse().ok()?))
}

fn hostname_of(job: &Value) -> String {
    if let Some(n) = job
        .get("nodes")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return n.to_string();
    }
    let res = &job["job_resources"];
    if let Some(n) = res["nodes"]["allocation"][0]["name"].as_str() {
        return n.to_string();
    }
    if let Some(n) = res["allocated_nodes"][0]["nodename"].as_str() {
        return n.to_string();
    }
    res["nodes"]
        .as_str()
        .or_else(|| res["nodes"]["list"].as_str())
        .unwrap_or("")
        .to_string()
}

fn time_of(v: &Value) -> Option<f64> {
    num(v).filter(|t| *t > 0).map(|t| t as f64)
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        Error::backend(NAME, format!("cannot parse `{what}` output: {e}")).with_source(e)
    })
}

/// The het job leader of a job entry (`het_job_id` in squeue, `het.job_id` in sacct; 0 when
/// the job is not heterogeneous).
fn het_leader(job: &Value) -> Option<i64> {
    job.get("het_job_id")
        .and_then(num)
        .or_else(|| job.get("het").and_then(|h| h.get("job_id")).and_then(num))
        .filter(|h| *h != 0)
}

/// A Slurm job as an app id names it: a job (`1234`, a het job by its leader) or one task of a
/// job array (`1234_7`: the array's job id, then the task id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobRef {
    /// The job id (of the array, for a task).
    pub job: i64,
    /// The array task id.
    pub task: Option<u32>,
}

impl std::str::FromStr for JobRef {
    type Err = ();

    fn from_str(s: &str) -> std::result::Result<JobRef, ()> {
        let (job, task) = match s.split_once('_') {
            Some((j, t)) => (j, Some(t.parse::<u32>().map_err(drop)?)),
            None => (s, None),
        };
        let job = job.parse::<i64>().ok().filter(|j| *j > 0).ok_or(())?;
        Ok(JobRef { job, task })
    }
}

impl std::fmt::Display for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.task {
            Some(t) => write!(f, "{}_{t}", self.job),
            None => write!(f, "{}", self.job),
        }
    }
}

/// Whether task `task` is in an array task list as Slurm prints the pending ones (`2-9%2`,
/// `1,3,5-7:2`).
pub(super) fn task_list_contains(list: &str, task: u32) -> bool {
    let list = list.split('%').next().unwrap_or("");
    list.split(',').any(|part| {
        let (range, step) = part.split_once(':').unwrap_or((part, "1"));
        let step: u32 = step.parse().unwrap_or(1).max(1);
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            (Ok(a), Ok(b)) => (a..=b).contains(&task) && (task - a).is_multiple_of(step),
            _ => false,
        }
    })
}

/// How a job entry belongs to a [`JobRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Belongs {
    No,
    /// The job itself, a component of the het job, or the array task's own entry.
    Itself,
    /// The array's entry of its still pending tasks, which lists the task. Its own entry, once
    /// there, is the truth (accounting may still list a task that started as pending).
    Listed,
}

fn belongs(job: &Value, r: JobRef) -> Belongs {
    let yes = |b: bool, how: Belongs| if b { how } else { Belongs::No };
    let Some(task) = r.task else {
        let own = job.get("job_id").and_then(num) == Some(r.job) || het_leader(job) == Some(r.job);
        return yes(own, Belongs::Itself);
    };
    // squeue: `array_job_id`/`array_task_id`/`array_task_string`; sacct: `array.{job_id,task_id,task}`.
    let array = job.get("array");
    let field = |squeue: &str, sacct: &str| {
        job.get(squeue)
            .or_else(|| array.and_then(|a| a.get(sacct)))
            .cloned()
            .unwrap_or(Value::Null)
    };
    if num(&field("array_job_id", "job_id")) != Some(r.job) {
        return Belongs::No;
    }
    match num(&field("array_task_id", "task_id")) {
        Some(t) => yes(t == i64::from(task), Belongs::Itself),
        None => yes(
            field("array_task_string", "task")
                .as_str()
                .is_some_and(|l| task_list_contains(l, task)),
            Belongs::Listed,
        ),
    }
}

/// The components matched as `Itself` if there are any, else those `Listed`.
fn own_or_listed(matched: Vec<(Belongs, Component)>) -> Vec<Component> {
    let own = matched.iter().any(|(b, _)| *b == Belongs::Itself);
    matched
        .into_iter()
        .filter(|(b, _)| *b == Belongs::Itself || !own)
        .map(|(_, c)| c)
        .collect()
}

/// The components of job `id` in squeue's or sacct's JSON, which differ in where the state
/// and the times are (`state_key`, `times`).
fn components_of(
    v: &Value,
    id: JobRef,
    state_key: &str,
    times: fn(&Value) -> (&Value, &Value),
) -> Vec<Component> {
    let mut out = Vec::new();
    for job in v["jobs"].as_array().into_iter().flatten() {
        let how = belongs(job, id);
        if how == Belongs::No {
            continue;
        }
        // Not `role-i`: e.g. the "allocation" placeholder sacct shows before its record is final.
        let Some(replica) = job["name"].as_str().and_then(role_and_replica) else {
            continue;
        };
        let slurm_state = state_str(&job[state_key]);
        let exit = exit_of(&job["exit_code"]);
        let (start, end) = times(job);
        out.push((
            how,
            Component {
                restarts: job.get("restart_cnt").and_then(num).unwrap_or(0),
                start: time_of(start),
                end: time_of(end),
                why: why(job),
                workdir: job["current_working_directory"]
                    .as_str()
                    .or(job["working_directory"].as_str())
                    .unwrap_or_default()
                    .to_string(),
                command: job["command"].as_str().unwrap_or_default().to_string(),
                ..Component::new(replica, slurm_state, exit, hostname_of(job))
            },
        ));
    }
    own_or_listed(out)
}

/// The components of job `id` in `squeue --json` output (22.05 ignores `-j`, so this
/// filters itself).
pub fn parse_squeue(text: &str, id: JobRef) -> Result<Vec<Component>> {
    Ok(squeue_components(&parse_json(text, "squeue --json")?, id))
}

/// The parsed `squeue --json` output, for asking it about many jobs.
pub(super) fn parse_squeue_value(text: &str) -> Result<Value> {
    parse_json(text, "squeue --json")
}

/// The components of job `id` in parsed `squeue --json` output.
pub(super) fn squeue_components(v: &Value, id: JobRef) -> Vec<Component> {
    components_of(v, id, "job_state", |j| (&j["start_time"], &j["end_time"]))
}

/// The components of job `id` in `sacct --json` output.
pub fn parse_sacct_json(text: &str, id: JobRef) -> Result<Vec<Component>> {
    let v = parse_json(text, "sacct --json")?;
    Ok(components_of(&v, id, "state", |j| {
        (&j["time"]["start"], &j["time"]["end"])
    }))
}

/// The components of job `id` in `sacct --parsable2` output (header line first). Steps
/// (`21+0.batch`, `21.0`) are skipped; an array's pending tasks are one line (`21_[2-9%2]`).
pub fn parse_sacct_parsable(text: &str, id: JobRef) -> Vec<Component> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split('|').collect();
    let col = |name: &str| cols.iter().position(|c| *c == name);
    let (Some(jid), Some(jname), Some(jstate)) = (col("JobID"), col("JobName"), col("State"))
    else {
        return Vec::new();
    };
    let exit = col("ExitCode");
    let node = col("NodeList");
    let want = id.to_string();
    let mut out = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split('|').collect();
        let Some(job_id) = f.get(jid) else { continue };
        let (base, rest) = match job_id.split_once('+') {
            Some((b, r)) => (b, Some(r)),
            None => (job_id.split('.').next().unwrap_or(""), None),
        };
        let is_step = match rest {
            Some(r) => r.contains('.'),
            None => job_id.contains('.'),
        };
        let pending_task = |t: u32| {
            base.strip_prefix(&format!("{}_[", id.job))
                .and_then(|l| l.strip_suffix(']'))
                .is_some_and(|l| task_list_contains(l, t))
        };
        let how = if base == want {
            Belongs::Itself
        } else if id.task.is_some_and(pending_task) {
            Belongs::Listed
        } else {
            Belongs::No
        };
        if is_step || how == Belongs::No {
            continue;
        }
        let Some(replica) = f.get(jname).and_then(|n| role_and_replica(n)) else {
            continue;
        };
        let slurm_state = state_str(&Value::String(f.get(jstate).unwrap_or(&"").to_string()));
        let exit = exit
            .and_then(|i| f.get(i))
            .and_then(|e| e.split_once(':'))
            .map_or((None, None), |(c, s)| {
                (c.parse().ok(), s.parse().ok().filter(|s: &i32| *s != 0))
            });
        let hostname = node
            .and_then(|i| f.get(i))
            .filter(|n| **n != "None assigned")
            .unwrap_or(&"")
            .to_string();
        out.push((how, Component::new(replica, slurm_state, exit, hostname)));
    }
    own_or_listed(out)
}

/// Jobs in `SLURM_TIME_FORMAT=%s sacct --parsable2 -X -o JobID,JobName,State,Submit,End`
/// output, one per het job.
pub fn parse_list_parsable(text: &str) -> Vec<ListedJob> {
    let mut out: Vec<ListedJob> = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('|').collect();
        let [job_id, name, state, submit, end, ..] = f[..] else {
            continue;
        };
        if job_id.contains('.') {
            continue;
        }
        let leader = job_id.split('+').next().unwrap_or(job_id).to_string();
        let state = app_state(&state_str(&Value::String(state.to_string())));
        if let Some(existing) = out.iter_mut().find(|j| j.job_id == leader) {
            existing.state = aggregate([existing.state, state]);
            continue;
        }
        out.push(ListedJob {
            job_id: leader,
            name: role_and_replica(name).map_or_else(|| name.to_string(), |r| r.0),
            state,
            start: submit.parse().ok(),
            end: end.parse().ok().filter(|_| state.is_terminal()),
        });
    }
    out
}

/// Jobs in `sacct --json` or `squeue --json` output, one per het job (the leader's entry).
pub fn parse_list(text: &str, what: &str) -> Result<Vec<ListedJob>> {
    let v = parse_json(text, what)?;
    let mut out: Vec<ListedJob> = Vec::new();
    for job in v["jobs"].as_array().into_iter().flatten() {
        let Some(id) = job.get("job_id").and_then(num) else {
            continue;
        };
        // An array's task is `A_T`, its still pending tasks `A_[list]`, as Slurm prints them.
        let array = job.get("array_job_id").and_then(num).filter(|a| *a > 0);
        let task_list = job["array_task_string"].as_str().filter(|l| !l.is_empty());
        let leader = match (array, job.get("array_task_id").and_then(num), task_list) {
            (Some(a), Some(t), _) => format!("{a}_{t}"),
            (Some(a), None, Some(list)) => format!("{a}_[{list}]"),
            _ => het_leader(job).unwrap_or(id).to_string(),
        };
        let state = app_state(&state_str(job.get("job_state").unwrap_or(&job["state"])));
        let start = time_of(&job["submit_time"]).or_else(|| time_of(&job["time"]["submission"]));
        let end = time_of(&job["end_time"]).or_else(|| time_of(&job["time"]["end"]));
        if let Some(existing) = out.iter_mut().find(|j| j.job_id == leader) {
            existing.state = aggregate([existing.state, state]);
            continue;
        }
        out.push(ListedJob {
            job_id: leader,
            name: job["name"]
                .as_str()
                .and_then(|n| role_and_replica(n).map(|r| r.0))
                .unwrap_or_else(|| job["name"].as_str().unwrap_or("").to_string()),
            state,
            start,
            end: end.filter(|_| state.is_terminal()),
        });
    }
    Ok(out)
}

/// The app state of a job from its components' states: running while any component runs,
/// pending while any waits, then FAILED over CANCELLED over SUCCEEDED.
pub fn aggregate(states: impl IntoIterator<Item = AppState>) -> AppState {
    let states: Vec<AppState> = states.into_iter().collect();
    let any = |s: AppState| states.contains(&s);
    if states.is_empty() {
        AppState::Unknown
    } else if any(AppState::Running) {
        AppState::Running
    } else if any(AppState::Pending) || any(AppState::Submitted) {
        AppState::Pending
    } else if any(AppState::Unknown) {
        AppState::Unknown
    } else if any(AppState::Failed) {
        AppState::Failed
    } else if any(AppState::Cancelled) {
        AppState::Cancelled
    } else {
        AppState::Succeeded
    }
}

/// The attempts recorded by the recovery script's attempts file (`start N TIME` and
/// `end N TIME EXIT REASON` lines; see `render::RECOVERY_SCRIPT`), oldest first. Lines it does
/// not understand are skipped: the file is the job's, and a half-written last line must not
/// hide the rest.
pub(super) fn parse_attempts(text: &str) -> Vec<Attempt> {
    let mut attempts: Vec<Attempt> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["start", n, t] => {
                let (Ok(attempt), Ok(started)) = (n.parse(), t.parse::<f64>()) else {
                    continue;
                };
                attempts.push(Attempt {
                    attempt,
                    started: Some(started),
                    ended: None,
                    exit_code: None,
                    signal: None,
                    reason: None,
                });
            }
            ["end", n, t, code, reason] => {
                let Some(a) = attempts
                    .iter_mut()
                    .rev()
                    .find(|a| n.parse() == Ok(a.attempt) && a.ended.is_none())
                else {
                    continue;
                };
                a.ended = t.parse().ok();
                a.exit_code = code.parse().ok();
                a.reason = reason.parse::<EndReason>().ok();
            }
            _ => {}
        }
    }
    attempts
}

/// When `sbatch --test-only` says the job would start: the time of `Job N to start at TIME
/// using ...`.
pub(super) fn test_only_start(said: &str) -> Option<String> {
    let rest = said.split(" to start at ").nth(1)?;
    let when = rest.split_whitespace().next()?;
    // Asked with SLURM_TIME_FORMAT=%s: seconds since the epoch.
    Some(match when.parse::<i64>() {
        Ok(secs) => format!("{}Z", crate::specs::format_utc(secs)),
        Err(_) => when.to_string(),
    })
}
