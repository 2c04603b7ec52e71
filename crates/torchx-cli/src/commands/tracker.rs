//! `torchx tracker`: list what trackers recorded (TorchX's prototype command, with lineage
//! implemented) and record from inside a job (`torchx tracker add ...`, the shell form of
//! TorchX's `AppRun` API).

use serde_json::{Map, Value};
use torchx::tracker::{self, AppRun, Tracker};
use torchx::{Error, Result, Runner};

use crate::exit_codes;
use crate::output::{print_json, print_table};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct TrackerArgs {
    /// The tracker to use (default: the first configured one; `add` records in all of them).
    #[arg(long, global = true)]
    pub tracker: Option<String>,
    #[command(subcommand)]
    pub command: TrackerCommand,
}

#[derive(Debug, Subcommand)]
pub enum TrackerCommand {
    /// List jobs, metadata, artifacts or lineage.
    #[command(subcommand)]
    List(TrackerList),
    /// Record metadata, an artifact or a source for a run (default: this job, $TORCHX_JOB_ID).
    #[command(subcommand)]
    Add(TrackerAdd),
}

#[derive(Debug, Subcommand)]
pub enum TrackerList {
    /// The tracked runs.
    Jobs {
        /// Only runs that name this run as a source.
        #[arg(long = "parent-run-id", alias = "parent_run_id")]
        parent_run_id: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// A run's metadata.
    Metadata {
        /// The run id (a job's TORCHX_JOB_ID, i.e. its app handle).
        #[arg(value_name = "RUN_ID")]
        run_id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// A run's artifacts.
    Artifacts {
        /// Only this artifact.
        #[arg(long)]
        artifact: Option<String>,
        /// The run id.
        #[arg(value_name = "RUN_ID")]
        run_id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The runs a run derives from (sources) and those derived from it (descendants).
    Lineage {
        /// Only sources.
        #[arg(long = "sources-only", conflicts_with = "descendants_only")]
        sources_only: bool,
        /// Only descendants.
        #[arg(long = "descendants-only")]
        descendants_only: bool,
        /// Only links through this artifact.
        #[arg(long)]
        artifact: Option<String>,
        /// The run id.
        #[arg(value_name = "RUN_ID")]
        run_id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TrackerAdd {
    /// KEY=VALUE pairs (values that parse as JSON keep their type).
    Metadata {
        /// The run (default: $TORCHX_JOB_ID).
        #[arg(long = "run-id")]
        run_id: Option<String>,
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// An artifact: a name and where it is.
    Artifact {
        /// The run (default: $TORCHX_JOB_ID).
        #[arg(long = "run-id")]
        run_id: Option<String>,
        /// Metadata of the artifact, KEY=VALUE (repeatable).
        #[arg(long)]
        metadata: Vec<String>,
        name: String,
        path: String,
    },
    /// A run this one derives from.
    Source {
        /// The run (default: $TORCHX_JOB_ID).
        #[arg(long = "run-id")]
        run_id: Option<String>,
        /// Which of the source's artifacts was used.
        #[arg(long)]
        artifact: Option<String>,
        source_run_id: String,
    },
}

impl TrackerAdd {
    pub fn run_id(&self) -> Option<&str> {
        match self {
            TrackerAdd::Metadata { run_id, .. }
            | TrackerAdd::Artifact { run_id, .. }
            | TrackerAdd::Source { run_id, .. } => run_id.as_deref(),
        }
    }
}

const NONE_CONFIGURED: &str = "No trackers configured. Name one in .torchxconfig \
    ([torchx:tracker] fsspec = then [tracker:fsspec] config = /path/to/fsspec.conf) or set \
    TORCHX_TRACKERS=fsspec and TORCHX_TRACKER_FSSPEC_CONFIG=/path/to/fsspec.conf";

pub fn tracker(runner: &Runner, a: TrackerArgs) -> Result<i32> {
    match a.command {
        TrackerCommand::List(l) => list(runner, a.tracker.as_deref(), l),
        TrackerCommand::Add(add) => record(runner, a.tracker.as_deref(), add),
    }
}

/// The tracker to query: `--tracker`, else the first configured one.
fn query_tracker(runner: &Runner, name: Option<&str>) -> Result<Box<dyn Tracker>> {
    let (name, config) = match name {
        Some(n) => (n.to_string(), tracker::config_of(runner.config(), n)),
        None => tracker::configured(runner.config())
            .into_iter()
            .next()
            .ok_or_else(|| Error::config(NONE_CONFIGURED))?,
    };
    log::info!("using tracker `{name}` to query data");
    runner.trackers().build(&name, config.as_deref())
}

fn list(runner: &Runner, name: Option<&str>, l: TrackerList) -> Result<i32> {
    let t = query_tracker(runner, name)?;
    match l {
        TrackerList::Jobs {
            parent_run_id,
            json,
        } => {
            let ids = t.run_ids(parent_run_id.as_deref())?;
            if json {
                print_json(&ids);
            } else {
                let rows: Vec<Vec<String>> = ids.into_iter().map(|i| vec![i]).collect();
                print_table(&["JOB ID"], &rows);
            }
        }
        TrackerList::Metadata { run_id, json } => {
            let md = t.metadata(&run_id)?;
            if json {
                print_json(&md);
            } else {
                let rows: Vec<Vec<String>> =
                    md.iter().map(|(k, v)| vec![k.clone(), text(v)]).collect();
                print_table(&["ID", "VALUE"], &rows);
            }
        }
        TrackerList::Artifacts {
            artifact,
            run_id,
            json,
        } => {
            let arts: Vec<_> = t
                .artifacts(&run_id)?
                .into_values()
                .filter(|a| artifact.as_ref().is_none_or(|n| &a.name == n))
                .collect();
            if json {
                print_json(&arts);
            } else {
                let rows: Vec<Vec<String>> = arts
                    .iter()
                    .map(|a| {
                        let md = a.metadata.clone().map_or(Value::Null, Value::Object);
                        vec![a.name.clone(), a.path.clone(), text(&md)]
                    })
                    .collect();
                print_table(&["ARTIFACT", "PATH", "METADATA"], &rows);
            }
        }
        TrackerList::Lineage {
            sources_only,
            descendants_only,
            artifact,
            run_id,
            json,
        } => {
            let mut lineage = t.lineage(&run_id)?;
            let keep =
                |s: &tracker::TrackerSource| artifact.is_none() || s.artifact_name == artifact;
            lineage.sources.retain(keep);
            lineage.descendants.retain(keep);
            if sources_only {
                lineage.descendants.clear();
            }
            if descendants_only {
                lineage.sources.clear();
            }
            if json {
                print_json(&lineage);
            } else {
                let rows: Vec<Vec<String>> = lineage
                    .sources
                    .iter()
                    .map(|s| ("source", s))
                    .chain(lineage.descendants.iter().map(|s| ("descendant", s)))
                    .map(|(rel, s)| {
                        vec![
                            rel.to_string(),
                            s.source_run_id.clone(),
                            s.artifact_name.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                print_table(&["RELATION", "RUN ID", "ARTIFACT"], &rows);
            }
        }
    }
    Ok(exit_codes::OK)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `key=value` pairs; values that parse as JSON (numbers, booleans, null, quoted strings,
/// lists, objects) keep their type, anything else is a string.
fn parse_pairs(pairs: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for p in pairs {
        let Some((k, v)) = p.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(Error::arg(format!(
                "expected KEY=VALUE, got `{p}` (e.g. lr=0.1 or name=resnet)"
            )));
        };
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

fn record(runner: &Runner, name: Option<&str>, add: TrackerAdd) -> Result<i32> {
    let mut run = AppRun::from_env(runner.trackers(), runner.config())?;
    if let Some(n) = name {
        run.backends = vec![query_tracker(runner, Some(n))?];
    }
    if run.backends.is_empty() {
        return Err(Error::config(NONE_CONFIGURED));
    }
    let run_id = match add.run_id() {
        Some(id) => id.to_string(),
        None if run.id != "<UNDEFINED>" => run.id.clone(),
        None => {
            return Err(Error::arg(
                "no run id: pass --run-id, or call this from a job torchx launched (it sets \
                 TORCHX_JOB_ID)",
            ))
        }
    };
    run.id = run_id;
    match add {
        TrackerAdd::Metadata { pairs, .. } => {
            if pairs.is_empty() {
                return Err(Error::arg("give at least one KEY=VALUE"));
            }
            run.add_metadata(&parse_pairs(&pairs)?)?;
        }
        TrackerAdd::Artifact {
            name,
            path,
            metadata,
            ..
        } => {
            let md = if metadata.is_empty() {
                None
            } else {
                Some(parse_pairs(&metadata)?)
            };
            run.add_artifact(&name, &path, md.as_ref())?;
        }
        TrackerAdd::Source {
            source_run_id,
            artifact,
            ..
        } => run.add_source(&source_run_id, artifact.as_deref())?,
    }
    Ok(exit_codes::OK)
}
