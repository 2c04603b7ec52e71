//! Pipelines for the Python Runner (`torchx.runner.pipelines` calls these): their status,
//! steps, cancel and delete, from the same records and through the same library calls as the
//! CLI's. A pipeline is started by the `torchx` command, whose detached holder submits it.

use pyo3::prelude::*;
use torchx::pipeline::PipelineRecord;
use torchx::runner::Named;

use crate::schedulers::{block_on, to_py};

/// One step as Python's `PipelineStep` takes it: name, scheduler, state, job handle, message.
type Step = (String, String, String, Option<String>, String);

/// The builtin schedulers' runner (a pipeline's steps name their own sessions).
fn runner() -> torchx::Runner {
    crate::groups::runner("torchx")
}

/// The pipeline `handle` names, read through the one dispatch (its holder started again if it
/// died); `None` when none is recorded here.
async fn recorded(runner: &torchx::Runner, handle: &str) -> torchx::Result<Option<PipelineRecord>> {
    match runner.named(handle).await {
        Ok(Named::Pipeline(record)) => Ok(Some(record)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == torchx::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The pipeline's state name and message (its steps' counts); `None` if it is not recorded
/// here.
#[pyfunction]
pub fn pipeline_status(py: Python<'_>, handle: &str) -> PyResult<Option<(String, String)>> {
    let runner = runner();
    block_on(py, async {
        let Some(record) = recorded(&runner, handle).await? else {
            return Ok(None);
        };
        let status = runner.pipeline_status(&record).await?;
        Ok(Some((status.state.to_string(), status.msg)))
    })?
    .map_err(to_py)
}

/// Each step of the pipeline; `None` if it is not recorded here.
#[pyfunction]
pub fn pipeline_steps(py: Python<'_>, handle: &str) -> PyResult<Option<Vec<Step>>> {
    let runner = runner();
    block_on(py, async {
        let Some(record) = recorded(&runner, handle).await? else {
            return Ok(None);
        };
        let steps = runner.pipeline_steps(&record).await?;
        Ok(Some(
            steps
                .into_iter()
                .map(|s| (s.name, s.scheduler, s.state.to_string(), s.handle, s.msg))
                .collect(),
        ))
    })?
    .map_err(to_py)
}

/// Cancels the pipeline (nothing happens for one not recorded here).
#[pyfunction]
pub fn cancel_pipeline(py: Python<'_>, handle: &str) -> PyResult<()> {
    let runner = runner();
    block_on(py, async {
        match recorded(&runner, handle).await? {
            Some(record) => runner.cancel_pipeline(&record).await,
            None => Ok(()),
        }
    })?
    .map_err(to_py)
}

/// Cancels the pipeline, deletes its steps' jobs where their schedulers can, and forgets it;
/// `False` if it is not recorded here.
#[pyfunction]
pub fn delete_pipeline(py: Python<'_>, handle: &str) -> PyResult<bool> {
    let runner = runner();
    block_on(py, async {
        match recorded(&runner, handle).await? {
            Some(record) => runner.delete_pipeline(&record).await.map(|()| true),
            None => Ok(false),
        }
    })?
    .map_err(to_py)
}
