//! The builtin schedulers, operation by operation, for the Python `Scheduler` subclasses in
//! `torchx.schedulers`: AppDefs, run options and requests cross as plain values in the crate's
//! serde shapes ([`Data`]), responses as typed objects; a dry run stays a Rust value
//! ([`DryRun`]) until it is scheduled. Blocking calls release the GIL and run on one
//! process-wide tokio runtime.

use crate::data::Data;
use crate::status::{Described, Listed};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use torchx::config::TorchxConfig;

use pyo3::exceptions::{
    PyLookupError, PyNotImplementedError, PyRuntimeError, PyStopIteration, PyTimeoutError,
    PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use torchx::opts::Cfg;
use torchx::scheduler::{
    cooperative, random_id, DryRunContext, DryRunInfo, LogLines, LogQuery, Registry, Scheduler,
    WorkspaceSupport,
};
use torchx::specs::{AppDef, Stream};
use torchx::{Error, ErrorKind};

/// A torchx error as the exception class of its kind (`torchx.errors`: each subclasses the
/// builtin TorchX code expects, e.g. `ValueError`), with its cause chain as `__cause__`.
pub fn to_py(e: Error) -> PyErr {
    // Python's way around an error, where it has one (no pre-flight checks run from Python).
    let remedy = (e.remedy() == Some(torchx::Remedy::NoWorkspace))
        .then_some("Or pass workspace=None to run the image as is.");
    let msg = e.explained(remedy);
    let kind = e.kind();
    let causes: Vec<String> = std::iter::successors(std::error::Error::source(&e), |s| s.source())
        .map(ToString::to_string)
        .collect();
    Python::attach(|py| {
        let err = typed_error(py, kind, &msg).unwrap_or_else(|_| builtin_error(kind, msg));
        // The innermost cause first, each chained to the next outer one.
        let cause = causes.iter().rev().fold(None::<PyErr>, |inner, text| {
            let outer = PyRuntimeError::new_err(text.clone());
            outer.set_cause(py, inner);
            Some(outer)
        });
        if cause.is_some() {
            err.set_cause(py, cause);
        }
        err
    })
}

/// An instance of `torchx.errors.BY_KIND[kind]`.
fn typed_error(py: Python<'_>, kind: ErrorKind, msg: &str) -> PyResult<PyErr> {
    let class = py
        .import("torchx.errors")?
        .getattr("BY_KIND")?
        .get_item(kind.as_str())?;
    Ok(PyErr::from_value(class.call1((msg,))?))
}

/// The builtin exception of `kind` (if `torchx.errors` cannot be imported).
fn builtin_error(kind: ErrorKind, msg: String) -> PyErr {
    match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidSpec | ErrorKind::InvalidConfig => {
            PyValueError::new_err(msg)
        }
        ErrorKind::NotFound => PyLookupError::new_err(msg),
        ErrorKind::Unsupported => PyNotImplementedError::new_err(msg),
        ErrorKind::Timeout => PyTimeoutError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// A value made once per process. A child of `os.fork()` inherits the parent's copy without the
/// threads and connections behind it (a tokio runtime's workers, a client's pool), so it makes
/// its own; the inherited one is leaked: dropping it would wait on threads that are not there.
struct PerProcess<T: 'static>(Mutex<Option<(u32, &'static T)>>);

impl<T> PerProcess<T> {
    const fn new() -> Self {
        PerProcess(Mutex::new(None))
    }

    fn get_or_try_init(&self, init: impl FnOnce() -> PyResult<T>) -> PyResult<&'static T> {
        let pid = std::process::id();
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((owner, value)) = *slot {
            if owner == pid {
                return Ok(value);
            }
        }
        let value: &'static T = Box::leak(Box::new(init()?));
        *slot = Some((pid, value));
        Ok(value)
    }
}

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: PerProcess<tokio::runtime::Runtime> = PerProcess::new();
    RUNTIME.get_or_try_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("torchx-rs")
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start torchx's runtime: {e}")))
    })
}

/// Runs `fut` without the GIL, waking every 100 ms to let Python deliver signals (Ctrl-C
/// raises `KeyboardInterrupt` and drops the future).
pub fn block_on<T: Send>(py: Python<'_>, fut: impl Future<Output = T> + Send) -> PyResult<T> {
    let runtime = runtime()?;
    let mut fut = std::pin::pin!(fut);
    loop {
        let step = py.detach(|| {
            runtime.block_on(async {
                tokio::time::timeout(Duration::from_millis(100), fut.as_mut()).await
            })
        });
        match step {
            Ok(value) => return Ok(value),
            Err(_) => py.check_signals()?,
        }
    }
}

/// The process's scheduler instances, one per name, created on first use (the core's Runner
/// keeps them; it reads no config files, as TorchX's programmatic Runner).
fn scheduler(name: &str) -> PyResult<Arc<dyn Scheduler>> {
    static RUNNER: PerProcess<torchx::Runner> = PerProcess::new();
    let runner = RUNNER.get_or_try_init(|| {
        Ok(torchx::Runner::new(
            Registry::builtin(),
            TorchxConfig::default(),
        ))
    })?;
    runtime()?.block_on(runner.scheduler(name)).map_err(to_py)
}

/// The builtin schedulers' names, the default first, with their descriptions.
#[pyfunction]
pub fn scheduler_backends() -> Vec<(String, String)> {
    let registry = Registry::builtin();
    registry
        .names()
        .map(|n| {
            (
                n.to_string(),
                registry.description(n).unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A scheduler's run options: `[{name, type, required, default, help, aliases}]`.
#[pyfunction]
pub fn run_opts(name: &str) -> PyResult<Data<serde_json::Value>> {
    Ok(Data(scheduler(name)?.run_opts().to_json()))
}

/// A dry run's native request, kept as Rust until scheduled.
#[pyclass(frozen, module = "torchx._rs")]
pub struct DryRun {
    info: Mutex<Option<DryRunInfo>>,
    request: serde_json::Value,
    rendered: String,
    role_images: Vec<String>,
}

#[pymethods]
impl DryRun {
    /// The request as data (what the scheduler will be sent).
    fn request(&self) -> Data<&serde_json::Value> {
        Data(&self.request)
    }

    /// The request as `torchx run --dryrun` shows it.
    fn render(&self) -> &str {
        &self.rendered
    }

    /// Each role's image after its workspace was planned into one.
    fn role_images(&self) -> Vec<String> {
        self.role_images.clone()
    }
}

/// `scheduler.submit_dryrun(app, cfg)`: the native request for `app` (the crate's AppDef) under
/// the resolved `cfg`, in session `session`, submitted from `cwd` (default: the current
/// directory; local_cwd runs replicas there).
#[pyfunction]
#[pyo3(signature = (name, session, app, cfg, cwd=None, after=Vec::new()))]
pub fn submit_dryrun(
    py: Python<'_>,
    name: &str,
    session: &str,
    app: Data<AppDef>,
    cfg: Data<Cfg>,
    cwd: Option<std::path::PathBuf>,
    after: Vec<String>,
) -> PyResult<DryRun> {
    let after: Vec<torchx::specs::Dependency> = after
        .iter()
        .map(|d| d.parse())
        .collect::<torchx::Result<_>>()
        .map_err(to_py)?;
    let (Data(mut app), Data(cfg)) = (app, cfg);
    app.validate().map_err(to_py)?;
    let sched = scheduler(name)?;
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| PyRuntimeError::new_err(e.to_string()))?,
    };
    // Workspaces are read (hashed into image names) here: not under the GIL. Backend facts
    // (e.g. the Slurm version) may run a command: awaited without the GIL.
    let images = py
        .detach(|| {
            let support = sched.workspace_support(&cfg);
            torchx::workspace::prepare(&mut app, name, support, &cfg, &cwd)
        })
        .map_err(to_py)?;
    let facts = block_on(py, sched.dryrun_facts(&cfg))?.map_err(to_py)?;
    let ctx = DryRunContext::new(session, random_id(), cwd)
        .with_facts(facts)
        .with_after(after.clone());
    let request = sched.submit_dryrun(&app, &cfg, &ctx).map_err(to_py)?;
    let request_data = request.to_json();
    let rendered = request.render();
    Ok(DryRun {
        role_images: app.roles.iter().map(|r| r.image.clone()).collect(),
        info: Mutex::new(Some(DryRunInfo {
            app,
            scheduler: name.to_string(),
            cfg,
            request,
            images,
            after,
            preflight: Vec::new(),
        })),
        request: request_data,
        rendered,
    })
}

/// Builds (and, for a scheduler that pulls them, pushes) the workspace images of `app`'s roles
/// as a submission would, without submitting: each role's image afterwards (a role without a
/// workspace keeps its own). `Runner.build_workspace`: build once, submit many.
#[pyfunction]
#[pyo3(signature = (name, app, cfg, cwd=None))]
pub fn build_workspace(
    py: Python<'_>,
    name: &str,
    app: Data<AppDef>,
    cfg: Data<Cfg>,
    cwd: Option<std::path::PathBuf>,
) -> PyResult<Vec<String>> {
    let (Data(mut app), Data(cfg)) = (app, cfg);
    let sched = scheduler(name)?;
    let support = sched.workspace_support(&cfg);
    if !matches!(
        support,
        WorkspaceSupport::LocalImage | WorkspaceSupport::PushedImage
    ) {
        // Its jobs read the workspace directory itself: nothing to build ahead.
        return Ok(app.roles.into_iter().map(|r| r.image).collect());
    }
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| PyRuntimeError::new_err(e.to_string()))?,
    };
    let images = py
        .detach(|| torchx::workspace::prepare(&mut app, name, support, &cfg, &cwd))
        .map_err(to_py)?;
    let scheduler_name = name.to_string();
    block_on(py, async move {
        torchx::workspace::build_images(&images, &scheduler_name, &cfg).await
    })?
    .map_err(to_py)?;
    Ok(app.roles.into_iter().map(|r| r.image).collect())
}

/// The dry run's request, taken out to be scheduled (once).
pub fn take_info(dryrun: &DryRun) -> PyResult<DryRunInfo> {
    dryrun
        .info
        .lock()
        .map_err(|_| PyRuntimeError::new_err("dry run lock poisoned"))?
        .take()
        .ok_or_else(|| PyValueError::new_err("this dry run was already scheduled"))
}

/// `scheduler.schedule(dryrun_info)`: submits a dry run (once); returns the app id.
#[pyfunction]
pub fn schedule(py: Python<'_>, dryrun: &DryRun) -> PyResult<String> {
    let info = take_info(dryrun)?;
    let sched = scheduler(&info.scheduler)?;
    block_on(py, async move {
        torchx::workspace::build_images(&info.images, &info.scheduler, &info.cfg).await?;
        sched.schedule(&info).await
    })?
    .map_err(to_py)
}

/// `scheduler.describe(app_id)`, `None` for an unknown app.
#[pyfunction]
pub fn describe(py: Python<'_>, name: &str, app_id: &str) -> PyResult<Option<Described>> {
    let sched = scheduler(name)?;
    let app_id = app_id.to_string();
    let resp = block_on(py, async move { sched.describe(&app_id).await })?.map_err(to_py)?;
    Ok(resp.map(Described::from))
}

/// `scheduler.describe_native(app_id)`: the native request read back, `None` if unknown or
/// nothing can be read back.
#[pyfunction]
pub fn describe_native(
    py: Python<'_>,
    name: &str,
    app_id: &str,
) -> PyResult<Option<Data<serde_json::Value>>> {
    let sched = scheduler(name)?;
    let app_id = app_id.to_string();
    let native =
        block_on(py, async move { sched.describe_native(&app_id).await })?.map_err(to_py)?;
    Ok(native.map(Data))
}

/// `scheduler.list()`.
#[pyfunction]
pub fn list(py: Python<'_>, name: &str) -> PyResult<Vec<Listed>> {
    let sched = scheduler(name)?;
    let apps = block_on(py, async move { sched.list().await })?.map_err(to_py)?;
    Ok(apps.into_iter().map(Listed::from).collect())
}

/// Cancels an app (returns once the scheduler says it is stopping or stopped).
#[pyfunction]
pub fn cancel(py: Python<'_>, name: &str, app_id: &str) -> PyResult<()> {
    let sched = scheduler(name)?;
    let app_id = app_id.to_string();
    block_on(py, async move { sched.cancel(&app_id).await })?.map_err(to_py)
}

/// Deletes an app and what the scheduler keeps of it.
#[pyfunction]
pub fn delete(py: Python<'_>, name: &str, app_id: &str) -> PyResult<()> {
    let sched = scheduler(name)?;
    let app_id = app_id.to_string();
    block_on(py, async move { sched.delete(&app_id).await })?.map_err(to_py)
}

/// A replica's log lines, a Python iterator of chunks: each `next()` is a list of the lines
/// that were ready together (each with its newline), made while the GIL is held only to make
/// the strings; waiting for lines releases it. Python flattens the chunks with
/// `itertools.chain.from_iterable`, whose C loop hands out each line with no call into the
/// extension: a long log costs one runtime round trip per chunk, not per line.
#[pyclass(module = "torchx._rs")]
pub struct LogChunks {
    lines: Arc<tokio::sync::Mutex<Box<dyn LogLines>>>,
    /// The last chunk's buffer, reused for the next one.
    buffer: Mutex<Vec<u8>>,
}

/// `line` (a whole line, or a last line without its newline) as a Python string ending in
/// `\n`; undecodable bytes become U+FFFD.
fn py_line<'py>(py: Python<'py>, line: &[u8]) -> Bound<'py, PyString> {
    if line.ends_with(b"\n") {
        // CPython decodes (and so checks) the bytes once; a line that is not UTF-8 is rare.
        if let Ok(text) = PyString::from_bytes(py, line) {
            return text;
        }
    }
    let mut text = String::from_utf8_lossy(line).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    PyString::new(py, &text)
}

#[pymethods]
impl LogChunks {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next chunk of lines, as TorchX's schedulers yield them.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        loop {
            let mut chunk =
                std::mem::take(&mut *self.buffer.lock().unwrap_or_else(PoisonError::into_inner));
            chunk.clear();
            let lines = Arc::clone(&self.lines);
            let (chunk, more) = block_on(py, async move {
                let more = lines.lock().await.next_lines(&mut chunk).await;
                more.map(|more| (chunk, more))
            })?
            .map_err(to_py)?;
            if chunk.is_empty() {
                if more {
                    continue;
                }
                return Err(PyStopIteration::new_err(()));
            }
            // Room for lines of 64 bytes on average; shorter ones grow it.
            let mut lines = Vec::with_capacity(chunk.len() / 64);
            let mut start = 0;
            for end in memchr::memchr_iter(b'\n', &chunk) {
                lines.push(py_line(py, &chunk[start..=end]));
                start = end + 1;
            }
            if start < chunk.len() {
                lines.push(py_line(py, &chunk[start..]));
            }
            *self.buffer.lock().unwrap_or_else(PoisonError::into_inner) = chunk;
            return PyList::new(py, lines);
        }
    }
}

fn time_of(seconds: Option<f64>) -> PyResult<Option<SystemTime>> {
    seconds
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .ok()
                .and_then(|d| UNIX_EPOCH.checked_add(d))
                .ok_or_else(|| PyValueError::new_err(format!("{s} is not a time (unix seconds)")))
        })
        .transpose()
}

/// `scheduler.log_iter(app_id, role_name, k, regex, since, until, should_tail, streams)`: the
/// lines in chunks ([`LogChunks`]).
#[pyfunction]
#[pyo3(signature = (name, app_id, role_name, k=0, regex=None, since=None, until=None, should_tail=false, streams=None))]
#[allow(clippy::too_many_arguments)]
pub fn log_iter(
    py: Python<'_>,
    name: &str,
    app_id: &str,
    role_name: &str,
    k: u32,
    regex: Option<&str>,
    since: Option<f64>,
    until: Option<f64>,
    should_tail: bool,
    streams: Option<&str>,
) -> PyResult<LogChunks> {
    let query = LogQuery {
        regex: regex
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| PyValueError::new_err(e.to_string()))?,
        since: time_of(since)?,
        until: time_of(until)?,
        should_tail,
        streams: streams
            .map(str::parse::<Stream>)
            .transpose()
            .map_err(to_py)?,
    };
    let sched = scheduler(name)?;
    let (app_id, role) = (app_id.to_string(), role_name.to_string());
    let regex = query.regex.clone();
    let lines = block_on(py, async move {
        sched.log_iter(&app_id, &role, k, &query).await
    })?
    .map_err(to_py)?;
    Ok(LogChunks {
        lines: Arc::new(tokio::sync::Mutex::new(cooperative(lines, regex))),
        buffer: Mutex::default(),
    })
}

/// `DockerWorkspaceMixin.build_workspace_and_update_role`: the id of the image of directory
/// `workspace` built on top of `base_image` (errors name `scheduler`).
#[pyfunction]
pub fn docker_build_workspace(
    py: Python<'_>,
    scheduler: &str,
    base_image: &str,
    workspace: &str,
    quiet: bool,
) -> PyResult<String> {
    let workspace = torchx::specs::Workspace {
        projects: [(workspace.to_string(), String::new())].into(),
    };
    let (scheduler, base_image) = (scheduler.to_string(), base_image.to_string());
    block_on(py, async move {
        torchx::workspace::build_workspace_image(&base_image, &workspace, &scheduler, quiet).await
    })?
    .map_err(to_py)
}

/// `DockerWorkspaceMixin.push_images`: tags local image `local` as `repo:tag` and pushes it.
#[pyfunction]
pub fn docker_push(
    py: Python<'_>,
    scheduler: &str,
    local: &str,
    repo: &str,
    tag: &str,
) -> PyResult<()> {
    let (scheduler, local, repo, tag) = (
        scheduler.to_string(),
        local.to_string(),
        repo.to_string(),
        tag.to_string(),
    );
    block_on(py, async move {
        torchx::workspace::tag_and_push(&local, &repo, &tag, &scheduler).await
    })?
    .map_err(to_py)
}
