//! Arrays and sweeps for the Python Runner: the core's planning, native submission, records and
//! status of groups (`torchx.runner.groups` calls these). Records cross as plain values in the
//! crate's serde shape and are saved as the same files `torchx run --array` writes, so the CLI
//! and Python see one another's groups.

use pyo3::prelude::*;
use serde::Deserialize;
use serde_json::{json, Value};
use torchx::config::TorchxConfig;
use torchx::group::Task;
use torchx::group::{self, GroupPlan, GroupRecord, GroupSpec};
use torchx::scheduler::Registry;
use torchx::specs::AppState;

use crate::data::Data;
use crate::schedulers::{block_on, take_info, to_py, DryRun};

/// A runner of the builtin schedulers in session `session` (it reads no config files).
pub(crate) fn runner(session: &str) -> torchx::Runner {
    torchx::Runner::new(Registry::builtin(), TorchxConfig::default()).with_session_name(session)
}

/// The tasks of an array or sweep (the keywords of `Runner.run_component`), each with `args`
/// substituted (`${array_index}`, `${sweep.KEY}`) and its variables (`env`):
/// `{"spec", "max_concurrent", "tasks": [{"index", "params", "args", "env"}]}`.
#[pyfunction]
#[pyo3(signature = (args, array=None, sweep=Vec::new(), sweep_file=None, max_concurrent=None))]
pub fn group_plan(
    args: Vec<String>,
    array: Option<String>,
    sweep: Vec<String>,
    sweep_file: Option<String>,
    max_concurrent: Option<u32>,
) -> PyResult<Data<Value>> {
    let spec = GroupSpec {
        array,
        sweep,
        sweep_file,
        max_concurrent,
    };
    let (tasks, spec, cap) = spec.plan().map_err(to_py)?;
    let size = tasks.len();
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|t| {
            let args: Vec<String> = args.iter().map(|a| t.substitute(a)).collect();
            json!({"index": t.index, "params": t.params, "args": args, "env": t.env(size)})
        })
        .collect();
    Ok(Data(
        json!({"spec": spec, "max_concurrent": cap, "tasks": tasks}),
    ))
}

/// What `schedule_group` submits: the component and its arguments, the group's spec and cap,
/// and the tasks (`index`, `params`) in the order of their dry runs.
#[derive(Deserialize)]
pub struct PlannedGroup {
    component: String,
    args: Vec<String>,
    spec: String,
    max_concurrent: Option<u32>,
    tasks: Vec<Task>,
}

/// Submits the tasks' dry runs (each from `submit_dryrun`, in the order of `plan`'s tasks) as
/// one group in session `session`: one native array when their scheduler has them, else one
/// submission each. Returns the group's record.
#[pyfunction]
pub fn schedule_group(
    py: Python<'_>,
    session: &str,
    dryruns: Vec<PyRef<'_, DryRun>>,
    plan: Data<PlannedGroup>,
) -> PyResult<Data<GroupRecord>> {
    let Data(PlannedGroup {
        component,
        args,
        spec,
        max_concurrent,
        tasks,
    }) = plan;
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
        component,
        args,
        size: tasks.len(),
        tasks: tasks.clone(),
        spec,
        max_concurrent,
        argv: Vec::new(),
        parent: None,
    };
    let runner = runner(session);
    let tasks = tasks.into_iter().zip(infos).collect();
    block_on(py, async {
        let dryrun = runner.group_dryrun_of(tasks, plan.max_concurrent).await?;
        runner.schedule_group(&plan, dryrun).await
    })?
    .map_err(to_py)
    .map(Data)
}

/// Writes a group's record to this machine's torchx state directory: groups of schedulers
/// written in Python, which the Python Runner submits itself.
#[pyfunction]
pub fn save_group(record: Data<GroupRecord>) -> PyResult<()> {
    record
        .0
        .save(&torchx::schedulers::default_state_dir())
        .map_err(to_py)
}

/// What `handle` names, as the library's one dispatch decides for every caller
/// ([`torchx::Runner::named`]): `("pipeline", None)` (its holder started again if it died;
/// also for a pipeline with no record here, which its own calls report), `("group", record)`
/// or `("app", None)`. A group handle with no record here is `torchx.errors` NotFound.
#[pyfunction]
pub fn named(py: Python<'_>, handle: &str) -> PyResult<(&'static str, Option<Data<GroupRecord>>)> {
    use torchx::runner::Named;
    let runner = runner("torchx");
    Ok(match block_on(py, runner.named(handle))? {
        Ok(Named::Pipeline(_)) => ("pipeline", None),
        Err(e)
            if e.kind() == torchx::ErrorKind::NotFound
                && torchx::pipeline::is_pipeline_handle(handle) =>
        {
            ("pipeline", None)
        }
        Ok(Named::Group(record)) => ("group", Some(Data(record))),
        Ok(Named::App) => ("app", None),
        Err(e) => return Err(to_py(e)),
    })
}

/// Each task's state of a group of a builtin scheduler (one `describe_many`), as state names.
#[pyfunction]
pub fn group_states(py: Python<'_>, record: Data<GroupRecord>) -> PyResult<Vec<String>> {
    let Data(record) = record;
    let runner = runner(&record.session);
    let states = block_on(py, runner.group_states(&record))?.map_err(to_py)?;
    Ok(states.iter().map(ToString::to_string).collect())
}

/// A group's state from its tasks' (state names): RUNNING while any runs, SUCCEEDED only if
/// all did.
#[pyfunction]
pub fn group_state(states: Data<Vec<AppState>>) -> String {
    group::group_state(&states.0).to_string()
}

/// Cancels every unfinished task of a group of a builtin scheduler.
#[pyfunction]
pub fn cancel_group(py: Python<'_>, record: Data<GroupRecord>) -> PyResult<()> {
    let Data(record) = record;
    let runner = runner(&record.session);
    block_on(py, runner.cancel_group(&record))?.map_err(to_py)
}

/// Deletes every task of a group of a builtin scheduler, then its record.
#[pyfunction]
pub fn delete_group(py: Python<'_>, record: Data<GroupRecord>) -> PyResult<()> {
    let Data(record) = record;
    let runner = runner(&record.session);
    block_on(py, runner.delete_group(&record))?.map_err(to_py)
}
