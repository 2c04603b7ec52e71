//! Trackers of the Python `torchx.tracker` entry points (e.g. an MLflow tracker), for
//! `torchx tracker list|add`: each operation is one call of the Python bridge, which builds the
//! tracker with its config (as a job's `AppRun` does) and answers in JSON.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::{Lineage, Tracker, TrackerArtifact, TrackerSource};
use crate::error::{Error, ErrorKind, Result};

/// A Python tracker by entry-point name.
#[derive(Debug)]
pub(super) struct PythonTracker {
    name: String,
    config: Option<String>,
}

impl PythonTracker {
    /// The tracker `name` of the `torchx.tracker` entry points, if an environment declares it.
    pub(super) fn find(name: &str, config: Option<&str>) -> Option<PythonTracker> {
        crate::python::plugin_names("torchx.tracker")
            .iter()
            .any(|n| n == name)
            .then(|| PythonTracker {
                name: name.to_string(),
                config: config.map(String::from),
            })
    }

    fn call(&self, op: &str, args: Value) -> Result<Value> {
        let request = json!({
            "action": "tracker",
            "name": self.name,
            "config": self.config,
            "op": op,
            "args": args,
        });
        let result = crate::python::python_bridge(&request, &format!("tracker `{}`", self.name))?;
        match result.get("ok") {
            Some(v) => Ok(v.clone()),
            // The kind the bridge reported (a tracker it cannot find is not found, a bad
            // argument invalid), else a backend failure.
            None => Err(Error::backend(
                format!("tracker {}", self.name),
                result["error"]["message"]
                    .as_str()
                    .unwrap_or("(no message)")
                    .to_string(),
            )
            .with_kind(
                result["error"]["kind"]
                    .as_str()
                    .and_then(ErrorKind::from_name)
                    .unwrap_or(ErrorKind::Backend),
            )),
        }
    }
}

fn sources_of(v: &Value) -> Vec<TrackerSource> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| TrackerSource {
            source_run_id: s["source_run_id"].as_str().unwrap_or_default().to_string(),
            artifact_name: s["artifact_name"].as_str().map(String::from),
        })
        .collect()
}

impl Tracker for PythonTracker {
    fn add_artifact(&self, run_id: &str, artifact: &TrackerArtifact) -> Result<()> {
        let TrackerArtifact {
            name,
            path,
            metadata,
        } = artifact;
        self.call(
            "add_artifact",
            json!({"run_id": run_id, "name": name, "path": path, "metadata": metadata}),
        )
        .map(drop)
    }

    fn artifacts(&self, run_id: &str) -> Result<BTreeMap<String, TrackerArtifact>> {
        let v = self.call("artifacts", json!({ "run_id": run_id }))?;
        Ok(v.as_object()
            .into_iter()
            .flatten()
            .map(|(name, a)| {
                let artifact = TrackerArtifact {
                    name: name.clone(),
                    path: a["path"].as_str().unwrap_or_default().to_string(),
                    metadata: a["metadata"].as_object().cloned(),
                };
                (name.clone(), artifact)
            })
            .collect())
    }

    fn add_metadata(&self, run_id: &str, metadata: &Map<String, Value>) -> Result<()> {
        self.call(
            "add_metadata",
            json!({"run_id": run_id, "metadata": metadata}),
        )
        .map(drop)
    }

    fn metadata(&self, run_id: &str) -> Result<Map<String, Value>> {
        let v = self.call("metadata", json!({ "run_id": run_id }))?;
        Ok(v.as_object().cloned().unwrap_or_default())
    }

    fn add_source(&self, run_id: &str, source_id: &str, artifact_name: Option<&str>) -> Result<()> {
        self.call(
            "add_source",
            json!({"run_id": run_id, "source_id": source_id, "artifact_name": artifact_name}),
        )
        .map(drop)
    }

    fn sources(&self, run_id: &str, artifact_name: Option<&str>) -> Result<Vec<TrackerSource>> {
        let v = self.call(
            "sources",
            json!({"run_id": run_id, "artifact_name": artifact_name}),
        )?;
        Ok(sources_of(&v))
    }

    fn lineage(&self, run_id: &str) -> Result<Lineage> {
        let v = self.call("lineage", json!({ "run_id": run_id }))?;
        Ok(Lineage {
            sources: sources_of(&v["sources"]),
            descendants: sources_of(&v["descendants"]),
        })
    }

    fn run_ids(&self, parent_run_id: Option<&str>) -> Result<Vec<String>> {
        let v = self.call("run_ids", json!({ "parent_run_id": parent_run_id }))?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect())
    }
}
