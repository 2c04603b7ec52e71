//! `torchx._rs`: the Rust rules the Python package calls, so that each rule has one
//! implementation. Values cross as Python strings, lists and tuples, or as plain Python values
//! in the serde shape of the `torchx` crate's types ([`data::Data`]); the Python package turns
//! them into TorchX's dataclasses and exceptions. Nothing here holds state.

mod data;
mod groups;
mod pipelines;
mod schedulers;
mod status;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;

use data::Data;
use torchx::specs::{self, AppDef, AppState, Mount, Resource, RoleStatus};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// `scheduler://session/app_id` → `(scheduler, session, app_id)`; ValueError if malformed.
#[pyfunction]
fn parse_app_handle(handle: &str) -> PyResult<(String, String, String)> {
    let h = specs::parse_app_handle(handle).map_err(value_error)?;
    Ok((
        h.scheduler().into(),
        h.session_name().into(),
        h.app_id().into(),
    ))
}

/// TorchX's `--mounts` grammar → a list of mounts (`{"type": "bind"|"volume"|"device", ...}`).
/// KeyError for an unknown, misplaced or missing option key, ValueError for a bad value (as
/// TorchX).
#[pyfunction]
#[pyo3(signature = (opts, home=None))]
fn parse_mounts(opts: Vec<String>, home: Option<&str>) -> PyResult<Data<Vec<Mount>>> {
    specs::parse_mounts_detailed(&opts, home)
        .map(Data)
        .map_err(|e| match e {
            specs::MountError::Key(msg) => PyKeyError::new_err(msg),
            specs::MountError::Value(msg) => PyValueError::new_err(msg),
        })
}

/// The builtin named resources' names, in TorchX's order.
#[pyfunction]
fn named_resource_names() -> Vec<&'static str> {
    specs::named_resource_names().collect()
}

/// A builtin named resource (`cpu`, `gpu`, `memMB`, `capabilities`, `devices`); KeyError if
/// there is none by that name.
#[pyfunction]
fn named_resource(name: &str) -> PyResult<Data<Resource>> {
    specs::named_resource(name)
        .map(Data)
        .map_err(|e| PyKeyError::new_err(e.to_string()))
}

/// TorchX's `AppStatus.format(filter_roles)`, the text of `torchx status`, for the status
/// `(state, num_restarts, msg, structured_error_msg, ui_url, roles)`; `roles` is a list of
/// `RoleStatus`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn format_status(
    state: &str,
    num_restarts: i64,
    msg: String,
    structured_error_msg: String,
    ui_url: Option<String>,
    roles: Data<Vec<RoleStatus>>,
    filter_roles: Vec<String>,
) -> PyResult<String> {
    let mut status = specs::AppStatus::new(state.parse::<AppState>().map_err(value_error)?);
    status.num_restarts = num_restarts;
    status.msg = msg;
    status.structured_error_msg = structured_error_msg;
    status.ui_url = ui_url;
    status.roles = roles.0;
    Ok(status.format(&filter_roles))
}

/// `string.Template(template).safe_substitute(values)`, as the Rust macros apply it.
#[pyfunction]
fn substitute(template: &str, values: std::collections::HashMap<String, String>) -> String {
    specs::substitute(template, |name| values.get(name).cloned())
}

/// A builtin component's AppDef from command-line style arguments, or its help text:
/// `(app, None)` or `(None, text)`. `defaults` are `[component:<name>]`-style
/// parameter defaults.
#[pyfunction]
#[pyo3(signature = (name, args, defaults=None))]
fn build_component(
    name: &str,
    args: Vec<String>,
    defaults: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<(Option<Data<AppDef>>, Option<String>)> {
    let component = torchx::components::builtins()
        .into_iter()
        .find(|c| c.name == name)
        .ok_or_else(|| PyKeyError::new_err(format!("no builtin component `{name}`")))?;
    let env = torchx::components::ComponentEnv::from_process();
    match component
        .materialize(&args, &defaults.unwrap_or_default(), &env)
        .map_err(schedulers::to_py)?
    {
        Some(app) => Ok((Some(Data(app)), None)),
        None => Ok((None, Some(component.help(&Default::default())))),
    }
}

/// TorchX's `k1=v1,k2=v2` grammar (`;` also separates; the last separator before a key
/// splits pairs, so list values keep theirs): the pairs in order, values uncast.
#[pyfunction]
fn parse_kv(text: &str) -> PyResult<Vec<(String, String)>> {
    torchx::opts::parse_kv(text).map_err(value_error)
}

/// TorchX's `AppStatus._format_error_message`: the interesting part of an error message,
/// wrapped at `width` with `header` before the first line.
#[pyfunction]
fn format_error_message(msg: &str, header: &str, width: usize) -> String {
    specs::wrap_error_message(msg, header, width)
}

/// `dist.ddp`'s `-j` → `(min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)`; ValueError if
/// malformed.
#[pyfunction]
fn parse_nnodes(j: &str) -> PyResult<(u32, u32, u32, String)> {
    let n = torchx::components::parse_nnodes(j).map_err(value_error)?;
    Ok((n.min_nnodes, n.max_nnodes, n.nproc_per_node, n.nnodes_rep))
}

/// The trackers a launch uses and their configs: `[torchx:tracker]`/`TORCHX_TRACKERS` with
/// `[tracker:<name>] config`/`TORCHX_TRACKER_<NAME>_CONFIG`, from the `.torchxconfig` files
/// the CLI reads. ValueError for an unreadable config.
#[pyfunction]
fn configured_trackers() -> PyResult<Vec<(String, Option<String>)>> {
    let config = torchx::config::TorchxConfig::discover().map_err(value_error)?;
    Ok(torchx::tracker::configured(&config))
}

/// A config section: its name and `(key, value)` pairs.
type IniSection = (String, Vec<(String, String)>);

/// `.torchxconfig` text parsed as the CLI parses it (configparser semantics, case-sensitive
/// keys): `[(section, [(key, value)])]` in file order, `[DEFAULT]` keys merged into every
/// section. ValueError naming `origin` and the line for malformed text.
#[pyfunction]
fn parse_ini(text: &str, origin: &str) -> PyResult<Vec<IniSection>> {
    let ini = torchx::config::parse_ini(text, origin).map_err(value_error)?;
    Ok(ini
        .sections
        .iter()
        .filter(|(name, _)| name != "DEFAULT")
        .map(|(name, _)| (name.clone(), ini.section(name).unwrap_or_default()))
        .collect())
}

/// The builtin components' names (`dist.ddp`, `utils.echo`, ...).
#[pyfunction]
fn builtin_component_names() -> Vec<String> {
    torchx::components::builtin_names()
}

/// The environment `dist.ddp --debug` sets.
#[pyfunction]
fn torch_debug_flags() -> Vec<(&'static str, &'static str)> {
    torchx::components::DEBUG_FLAGS.to_vec()
}

/// Slurm job state → TorchX state name, for every state the core maps (`SLURM_STATES`).
#[pyfunction]
fn slurm_states() -> Vec<(&'static str, &'static str)> {
    torchx::schedulers::slurm::KNOWN_STATES
        .iter()
        .map(|s| (*s, torchx::schedulers::slurm::app_state(s).as_str()))
        .collect()
}

/// A Docker container's TorchX state name (`exit_code` decides an exited one).
#[pyfunction]
#[pyo3(signature = (status, exit_code=None))]
fn docker_container_state(status: &str, exit_code: Option<i64>) -> &'static str {
    torchx::schedulers::local_docker::container_state(status, exit_code).as_str()
}

/// Makes `path` local_cwd's supervisor for apps this process starts (`TORCHX_SUPERVISOR` wins).
#[pyfunction]
fn use_supervisor(path: &str) {
    torchx::schedulers::local_cwd::use_supervisor(path.into());
}

/// The core's state directory (`TORCHX_STATE_DIR`, else `$XDG_STATE_HOME/torchx`, else
/// `~/.local/state/torchx`), where its ledger, groups and `torchx.futures`' calls live.
#[pyfunction]
fn state_dir() -> std::path::PathBuf {
    torchx::schedulers::default_state_dir()
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _rs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_app_handle, m)?)?;
    m.add_function(wrap_pyfunction!(parse_mounts, m)?)?;
    m.add_function(wrap_pyfunction!(named_resource_names, m)?)?;
    m.add_function(wrap_pyfunction!(named_resource, m)?)?;
    m.add_function(wrap_pyfunction!(format_status, m)?)?;
    m.add_function(wrap_pyfunction!(substitute, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(state_dir, m)?)?;
    m.add_function(wrap_pyfunction!(use_supervisor, m)?)?;
    m.add_function(wrap_pyfunction!(slurm_states, m)?)?;
    m.add_function(wrap_pyfunction!(docker_container_state, m)?)?;
    m.add_function(wrap_pyfunction!(build_component, m)?)?;
    m.add_function(wrap_pyfunction!(parse_kv, m)?)?;
    m.add_function(wrap_pyfunction!(parse_nnodes, m)?)?;
    m.add_function(wrap_pyfunction!(format_error_message, m)?)?;
    m.add_function(wrap_pyfunction!(torch_debug_flags, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_component_names, m)?)?;
    m.add_function(wrap_pyfunction!(configured_trackers, m)?)?;
    m.add_function(wrap_pyfunction!(parse_ini, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::scheduler_backends, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::run_opts, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::submit_dryrun, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::schedule, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::describe, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::describe_native, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::build_workspace, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::list, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::cancel, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::delete, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::log_iter, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::docker_build_workspace, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers::docker_push, m)?)?;
    m.add_function(wrap_pyfunction!(groups::group_plan, m)?)?;
    m.add_function(wrap_pyfunction!(groups::schedule_group, m)?)?;
    m.add_function(wrap_pyfunction!(groups::save_group, m)?)?;
    m.add_function(wrap_pyfunction!(groups::named, m)?)?;
    m.add_function(wrap_pyfunction!(groups::group_states, m)?)?;
    m.add_function(wrap_pyfunction!(groups::group_state, m)?)?;
    m.add_function(wrap_pyfunction!(groups::cancel_group, m)?)?;
    m.add_function(wrap_pyfunction!(groups::delete_group, m)?)?;
    m.add_function(wrap_pyfunction!(pipelines::pipeline_status, m)?)?;
    m.add_function(wrap_pyfunction!(pipelines::pipeline_steps, m)?)?;
    m.add_function(wrap_pyfunction!(pipelines::cancel_pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(pipelines::delete_pipeline, m)?)?;
    m.add_class::<schedulers::DryRun>()?;
    m.add_class::<schedulers::LogChunks>()?;
    m.add_class::<status::Described>()?;
    m.add_class::<status::RoleInfo>()?;
    m.add_class::<status::ReplicaInfo>()?;
    m.add_class::<status::AttemptInfo>()?;
    m.add_class::<status::Listed>()?;
    Ok(())
}
