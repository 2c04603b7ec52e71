//! `local_cwd`: replicas run as local processes in the submitter's working directory.
//!
//! Every app is recorded under the state directory (`$TORCHX_STATE_DIR`, else
//! `$XDG_STATE_HOME/torchx`, else `~/.local/state/torchx`) so that `status`, `describe`, `log`,
//! `list`, `cancel` and `delete` work from any process, during and after the run. The process that
//! calls `schedule` owns the replicas: it pumps their output into per-replica log files and
//! records their exits.

mod opts;
mod render;
mod state;
mod sys;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

pub use opts::LocalCwdOpts;
pub use render::{cuda_assignments, render, PopenRequest, ReplicaParam, RoleParams};
pub use state::{derive_state, AppRecord, Liveness, ReplicaRecord, RoleRecord};

use crate::error::{Error, Result};
use crate::opts::{Cfg, RunOpts, TypedOpts};
use crate::scheduler::{
    downcast_request, Capabilities, DryRunContext, LogLines, LogQuery, NativeRequest, Scheduler,
};
use crate::specs::{
    AppDef, DescribeAppResponse, DryRunInfo, ListAppResponse, ReplicaStatus, RoleStatus, Stream,
    NONE,
};

/// The registry name.
pub const NAME: &str = "local_cwd";
/// How long `cancel` waits after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(LocalCwdScheduler::new(default_state_dir())))
}

/// The per-user state directory.
pub fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TORCHX_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("torchx");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/state/torchx"),
        None => std::env::temp_dir().join(format!("torchx-{}", sys::uid())),
    }
}

/// The local process scheduler.
#[derive(Debug)]
pub struct LocalCwdScheduler {
    state_dir: PathBuf,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |e| Error::io(context, e)
}

/// Writes `bytes` to `path` atomically (temp file + rename), so readers never see a torn file.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = File::create(&tmp).map_err(io_err(format!("writing {}", tmp.display())))?;
    f.write_all(bytes)
        .map_err(io_err(format!("writing {}", tmp.display())))?;
    fs::rename(&tmp, path).map_err(io_err(format!("renaming {}", tmp.display())))
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(format!("creating {}", dir.display())))
}

impl LocalCwdScheduler {
    /// A scheduler keeping its records under `state_dir`.
    pub fn new(state_dir: PathBuf) -> Self {
        LocalCwdScheduler { state_dir }
    }

    fn apps_dir(&self) -> PathBuf {
        self.state_dir.join(NAME).join("apps")
    }

    fn app_dir(&self, app_id: &str) -> Result<PathBuf> {
        if app_id.is_empty() || app_id.contains(['/', '\0']) || app_id.starts_with('.') {
            return Err(Error::arg(format!("invalid local_cwd app id `{app_id}`")));
        }
        Ok(self.apps_dir().join(app_id))
    }

    fn read_record(&self, app_id: &str) -> Result<Option<AppRecord>> {
        let path = self.app_dir(app_id)?.join("state.json");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::backend(NAME, format!("corrupt app record {}: {e}", path.display()))
        })
    }

    fn liveness(&self, rec: &AppRecord) -> Liveness {
        let cancelled = self.apps_dir().join(&rec.app_id).join("cancelled").exists();
        let any_unfinished_alive = rec
            .roles
            .iter()
            .flat_map(|r| &r.replicas)
            .filter(|r| !r.finished())
            .any(|r| r.pid.is_some_and(|p| sys::pid_alive(p, r.pid_start)));
        Liveness {
            cancelled,
            owner_alive: sys::pid_alive(rec.owner_pid, rec.owner_start),
            any_unfinished_alive,
        }
    }

    fn describe_record(&self, rec: &AppRecord) -> DescribeAppResponse {
        let (state, msg) = derive_state(rec, self.liveness(rec));
        let mut resp = DescribeAppResponse::new(&rec.app_id, state);
        resp.msg = msg;
        resp.ui_url = Some(format!("file://{}", rec.log_dir));
        resp.roles = rec.app.roles.clone();
        resp.metadata
            .insert("created".into(), format!("{:.3}", rec.created));
        let ended = rec
            .roles
            .iter()
            .flat_map(|r| &r.replicas)
            .filter_map(|r| r.ended)
            .fold(None, |a: Option<f64>, e| Some(a.map_or(e, |a| a.max(e))));
        if let (true, Some(e)) = (state.is_terminal(), ended) {
            resp.metadata.insert("ended".into(), format!("{e:.3}"));
        }
        // The earliest torchelastic error file, as TorchX reports it.
        let mut errors: Vec<(SystemTime, String, &str)> = Vec::new();
        for role in &rec.roles {
            let mut replicas = Vec::new();
            for r in &role.replicas {
                let mut status = ReplicaStatus::new(
                    r.id,
                    state::replica_state(r, state),
                    &role.role,
                    "localhost",
                );
                if let Ok(meta) = fs::metadata(&r.error_file) {
                    if let Ok(text) = fs::read_to_string(&r.error_file) {
                        status.structured_error_msg = text.clone();
                        errors.push((meta.modified().unwrap_or(UNIX_EPOCH), text, ""));
                    }
                }
                replicas.push(status);
            }
            resp.roles_statuses.push(RoleStatus {
                role: role.role.clone(),
                replicas,
            });
        }
        errors.sort_by_key(|e| e.0);
        resp.structured_error_msg = errors
            .into_iter()
            .next()
            .map_or_else(|| NONE.to_string(), |e| e.1);
        resp
    }

    fn launch(&self, req: &PopenRequest, app: &AppDef, session: &str) -> Result<String> {
        let app_dir = self.app_dir(&req.app_id)?;
        create_private_dir(&self.apps_dir())?;
        fs::create_dir(&app_dir).map_err(io_err(format!("creating {}", app_dir.display())))?;
        let cuda = if req.auto_set_cuda_visible_devices {
            cuda_assignments(req, gpu_count())
        } else {
            None
        };
        let me = std::process::id();
        let mut record = AppRecord {
            app_id: req.app_id.clone(),
            session: session.to_string(),
            owner_pid: me,
            owner_start: sys::proc_start_time(me),
            created: now(),
            log_dir: req.log_dir.display().to_string(),
            app: app.clone(),
            roles: Vec::new(),
        };
        let mut children = Vec::new();
        for (ri, role) in req.roles.iter().enumerate() {
            let mut role_rec = RoleRecord {
                role: role.role.clone(),
                replicas: Vec::new(),
            };
            for (i, p) in role.replicas.iter().enumerate() {
                let mut env = p.env.clone();
                if let Some(ids) = cuda.as_ref().and_then(|c| c.get(ri)).and_then(|r| r.get(i)) {
                    env.insert("CUDA_VISIBLE_DEVICES".into(), ids.clone());
                }
                let mut rr = ReplicaRecord {
                    id: i as u32,
                    pid: None,
                    pid_start: None,
                    exit_code: None,
                    signal: None,
                    spawn_error: None,
                    started: now(),
                    ended: None,
                    stdout: p.stdout.display().to_string(),
                    stderr: p.stderr.display().to_string(),
                    combined: p.combined.display().to_string(),
                    error_file: env
                        .get("TORCHELASTIC_ERROR_FILE")
                        .cloned()
                        .unwrap_or_default(),
                };
                match spawn(p, &env) {
                    Ok(child) => {
                        rr.pid = Some(child.0.id());
                        rr.pid_start = sys::proc_start_time(child.0.id());
                        children.push((role_rec.role.clone(), i, child));
                    }
                    Err(e) => {
                        rr.spawn_error = Some(e.to_string());
                        rr.ended = Some(now());
                    }
                }
                role_rec.replicas.push(rr);
            }
            record.roles.push(role_rec);
        }
        let state_path = app_dir.join("state.json");
        write_atomic(
            &state_path,
            &serde_json::to_vec_pretty(&record).unwrap_or_default(),
        )?;
        let shared = Arc::new(Mutex::new(record));
        for (role, i, (child, pumps)) in children {
            let shared = Arc::clone(&shared);
            let state_path = state_path.clone();
            std::thread::spawn(move || wait_replica(child, pumps, &shared, &state_path, &role, i));
        }
        Ok(req.app_id.clone())
    }

    fn cancel_record(&self, rec: &AppRecord) -> Result<()> {
        let marker = self.app_dir(&rec.app_id)?.join("cancelled");
        File::create(&marker).map_err(io_err(format!("creating {}", marker.display())))?;
        let live: Vec<(u32, Option<u64>)> = rec
            .roles
            .iter()
            .flat_map(|r| &r.replicas)
            .filter(|r| !r.finished())
            .filter_map(|r| r.pid.map(|p| (p, r.pid_start)))
            .filter(|(p, s)| sys::pid_alive(*p, *s))
            .collect();
        for (pid, _) in &live {
            sys::signal_group(*pid, sys::SIGTERM);
        }
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline && live.iter().any(|(p, s)| sys::pid_alive(*p, *s)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for (pid, start) in &live {
            if sys::pid_alive(*pid, *start) {
                sys::signal_group(*pid, sys::SIGKILL);
            }
        }
        Ok(())
    }
}

type Pumps = Vec<std::thread::JoinHandle<()>>;

fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create_new(true).append(true).open(path)
}

fn spawn(p: &ReplicaParam, env: &BTreeMap<String, String>) -> Result<(std::process::Child, Pumps)> {
    use std::os::unix::process::CommandExt;
    let context = |what: &str| format!("{what} for replica log {}", p.stdout.display());
    let stdout_log = open_log(&p.stdout).map_err(io_err(context("creating log file")))?;
    let stderr_log = open_log(&p.stderr).map_err(io_err(context("creating log file")))?;
    let combined = Arc::new(Mutex::new(
        open_log(&p.combined).map_err(io_err(context("creating log file")))?,
    ));
    let (program, args) = p
        .args
        .split_first()
        .ok_or_else(|| Error::spec("empty command line"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&p.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        if k == "PATH" {
            let os_path = std::env::var("PATH").unwrap_or_default();
            cmd.env(
                k,
                render::join_path([Some(v.as_str()), Some(os_path.as_str())]),
            );
        } else {
            cmd.env(k, v);
        }
    }
    if std::env::var_os("PYTHONUNBUFFERED").is_none() && !env.contains_key("PYTHONUNBUFFERED") {
        cmd.env("PYTHONUNBUFFERED", "x");
    }
    // Its own process group, so cancel can stop the whole tree.
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::backend(NAME, format!("cannot start `{program}`: {e}")))?;
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        let c = Arc::clone(&combined);
        pumps.push(std::thread::spawn(move || pump(out, stdout_log, &c)));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(std::thread::spawn(move || pump(err, stderr_log, &combined)));
    }
    Ok((child, pumps))
}

/// Copies a pipe into its own log and, line by line, into the combined log.
fn pump(src: impl Read, mut own: File, combined: &Mutex<File>) {
    let mut reader = BufReader::new(src);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let _ = own.write_all(&line);
                if let Ok(mut c) = combined.lock() {
                    let _ = c.write_all(&line);
                }
            }
        }
    }
}

fn wait_replica(
    mut child: std::process::Child,
    pumps: Pumps,
    shared: &Mutex<AppRecord>,
    state_path: &Path,
    role: &str,
    i: usize,
) {
    use std::os::unix::process::ExitStatusExt;
    let status = child.wait();
    for p in pumps {
        let _ = p.join();
    }
    let Ok(mut rec) = shared.lock() else { return };
    if let Some(r) = rec
        .roles
        .iter_mut()
        .find(|r| r.role == role)
        .and_then(|r| r.replicas.get_mut(i))
    {
        match status {
            Ok(s) => {
                r.exit_code = s.code();
                r.signal = s.signal();
            }
            Err(e) => r.spawn_error = Some(format!("wait failed: {e}")),
        }
        r.ended = Some(now());
    }
    if let Ok(bytes) = serde_json::to_vec_pretty(&*rec) {
        if let Err(e) = write_atomic(state_path, &bytes) {
            log::error!("local_cwd: cannot record the exit of {role}/{i}: {e}");
        }
    }
}

fn unknown_app(app_id: &str) -> Error {
    Error::not_found(
        "app",
        format!("{NAME}://{app_id}"),
        ", it does not exist or has been deleted",
    )
}

fn gpu_count() -> i64 {
    match Command::new("nvidia-smi")
        .arg("-L")
        .stderr(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count() as i64,
        _ => 0,
    }
}

#[async_trait]
impl Scheduler for LocalCwdScheduler {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            describe_replicas: true,
            list: true,
            cancel: true,
            delete: true,
            logs: true,
            log_streams: true,
            log_tail: true,
            multi_role: true,
            ..Capabilities::default()
        }
    }

    fn run_opts(&self) -> RunOpts {
        LocalCwdOpts::schema()
    }

    fn submit_dryrun(
        &self,
        app: &AppDef,
        cfg: &Cfg,
        ctx: &DryRunContext,
    ) -> Result<Box<dyn NativeRequest>> {
        let opts = LocalCwdOpts::from_cfg(cfg)?;
        let base = self.state_dir.join(NAME).join("logs");
        Ok(Box::new(render(app, &opts, ctx, &base)))
    }

    async fn schedule(&self, info: &DryRunInfo) -> Result<String> {
        let req = downcast_request::<PopenRequest>(info, NAME)?;
        let session = req
            .log_dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.launch(req, &info.app, &session)
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        Ok(self
            .read_record(app_id)?
            .map(|rec| self.describe_record(&rec)))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        let dir = self.apps_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            let Ok(Some(rec)) = self.read_record(&id) else {
                continue;
            };
            let desc = self.describe_record(&rec);
            out.push(ListAppResponse {
                app_id: rec.app_id.clone(),
                state: desc.state,
                app_handle: String::new(),
                name: rec.app.name.clone(),
                start_time: Some(rec.created),
                end_time: desc.metadata.get("ended").and_then(|e| e.parse().ok()),
            });
        }
        out.sort_by(|a, b| {
            b.start_time
                .partial_cmp(&a.start_time)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        Ok(out)
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        match self.read_record(app_id)? {
            Some(rec) => self.cancel_record(&rec),
            None => Err(unknown_app(app_id)),
        }
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        let Some(rec) = self.read_record(app_id)? else {
            return Err(unknown_app(app_id));
        };
        if !derive_state(&rec, self.liveness(&rec)).0.is_terminal() {
            self.cancel_record(&rec)?;
        }
        let dir = self.app_dir(app_id)?;
        fs::remove_dir_all(&dir).map_err(io_err(format!("removing {}", dir.display())))?;
        let logs = PathBuf::from(&rec.log_dir);
        if logs.starts_with(&self.state_dir) {
            let _ = fs::remove_dir_all(&logs);
        }
        Ok(())
    }

    async fn log_iter(
        &self,
        app_id: &str,
        role: &str,
        k: u32,
        query: &LogQuery,
    ) -> Result<Box<dyn LogLines>> {
        let rec = self
            .read_record(app_id)?
            .ok_or_else(|| unknown_app(app_id))?;
        let role_rec = rec.roles.iter().find(|r| r.role == role).ok_or_else(|| {
            let names: Vec<&str> = rec.roles.iter().map(|r| r.role.as_str()).collect();
            Error::not_found(
                "role",
                role,
                format!(" in app {app_id}; its roles are: {}", names.join(", ")),
            )
        })?;
        let replica = role_rec.replicas.get(k as usize).ok_or_else(|| {
            Error::not_found(
                "replica",
                format!("{role}/{k}"),
                format!(
                    " in app {app_id}; role {role} has {} replica(s)",
                    role_rec.replicas.len()
                ),
            )
        })?;
        if query.since.is_some() || query.until.is_some() {
            return Err(Error::unsupported(
                NAME,
                "log --since/--until (its logs carry no timestamps)",
            ));
        }
        let path = match query.streams.unwrap_or(Stream::Combined) {
            Stream::Stdout => &replica.stdout,
            Stream::Stderr => &replica.stderr,
            Stream::Combined => &replica.combined,
        };
        Ok(Box::new(FileLines {
            path: PathBuf::from(path),
            file: None,
            pending: Vec::new(),
            tail: query.should_tail,
            app_id: app_id.to_string(),
            scheduler: LocalCwdScheduler::new(self.state_dir.clone()),
        }))
    }
}

/// Lines of a log file, optionally following it until the app ends.
struct FileLines {
    path: PathBuf,
    file: Option<File>,
    pending: Vec<u8>,
    tail: bool,
    app_id: String,
    scheduler: LocalCwdScheduler,
}

impl FileLines {
    fn app_finished(&self) -> bool {
        match self.scheduler.read_record(&self.app_id) {
            Ok(Some(rec)) => derive_state(&rec, self.scheduler.liveness(&rec))
                .0
                .is_terminal(),
            _ => true,
        }
    }

    fn take_line(&mut self) -> Option<String> {
        let pos = self.pending.iter().position(|b| *b == b'\n')?;
        let line: Vec<u8> = self.pending.drain(..=pos).collect();
        Some(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned())
    }
}

#[async_trait]
impl LogLines for FileLines {
    async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            if let Some(line) = self.take_line() {
                return Ok(Some(line));
            }
            // Decide before reading, so nothing written before the app ended is missed.
            let finished = !self.tail || self.app_finished();
            if self.file.is_none() {
                match File::open(&self.path) {
                    Ok(f) => self.file = Some(f),
                    Err(_) if !finished => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    Err(e) => {
                        return Err(Error::io(format!("reading log {}", self.path.display()), e))
                    }
                }
            }
            let mut buf = Vec::new();
            if let Some(f) = self.file.as_mut() {
                f.read_to_end(&mut buf)
                    .map_err(io_err(format!("reading log {}", self.path.display())))?;
            }
            if !buf.is_empty() {
                self.pending.extend_from_slice(&buf);
                continue;
            }
            if finished {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                let rest = std::mem::take(&mut self.pending);
                return Ok(Some(String::from_utf8_lossy(&rest).into_owned()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
