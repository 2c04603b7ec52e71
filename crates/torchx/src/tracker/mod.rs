//! Experiment tracking (TorchX's `torchx.tracker`): the [`Tracker`] operations, the trackers a
//! launch is configured with (`[torchx:tracker]`, `[tracker:<name>]`, `TORCHX_TRACKERS`,
//! `TORCHX_TRACKER_<NAME>_CONFIG`), a registry of tracker factories, and the job-side
//! [`AppRun`]. The builtin `fsspec` tracker reads and writes TorchX's fsspec layout.

mod fsspec;
mod python;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

pub use fsspec::FsspecTracker;

use crate::config::TorchxConfig;
use crate::error::{Error, ErrorKind, Result};

/// `TORCHX_TRACKERS`: comma-separated tracker names (overrides `[torchx:tracker]`).
pub const ENV_TRACKERS: &str = "TORCHX_TRACKERS";
/// `TORCHX_PARENT_RUN_ID`: the run this job derives from.
pub const ENV_PARENT_RUN_ID: &str = "TORCHX_PARENT_RUN_ID";
/// `TORCHX_JOB_ID`: the job's run id, `{scheduler}://{session}/{app_id}`.
pub const ENV_JOB_ID: &str = "TORCHX_JOB_ID";

/// `TORCHX_TRACKER_<NAME>_CONFIG`, the variable that carries tracker `name`'s config.
pub fn config_env_var(name: &str) -> String {
    format!("TORCHX_TRACKER_{}_CONFIG", name.to_uppercase())
}

/// An artifact of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrackerArtifact {
    /// Its name (unique per run; a later artifact of the same name replaces it).
    pub name: String,
    /// Where it is.
    pub path: String,
    /// Free-form metadata.
    pub metadata: Option<Map<String, Value>>,
}

/// A run another run derives from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrackerSource {
    /// The source's run id (a torchx job id or any external id).
    pub source_run_id: String,
    /// Which of its artifacts was used, if said.
    pub artifact_name: Option<String>,
}

/// A run's place in the lineage graph: what it derives from and what derives from it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Lineage {
    /// The runs it derives from.
    pub sources: Vec<TrackerSource>,
    /// The runs that name it as a source (`source_run_id` is the descendant's id).
    pub descendants: Vec<TrackerSource>,
}

/// A tracking backend: TorchX's `TrackerBase`.
pub trait Tracker: std::fmt::Debug + Send + Sync {
    /// Records an artifact of `run_id` (replacing one of the same name).
    fn add_artifact(&self, run_id: &str, artifact: &TrackerArtifact) -> Result<()>;
    /// The artifacts of `run_id` by name.
    fn artifacts(&self, run_id: &str) -> Result<BTreeMap<String, TrackerArtifact>>;
    /// Records metadata of `run_id` (merged over what is there).
    fn add_metadata(&self, run_id: &str, metadata: &Map<String, Value>) -> Result<()>;
    /// The metadata of `run_id`.
    fn metadata(&self, run_id: &str) -> Result<Map<String, Value>>;
    /// Records that `run_id` derives from `source_id` (optionally from one of its artifacts).
    fn add_source(&self, run_id: &str, source_id: &str, artifact_name: Option<&str>) -> Result<()>;
    /// The sources of `run_id`, optionally only those of `artifact_name`.
    fn sources(&self, run_id: &str, artifact_name: Option<&str>) -> Result<Vec<TrackerSource>>;
    /// The lineage of `run_id`.
    fn lineage(&self, run_id: &str) -> Result<Lineage>;
    /// The runs it knows, optionally only the children of `parent_run_id`.
    fn run_ids(&self, parent_run_id: Option<&str>) -> Result<Vec<String>>;
}

/// Builds a tracker from its config string (`[tracker:<name>] config`).
pub type TrackerFactory = Arc<dyn Fn(Option<&str>) -> Result<Box<dyn Tracker>> + Send + Sync>;

/// Tracker factories by name: `fsspec` built in, more registered by custom binaries.
#[derive(Clone)]
pub struct TrackerRegistry {
    factories: Vec<(String, TrackerFactory)>,
}

impl std::fmt::Debug for TrackerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.factories.iter().map(|e| &e.0))
            .finish()
    }
}

impl Default for TrackerRegistry {
    fn default() -> Self {
        TrackerRegistry::builtin()
    }
}

impl TrackerRegistry {
    /// The builtin trackers: `fsspec`.
    pub fn builtin() -> TrackerRegistry {
        let mut r = TrackerRegistry {
            factories: Vec::new(),
        };
        r.register(fsspec::NAME, |config| {
            Ok(Box::new(fsspec::FsspecTracker::from_config(config)?) as Box<dyn Tracker>)
        });
        r
    }

    /// Adds (or replaces) tracker `name`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(Option<&str>) -> Result<Box<dyn Tracker>> + Send + Sync + 'static,
    ) {
        let name = name.into();
        let factory: TrackerFactory = Arc::new(factory);
        match self.factories.iter_mut().find(|e| e.0 == name) {
            Some(e) => e.1 = factory,
            None => self.factories.push((name, factory)),
        }
    }

    /// Registered names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.iter().map(|e| e.0.as_str())
    }

    /// Builds tracker `name` with `config`.
    pub fn build(&self, name: &str, config: Option<&str>) -> Result<Box<dyn Tracker>> {
        if let Some(e) = self.factories.iter().find(|e| e.0 == name) {
            return (e.1)(config);
        }
        // After every builtin and registration: a tracker of the Python entry points.
        if let Some(t) = python::PythonTracker::find(name, config) {
            return Ok(Box::new(t));
        }
        Err(Error::not_found(
            "tracker",
            name,
            format!(
                ". This torchx knows: {} and the torchx.tracker entry points of its Python \
                 environment",
                self.names().collect::<Vec<_>>().join(", ")
            ),
        )
        .suggesting(name, self.names()))
    }
}

/// The trackers a launch uses, in order, with their configs: `[torchx:tracker]` names (or
/// `TORCHX_TRACKERS`), each with `[tracker:<name>] config` (or `TORCHX_TRACKER_<NAME>_CONFIG`).
pub fn configured(config: &TorchxConfig) -> Vec<(String, Option<String>)> {
    let names: Vec<String> = match std::env::var(ENV_TRACKERS) {
        Ok(names) => names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect(),
        Err(_) => config.trackers().into_iter().map(|t| t.0).collect(),
    };
    names
        .into_iter()
        .map(|n| {
            let cfg = config_of(config, &n);
            (n, cfg)
        })
        .collect()
}

/// Tracker `name`'s config: `TORCHX_TRACKER_<NAME>_CONFIG`, else `[tracker:<name>] config`.
pub fn config_of(config: &TorchxConfig, name: &str) -> Option<String> {
    std::env::var(config_env_var(name))
        .ok()
        .or_else(|| config.tracker_config(name))
}

/// TorchX's `AppRun`: the tracking API of a running job. `from_env` reads `TORCHX_JOB_ID`
/// (`<UNDEFINED>` outside a torchx job), builds the trackers named by `TORCHX_TRACKERS` and, when
/// `TORCHX_PARENT_RUN_ID` is set, records it as the run's source, as TorchX does.
#[derive(Debug)]
pub struct AppRun {
    /// The run id.
    pub id: String,
    /// Where records go.
    pub backends: Vec<Box<dyn Tracker>>,
}

impl AppRun {
    /// The run of this process, tracked by the trackers in its environment (or, outside a
    /// torchx job, by those `config` names).
    pub fn from_env(registry: &TrackerRegistry, config: &TorchxConfig) -> Result<AppRun> {
        let id = std::env::var(ENV_JOB_ID).unwrap_or_else(|_| "<UNDEFINED>".into());
        let mut backends = Vec::new();
        for (name, cfg) in configured(config) {
            match registry.build(&name, cfg.as_deref()) {
                Ok(t) => backends.push(t),
                // As in TorchX: a tracker this runtime does not have is skipped, not fatal.
                Err(e) if e.kind() == ErrorKind::NotFound => log::warn!("{e}"),
                Err(e) => return Err(e),
            }
        }
        let run = AppRun { id, backends };
        if let Ok(parent) = std::env::var(ENV_PARENT_RUN_ID) {
            if !parent.is_empty() {
                run.add_source(&parent, None)?;
            }
        }
        Ok(run)
    }

    /// Records metadata on every backend.
    pub fn add_metadata(&self, metadata: &Map<String, Value>) -> Result<()> {
        self.backends
            .iter()
            .try_for_each(|b| b.add_metadata(&self.id, metadata))
    }

    /// Records an artifact on every backend.
    pub fn add_artifact(
        &self,
        name: &str,
        path: &str,
        metadata: Option<&Map<String, Value>>,
    ) -> Result<()> {
        let artifact = TrackerArtifact {
            name: name.to_string(),
            path: path.to_string(),
            metadata: metadata.cloned(),
        };
        self.backends
            .iter()
            .try_for_each(|b| b.add_artifact(&self.id, &artifact))
    }

    /// Records a source on every backend.
    pub fn add_source(&self, source_id: &str, artifact_name: Option<&str>) -> Result<()> {
        self.backends
            .iter()
            .try_for_each(|b| b.add_source(&self.id, source_id, artifact_name))
    }
}
