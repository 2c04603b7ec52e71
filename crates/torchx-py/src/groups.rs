//! Arrays and sweeps for the Python Runner: the core's planning, native submission, records and
//! status of groups (`torchx.runner.groups` calls these). Records are JSON in the crate's serde
//! shape; the same files `torchx run --array` writes, so the CLI and Python see one another's
//! groups.

use pyo3::prelude::*;
use serde_json::json;
use torchx::config::TorchxConfig;
use torchx::group::Task;
use torchx::group::{self, GroupPlan, GroupRecord, GroupSpec};
use torchx::scheduler::Registry;
use torchx::specs::AppState;

use crate::schedulers::{block_on, json_err, take_info, to_py, DryRun};

/// A runner of the builtin schedulers in session `session` (it reads no config files).
fn runner(session: &str) -> torchx::Runner {
    torchx::Runner::new(Registry::builtin(), TorchxConfig::default()).with_session_name(session)
}

/// The tasks of an array or sweep (the keywords of `Runner.run_component`), each with `args`
/// substituted (`${array_index}`, `${sweep.KEY}`) and its variables (`env`), as JSON:
/// `{"spec", "max_concurrent", "tasks": [{"index", "params", "args", "env"}]}`.
#[pyfunction]
#[pyo3(signature = (args, array=None, sweep=Vec::new(), sweep_file=None, max_concurrent=None))]
pub fn group_plan(
    args: Vec<String>,
    array: Option<String>,
    sweep: Vec<String>,
    sweep_file: Option<String>,
    max_concurrent: Option<u32>,
) -> PyResult<String> {
    let spec = GroupSpec {
        array,
        sweep,
        sweep_file,
        max_concurrent,
    };
    let (tasks, spec, cap) = spec.plan().map_err(to_py)?;
    let size = tasks.len();
    let tasks: Vec<serde_json::Value> = tasks
        .iter()
        .map(|t| {
            let args: Vec<String> = args.iter().map(|a| t.substitute(a)).collect();
            json!({"index": t.index, "params": t.params, "args": args, "env": t.env(size)})
        })
        .collect();
    Ok(json!({"spec": spec, "max_concurrent": cap, "tasks": tasks}).to_string())
}

/// Submits the tasks' dry runs (each from `submit_dryrun`, in the order of `plan_json`'s
/// tasks) as one group in session `session`: one native array when their scheduler has them,
/// else one submission each. `plan_json`: `{"component", "args", "spec", "max_concurrent",
/// "tasks": [{"index", "params"}]}`. Returns the group's record as JSON.
#[pyfunction]
pub fn schedule_group(
    py: Python<'_>,
    session: &str,
    dryruns: Vec<PyRef<'_, DryRun>>,
    plan_json: &str,
) -> PyResult<String> {
    let p: serde_json::Value = serde_json::from_str(plan_json).map_err(json_err)?;
    let text = |key: &str| p[key].as_str().unwrap_or_default().to_string();
    let tasks: Vec<Task> = serde_json::from_value(p["tasks"].clone()).map_err(json_err)?;
    let args: Vec<String> = serde_json::from_value(p["args"].clone()).map_err(json_err)?;
    let max_concurrent = p["max_concurrent"]
        .as_u64()
        .and_then(|k| u32::try_from(k).ok());
    if tasks.len() != dryruns.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{} tasks but {} dry runs",
            tasks.len(),
            dryruns.len()
        )));
    }
    let mut infos = Vec::with_capacity(dryruns.len());
    for d in &dryruns {
        infos.push(take_info(d)?);
    }
    let plan = GroupPlan {
        component: text("component"),
        args,
        tasks: tasks.clone(),
        spec: text("spec"),
        max_concurrent,
        argv: Vec::new(),
        parent: None,
    };
    let runner = runner(session);
    let tasks = tasks.into_iter().zip(infos).collect();
    let record = block_on(py, async {
        let dryrun = runner.group_dryrun_of(tasks, plan.max_concurrent).await?;
        runner.schedule_group(&plan, dryrun).await
    })?
    .map_err(to_py)?;
    serde_json::to_string(&record).map_err(json_err)
}

/// Writes a group's record (JSON) to this machine's torchx state directory: groups of
/// schedulers written in Python, which the Python Runner submits itself.
#[pyfunction]
pub fn save_group(record_json: &str) -> PyResult<()> {
    let record: GroupRecord = serde_json::from_str(record_json).map_err(json_err)?;
    record
        .save(&torchx::schedulers::default_state_dir())
        .map_err(to_py)
}

/// The record (JSON) of the group `handle` names; `None` for an app's handle. A group handle
/// with no record here is `torchx.errors` NotFound.
#[pyfunction]
pub fn find_group(handle: &str) -> PyResult<Option<String>> {
    match GroupRecord::find(handle).map_err(to_py)? {
        Some(g) => serde_json::to_string(&g).map(Some).map_err(json_err),
        None => Ok(None),
    }
}

/// Each task's state of a group of a builtin scheduler (one `describe_many`), as state names.
#[pyfunction]
pub fn group_states(py: Python<'_>, record_json: &str) -> PyResult<Vec<String>> {
    let record: GroupRecord = serde_json::from_str(record_json).map_err(json_err)?;
    let runner = runner(&record.session);
    let states = block_on(py, runner.group_states(&record))?.map_err(to_py)?;
    Ok(states.iter().map(ToString::to_string).collect())
}

/// A group's state from its tasks' (state names): RUNNING while any runs, SUCCEEDED only if
/// all did.
#[pyfunction]
pub fn group_state(states: Vec<String>) -> PyResult<String> {
    let states = states
        .into_iter()
        .map(|s| serde_json::from_value::<AppState>(serde_json::Value::String(s)).map_err(json_err))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(group::group_state(&states).to_string())
}

/// Cancels every unfinished task of a group of a builtin scheduler.
#[pyfunction]
pub fn cancel_group(py: Python<'_>, record_json: &str) -> PyResult<()> {
    let record: GroupRecord = serde_json::from_str(record_json).map_err(json_err)?;
    let runner = runner(&record.session);
    block_on(py, runner.cancel_group(&record))?.map_err(to_py)
}

/// Deletes every task of a group of a builtin scheduler, then its record.
#[pyfunction]
pub fn delete_group(py: Python<'_>, record_json: &str) -> PyResult<()> {
    let record: GroupRecord = serde_json::from_str(record_json).map_err(json_err)?;
    let runner = runner(&record.session);
    block_on(py, runner.delete_group(&record))?.map_err(to_py)
}
