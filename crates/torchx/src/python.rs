//! Python interop: everything of the core that starts a Python interpreter or reads a Python
//! environment — finding the interpreter and its declared plugins (entry points,
//! `torchx_plugins` namespaces), the JSON bridge (`torchx.cli._component`) that component
//! files, trackers and named-resource plugins go through, the scheduler hosts' command lines
//! and the `torchx.cli.cmds` subcommands. Components, schedulers and trackers depend on this
//! module; it depends on none of them.
//!
//! Python component files (`torchx run ./my_component.py:train --lr 0.1`) are evaluated as
//! TorchX evaluates them: by a Python interpreter that has the `torchx` package (this project's), which
//! executes the file, checks the function like TorchX's linter, parses the arguments from its
//! annotations and docstring, calls it and hands back the AppDef as JSON. Everything after that
//! is the Rust path.
//!
//! The interpreter: `$TORCHX_PYTHON`, else the `python3` installed next to this binary (the
//! environment `pip install` put `torchx` in), else `python3` on `PATH`. The exchange is one
//! JSON document each way (`torchx.cli._component`): the request on stdin, the result
//! (`{"app": ...}`, `{"help": ...}` or `{"error": {"kind", "message"}}`) on stdout.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::specs::AppDef;

/// The module the interpreter runs.
const BRIDGE: &str = "torchx.cli._component";

/// A function in a Python file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonComponent {
    /// The file, as given (relative to the current directory or absolute).
    pub path: String,
    /// The function's name.
    pub function: String,
}

/// What evaluating a Python component gave.
#[derive(Debug, Clone, PartialEq)]
pub enum PythonOutcome {
    /// The AppDef the function returned.
    App(AppDef),
    /// `--help` was asked: the help text.
    Help(String),
}

impl PythonComponent {
    /// `path.py:function`, or `pkg.module:function` (a module on the Python path, as the
    /// nightly's finder: when no file has that path); None when `name` names neither.
    pub fn parse(name: &str) -> Option<PythonComponent> {
        let (path, function) = name.rsplit_once(':')?;
        (path.ends_with(".py") || is_module_path(path)).then(|| PythonComponent {
            path: path.to_string(),
            function: function.to_string(),
        })
    }

    /// A component of the `torchx.components` entry points, by its name (`myco.train`).
    pub fn entry_point(name: &str) -> PythonComponent {
        PythonComponent {
            path: String::new(),
            function: name.to_string(),
        }
    }

    /// `path:function`, or the entry-point component's name.
    pub fn name(&self) -> String {
        if self.path.is_empty() {
            self.function.clone()
        } else {
            format!("{}:{}", self.path, self.function)
        }
    }

    /// Evaluates the component for the command-line `args`, with `defaults` (text, from
    /// `[component:<name>]`) replacing the function's declared defaults.
    pub fn materialize(
        &self,
        args: &[String],
        defaults: &BTreeMap<String, String>,
    ) -> Result<PythonOutcome> {
        let result = self.call("materialize", args, defaults)?;
        self.outcome(result)
    }

    /// The function's source (what `torchx builtins --print` shows).
    pub fn source(&self) -> Result<String> {
        let result = self.call("source", &[], &BTreeMap::new())?;
        match result.get("source").and_then(Value::as_str) {
            Some(text) => Ok(text.to_string()),
            None => self
                .outcome(result)
                .and_then(|_| Err(Error::backend("python", "the bridge returned no source"))),
        }
    }

    fn call(
        &self,
        action: &str,
        args: &[String],
        defaults: &BTreeMap<String, String>,
    ) -> Result<Value> {
        if self.path.is_empty() {
            // An entry-point component: the bridge finds it by name.
        } else if self.function.is_empty() || !is_identifier(&self.function) {
            return Err(Error::arg(format!(
                "`{}` is not of the form `path.py:function_name`",
                self.name()
            )));
        } else if !Path::new(&self.path).is_file() && !is_module_path(&self.path) {
            return Err(Error::not_found(
                "component file",
                &self.path,
                format!(" (for `{}`)", self.name()),
            ));
        }
        let mut request = json!({
            "action": action,
            "path": self.path,
            "function": self.function,
            "args": args,
            "defaults": defaults,
        });
        if self.path.is_empty() {
            request["entry_points"] = component_entry_points();
        }
        evaluate(&request.to_string(), &self.name())
    }

    fn outcome(&self, result: Value) -> Result<PythonOutcome> {
        if let Some(help) = result.get("help").and_then(Value::as_str) {
            return Ok(PythonOutcome::Help(help.to_string()));
        }
        if let Some(app) = result.get("app") {
            let app: AppDef = serde_json::from_value(app.clone()).map_err(|e| {
                Error::spec(format!(
                    "{}: the AppDef it returned cannot be used: {e}",
                    self.name()
                ))
            })?;
            return Ok(PythonOutcome::App(app));
        }
        let error = result.get("error").cloned().unwrap_or(Value::Null);
        let raw = error["message"]
            .as_str()
            .unwrap_or("(no message)")
            .trim_end();
        let message = format!("{}: {raw}", self.name());
        Err(match error["kind"].as_str() {
            Some("not_found") => Error::not_found("component", self.name(), format!(": {raw}")),
            Some("invalid_spec") => Error::spec(message),
            _ => Error::arg(message),
        })
    }
}

/// The components of the `torchx.components` entry points as `(name, description)`, when the
/// Python environment of this binary declares any (found by reading `entry_points.txt` files,
/// so a program without plugins starts no interpreter). Empty otherwise.
pub fn entry_point_components() -> Result<Vec<(String, String)>> {
    let declared = component_entry_points();
    if declared.as_object().is_none_or(|m| m.is_empty()) {
        return Ok(Vec::new());
    }
    let result = evaluate(
        &json!({"action": "list", "entry_points": declared}).to_string(),
        "the torchx.components entry points",
    )?;
    Ok(result["components"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|c| {
                    Some((
                        c["name"].as_str()?.to_string(),
                        c["description"].as_str().unwrap_or_default().to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The `torchx.components` entry points as a JSON object `{name: module}` (passed to the bridge
/// so that it needs no importlib.metadata scan).
fn component_entry_points() -> Value {
    let found = declared_entry_points(&site_packages(), "torchx.components");
    Value::Object(
        found
            .into_iter()
            .map(|(n, v)| (n, Value::String(v)))
            .collect(),
    )
}

/// Whether the Python environment of `$TORCHX_PYTHON` or of the interpreter installed next to
/// this binary has plugins of `group`: a distribution declaring entry points of it, or modules
/// in its `torchx_plugins` namespace package (a directory check: nothing is imported).
pub(crate) fn plugins_declared(group: &str) -> bool {
    let dirs = site_packages();
    declares(&dirs, group) || has_namespace_plugins(&dirs, group)
}

/// The `torchx_plugins.<kind>` namespace package of an entry-point group (TorchX 0.8's
/// discovery channel): `torchx.schedulers` → `torchx_plugins/schedulers`.
fn namespace_dir(group: &str) -> Option<PathBuf> {
    // The plugin types of `torchx.plugins.PluginType`; components and CLI commands are
    // still entry points only.
    let kind = group.strip_prefix("torchx.")?;
    ["schedulers", "named_resources", "tracker"]
        .contains(&kind)
        .then(|| Path::new("torchx_plugins").join(kind))
}

/// Whether a directory on the import path of these site-packages (they and the directories
/// their `.pth` files add) holds a `torchx_plugins.<kind>` namespace package for `group`.
fn has_namespace_plugins(site_dirs: &[PathBuf], group: &str) -> bool {
    let Some(namespace) = namespace_dir(group).filter(|_| channels().namespace) else {
        return false;
    };
    import_path(site_dirs)
        .iter()
        .any(|dir| dir.join(&namespace).is_dir())
}

/// `$PYTHONPATH`, the site-packages directories and the directories their `.pth` files list
/// (editable installs; `import` lines are code, not directories, and are skipped).
fn import_path(site_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PYTHONPATH")
        .map(|p| std::env::split_paths(&p).filter(|d| d.is_dir()).collect())
        .unwrap_or_default();
    dirs.extend(site_dirs.iter().cloned());
    for site in site_dirs {
        for entry in std::fs::read_dir(site).into_iter().flatten().flatten() {
            if !entry.file_name().to_string_lossy().ends_with(".pth") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            for line in text.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') || line.starts_with("import") {
                    continue;
                }
                let dir = site.join(line);
                if dir.is_dir() && !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
    }
    dirs
}

/// The named resources the Python plugins add (`torchx.named_resources` entry points,
/// `torchx_plugins.named_resources` modules, `$TORCHX_CUSTOM_NAMED_RESOURCES`), for the runner
/// to hand to component builders as data. No interpreter starts unless some are declared.
pub(crate) fn plugin_named_resources() -> Result<BTreeMap<String, crate::specs::Resource>> {
    if std::env::var_os("TORCHX_CUSTOM_NAMED_RESOURCES").is_none()
        && !plugins_declared("torchx.named_resources")
    {
        return Ok(BTreeMap::new());
    }
    let request = json!({"action": "named_resources"});
    let result = evaluate(&request.to_string(), "the named-resource plugins")?;
    match result.get("resources") {
        Some(r) => serde_json::from_value(r.clone())
            .map_err(|e| Error::spec(format!("named resources from a Python plugin: {e}"))),
        None => Err(Error::spec(format!(
            "the named-resource plugins: {}",
            result["error"]["message"]
                .as_str()
                .unwrap_or("(no message)")
        ))),
    }
}

/// Runs `torchx <cmd> <args>` as a `SubCommand` of the `torchx.cli.cmds` entry points, with
/// this terminal: how it ended; `None` when no interpreter's environment declares that group.
pub fn run_subcommand(cmd: &str, args: &[String]) -> Option<Result<std::process::ExitStatus>> {
    let python = candidates()
        .into_iter()
        .map(|(p, _)| p)
        .find(|p| declares(&site_packages_of(p), "torchx.cli.cmds"))?;
    let status = Command::new(&python)
        .args(["-c", &run_main("torchx.cli._subcommand")])
        .arg(cmd)
        .args(args)
        .status();
    Some(status.map_err(|e| Error::io(format!("running {}", python.display()), e)))
}

/// The `python -c` program running `module`'s `main()` as the exit status. `-c` rather than
/// `-m`: runpy's imports would cost a few milliseconds per command.
fn run_main(module: &str) -> String {
    format!("import sys; from {module} import main; sys.exit(main())")
}

/// `run_main` for a scheduler host, whose imports must not depend on the working directory
/// (`-c` puts it first on `sys.path`; TorchX's console script does not): the same plugin in
/// every directory, and a warm host serves commands from any of them.
pub(crate) fn python_main(module: &str) -> String {
    format!(
        "import sys; sys.path[0] == '' and sys.path.pop(0); from {module} import main; sys.exit(main())"
    )
}

fn declares(dirs: &[PathBuf], group: &str) -> bool {
    !declared_names(dirs, group).is_empty()
}

/// Which plugin channels `TORCHX_PLUGINS_SOURCE` turns on (as `torchx.plugins.registry()`
/// reads it: 0 none, 1 namespace packages, 2 entry points, 3 both, the default). A value it
/// refuses leaves both on here: the Python side reports it where a plugin is loaded.
#[derive(Debug, Clone, Copy)]
struct Channels {
    namespace: bool,
    entry_points: bool,
}

fn channels() -> Channels {
    let bits = std::env::var("TORCHX_PLUGINS_SOURCE")
        .ok()
        .and_then(|v| v.trim().parse::<u8>().ok())
        .filter(|v| *v <= 3)
        .unwrap_or(3);
    Channels {
        namespace: bits & 1 != 0,
        entry_points: bits & 2 != 0,
    }
}

/// The entry points `(name, object reference)` of `group` declared by the distributions in
/// `dirs` (read from their `entry_points.txt`, INI sections of `name = module:attr` lines).
/// None for the plugin groups when `TORCHX_PLUGINS_SOURCE` turns entry points off.
fn declared_entry_points(dirs: &[PathBuf], group: &str) -> Vec<(String, String)> {
    if namespace_dir(group).is_some() && !channels().entry_points {
        return Vec::new();
    }
    let header = format!("[{group}]");
    let mut found: Vec<(String, String)> = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if !entry.file_name().to_string_lossy().ends_with(".dist-info") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path().join("entry_points.txt")) else {
                continue;
            };
            let mut inside = false;
            for line in text.lines().map(str::trim) {
                if line.starts_with('[') {
                    inside = line == header;
                } else if inside {
                    if let Some((name, value)) = line.split_once('=') {
                        let name = name.trim().to_string();
                        if !name.is_empty() && !found.iter().any(|(n, _)| *n == name) {
                            found.push((name, value.trim().to_string()));
                        }
                    }
                }
            }
        }
    }
    found
}

fn declared_names(dirs: &[PathBuf], group: &str) -> Vec<String> {
    declared_entry_points(dirs, group)
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// The names of `group`'s plugins (schedulers, trackers) in the environments of the candidate
/// interpreters: read from `entry_points.txt` files, and, where a `torchx_plugins` namespace
/// package of the group is installed, asked of that interpreter's `torchx.plugins.registry()`
/// (its plugins' names are in their decorators). A registry that cannot be read is reported
/// as a warning: commands that do not need the plugin keep working.
pub(crate) fn plugin_names(group: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (python, _) in candidates() {
        let dirs = site_packages_of(&python);
        let found = if has_namespace_plugins(&dirs, group) {
            match namespace_names(&python, group) {
                Ok(found) => found,
                Err(e) => {
                    log::warn!("the {group} plugins of {}: {e}", python.display());
                    declared_names(&dirs, group)
                }
            }
        } else {
            declared_names(&dirs, group)
        };
        for name in found {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The plugin names `torchx.plugins.registry()` of `python` finds for `group`.
fn namespace_names(python: &Path, group: &str) -> Result<Vec<String>> {
    let request = json!({"action": "plugin_names", "group": group}).to_string();
    let answer = run_bridge(python, &request).map_err(|a| match a {
        Attempt::Failed(e) => e,
        Attempt::Unusable(why) => Error::backend("python", why),
    })?;
    Ok(answer["names"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(String::from))
        .collect())
}

/// The interpreter and the host's arguments (`<name> [<module:attr>]`) that serve Python
/// scheduler `name` over the scheduler-plugin protocol: one of the `torchx.schedulers` entry points, or, where a `torchx_plugins.schedulers`
/// namespace package is installed, whatever its registry finds by that name (the host says
/// `not_found` if it finds nothing).
pub(crate) fn python_scheduler_host(name: &str) -> Option<(PathBuf, Vec<String>)> {
    const GROUP: &str = "torchx.schedulers";
    candidates().into_iter().find_map(|(python, _)| {
        let dirs = site_packages_of(&python);
        let declared = declared_entry_points(&dirs, GROUP)
            .into_iter()
            .find(|(n, _)| n == name);
        let args = match declared {
            // The entry point's target is passed along: the host imports it without scanning
            // every installed distribution (importlib.metadata costs ~40 ms per process).
            Some((_, target)) => vec![name.into(), target],
            None if has_namespace_plugins(&dirs, GROUP) => vec![name.into()],
            None => return None,
        };
        Some((python, args))
    })
}

/// `<prefix>/lib/python3*/site-packages` of the interpreter at `python`.
fn site_packages_of(python: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(prefix) = python.parent().and_then(Path::parent) {
        for entry in std::fs::read_dir(prefix.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.file_name().to_string_lossy().starts_with("python3") {
                let dir = entry.path().join("site-packages");
                if dir.is_dir() {
                    out.push(dir);
                }
            }
        }
    }
    out
}

/// `<prefix>/lib/python3*/site-packages` of the interpreters `candidates` names by path.
fn site_packages() -> Vec<PathBuf> {
    candidates()
        .iter()
        .flat_map(|(python, _)| site_packages_of(python))
        .collect()
}

/// Whether `path` reads as a dotted Python module path (`pkg.module`) that is not a file here:
/// not `.py`, not a component or AppDef file's extension, every part an identifier.
fn is_module_path(path: &str) -> bool {
    const FILES: [&str; 5] = [".py", ".toml", ".yaml", ".yml", ".json"];
    !FILES.iter().any(|ext| path.ends_with(ext))
        && path.split('.').all(is_identifier)
        && !Path::new(path).exists()
}

/// Whether `name` reads as `pkg.module.function` (a function by its module path, without the
/// colon): dotted identifiers, at least two.
pub(crate) fn is_module_function(name: &str) -> bool {
    name.contains('.') && name.split('.').all(is_identifier)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// The interpreters to try, in order, each with how it was found.
fn candidates() -> Vec<(PathBuf, String)> {
    if let Some(p) = std::env::var_os("TORCHX_PYTHON") {
        return vec![(
            PathBuf::from(&p),
            format!("$TORCHX_PYTHON={}", p.to_string_lossy()),
        )];
    }
    let mut out = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        for name in ["python3", "python"] {
            let p = dir.join(name);
            if p.is_file() {
                out.push((p.clone(), format!("{} (next to this torchx)", p.display())));
                break;
            }
        }
    }
    out.push((PathBuf::from("python3"), "python3 on PATH".to_string()));
    out
}

/// One call of the Python bridge (`torchx.cli._component`) with `request`, by the first
/// interpreter that has this project's package; `what` names the caller in errors.
pub(crate) fn python_bridge(request: &Value, what: &str) -> Result<Value> {
    evaluate(&request.to_string(), what)
}

/// Runs the bridge with `request` on the first interpreter that has this project's `torchx`.
fn evaluate(request: &str, component: &str) -> Result<Value> {
    let mut tried = Vec::new();
    for (python, how) in candidates() {
        match run_bridge(&python, request) {
            Ok(value) => return Ok(value),
            Err(Attempt::Unusable(why)) => tried.push(format!("{how}: {why}")),
            Err(Attempt::Failed(e)) => return Err(e),
        }
    }
    Err(Error::config(format!(
        "no Python interpreter with this project's `torchx` package to evaluate {component} \
             (tried {}): install the `torchx` distribution of this project in the Python you \
             use (`pip install ./crates/torchx-cli .` from its source tree), or set \
             TORCHX_PYTHON to an interpreter that has it",
        tried.join("; ")
    ))
    .with_kind(ErrorKind::NotFound))
}

enum Attempt {
    /// This interpreter cannot evaluate components; try the next.
    Unusable(String),
    /// It could, and the evaluation failed.
    Failed(Error),
}

fn run_bridge(python: &Path, request: &str) -> std::result::Result<Value, Attempt> {
    let mut child = match Command::new(python)
        .args(["-c", &run_main(BRIDGE)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Attempt::Unusable("not found".into()))
        }
        Err(e) => return Err(Attempt::Unusable(e.to_string())),
    };
    // The request is small; the bridge reads it whole before writing anything.
    if let Some(mut stdin) = child.stdin.take() {
        if let Err(e) = stdin.write_all(request.as_bytes()) {
            // A bridge that exits at once (no torchx) closes its stdin: judged by its output.
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(Attempt::Failed(Error::io(
                    format!("writing to {}", python.display()),
                    e,
                )));
            }
        }
    }
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let limit = bridge_timeout();
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Attempt::Failed(Error::backend(
                    "python",
                    format!(
                        "{} (running {BRIDGE}) gave no answer within {} s \
                         (TORCHX_PLUGIN_TIMEOUT); it was killed",
                        python.display(),
                        limit.as_secs_f64()
                    ),
                )));
            }
            Err(e) => {
                return Err(Attempt::Failed(Error::io(
                    format!("waiting for {}", python.display()),
                    e,
                )))
            }
        }
    };
    let out_bytes = collected(stdout);
    let stderr = String::from_utf8_lossy(&collected(stderr)).into_owned();
    match serde_json::from_slice::<Value>(&out_bytes) {
        Ok(value) if value.is_object() => {
            // What the component printed while it ran goes where the user sees it.
            if !stderr.is_empty() {
                eprint!("{stderr}");
            }
            Ok(value)
        }
        _ if stderr.contains("No module named 'torchx'") => {
            Err(Attempt::Unusable("has no torchx package".into()))
        }
        _ if stderr.contains(&format!("No module named '{BRIDGE}'"))
            || stderr.contains("No module named 'torchx.cli") =>
        {
            Err(Attempt::Unusable(
                "its torchx is not this project's (upstream TorchX?)".into(),
            ))
        }
        _ => Err(Attempt::Failed(Error::backend(
            "python",
            format!(
                "{} (running {BRIDGE}) exited with {} without a result: {}",
                python.display(),
                status,
                stderr.trim()
            ),
        ))),
    }
}

/// How long the bridge may take: `TORCHX_PLUGIN_TIMEOUT` seconds (as scheduler plugins), else
/// 120 s.
fn bridge_timeout() -> std::time::Duration {
    std::env::var("TORCHX_PLUGIN_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(
            std::time::Duration::from_secs(120),
            std::time::Duration::from_secs_f64,
        )
}

/// Reads a pipe to its end on a thread (so a chatty bridge never blocks on a full pipe).
fn drain<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
    }
    rx
}

/// What a drained pipe held; bounded, since something the bridge started could hold it open.
fn collected(rx: std::sync::mpsc::Receiver<Vec<u8>>) -> Vec<u8> {
    rx.recv_timeout(std::time::Duration::from_secs(1))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_files_and_module_paths_are_python_components() {
        assert_eq!(
            PythonComponent::parse("./c.py:train"),
            Some(PythonComponent {
                path: "./c.py".into(),
                function: "train".into()
            })
        );
        assert_eq!(PythonComponent::parse("c.toml:train"), None);
        assert_eq!(PythonComponent::parse("./c.txt:train"), None);
        assert_eq!(PythonComponent::parse("dist.ddp"), None);
        assert_eq!(
            PythonComponent::parse("my_pkg.train:main"),
            Some(PythonComponent {
                path: "my_pkg.train".into(),
                function: "main".into()
            })
        );
        assert_eq!(PythonComponent::parse("my-pkg.train:main"), None);
        assert!(!is_identifier("a-b") && !is_identifier("1a") && is_identifier("_train2"));
    }

    #[test]
    fn results_map_to_error_kinds() {
        let c = PythonComponent::parse("c.py:f").unwrap();
        let err = |kind: &str| {
            c.outcome(json!({"error": {"kind": kind, "message": "boom"}}))
                .unwrap_err()
                .kind()
        };
        use crate::error::ErrorKind;
        assert_eq!(err("not_found"), ErrorKind::NotFound);
        assert_eq!(err("invalid_spec"), ErrorKind::InvalidSpec);
        assert_eq!(err("invalid_argument"), ErrorKind::InvalidArgument);
        assert_eq!(
            c.outcome(json!({"help": "usage"})).unwrap(),
            PythonOutcome::Help("usage".into())
        );
    }
}
