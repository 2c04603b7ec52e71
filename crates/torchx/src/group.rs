//! Groups: the tasks of one array or sweep, submitted as separate apps and known together by
//! one handle, `<scheduler>://<session>/~<group id>` (`~` is never in an app id). The record of
//! a group is a JSON file under `$TORCHX_STATE_DIR/groups/`, written after every submission so
//! that a submitter that dies midway leaves what it submitted findable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::scheduler::{ArrayRequest, DryRunInfo};
pub use crate::specs::group::{sweep_file, sweep_grid, tasks, ArraySpec, Point, Task, MAX_TASKS};
use crate::specs::AppState;

pub use crate::durable::Submitter;
pub use crate::specs::GROUP_MARK;

/// One task of a recorded group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupTask {
    /// Its index.
    pub index: u32,
    /// Its sweep point.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: Point,
    /// Its app's handle, once submitted.
    pub handle: Option<String>,
    /// Why it could not be submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl GroupTask {
    /// Neither submitted nor failed to be: its submitter has yet to get to it.
    pub fn is_pending(&self) -> bool {
        self.handle.is_none() && self.error.is_none()
    }

    /// The state of a task never submitted (`None` once it is): PENDING while its
    /// `submitting` submitter lives, CANCELLED if cancelled before that, else FAILED.
    pub fn unsubmitted_state(&self, submitting: bool) -> Option<AppState> {
        match &self.handle {
            Some(_) => None,
            None if self.is_pending() && submitting => Some(AppState::Pending),
            None if self.error.as_deref() == Some(NOT_SUBMITTED_CANCELLED) => {
                Some(AppState::Cancelled)
            }
            None => Some(AppState::Failed),
        }
    }
}

/// A group as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// `~name-unique`.
    pub group_id: String,
    /// Where its tasks run.
    pub scheduler: String,
    /// The session of its handle.
    pub session: String,
    /// The app name its tasks share.
    pub name: String,
    /// When it was submitted (seconds since the epoch).
    pub created: f64,
    /// The array or sweep, as given.
    pub spec: String,
    /// The `%K` cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
    /// The tasks, in index order.
    pub tasks: Vec<GroupTask>,
    /// How many tasks its tasks were told the group has (`TORCHX_ARRAY_SIZE`), when not as
    /// many as it has (a rerun of some of a group's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// `torchx run`'s arguments without the group's own (what `rerun` runs again).
    #[serde(default)]
    pub argv: Vec<String>,
    /// The group this one reruns tasks of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The handle of the native array its tasks were submitted as, if they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<String>,
    /// The process still submitting its tasks, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<Submitter>,
}

impl GroupRecord {
    /// How many tasks its tasks were told the group has (`TORCHX_ARRAY_SIZE`).
    pub fn size(&self) -> usize {
        self.size.unwrap_or(self.tasks.len())
    }

    /// The group's handle.
    pub fn handle(&self) -> String {
        crate::specs::make_app_handle(&self.scheduler, &self.session, &self.group_id)
    }

    /// Writes the record (atomically: a reader never sees half of it).
    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let dir = groups_dir(state_dir);
        crate::schedulers::create_private_dir(&dir)?;
        let path = record_path(state_dir, &self.group_id)?;
        let text = serde_json::to_string_pretty(self).map_err(|e| {
            Error::backend("group", format!("cannot serialise the group: {e}")).with_source(e)
        })?;
        crate::durable::write_record(&path, text.as_bytes())
    }

    /// The submitter's log, which the submitter keeps locked while it lives (its liveness
    /// seen from another host, and the one-writer rule: only the lock's holder writes the
    /// record while tasks are left to submit).
    pub fn submitter_lock(&self, state_dir: &Path) -> Result<PathBuf> {
        Ok(record_path(state_dir, &self.group_id)?.with_extension("log"))
    }

    /// Whether its submitter is still at work.
    pub fn submitting(&self, state_dir: &Path) -> bool {
        match (&self.submitter, self.submitter_lock(state_dir)) {
            (Some(s), Ok(lock)) => s.alive(&lock),
            _ => false,
        }
    }

    /// The group `group_id`, if recorded.
    pub fn load(state_dir: &Path, group_id: &str) -> Result<Option<GroupRecord>> {
        let path = record_path(state_dir, group_id)?;
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::io(
                    format!("reading the group record {}", path.display()),
                    e,
                ))
            }
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::backend(
                "group",
                format!("the group record {} is unreadable: {e}", path.display()),
            )
            .with_source(e)
        })
    }

    /// The group a handle names: `None` for an app's handle, NotFound for a group with no
    /// record here.
    pub fn find(handle: &str) -> Result<Option<GroupRecord>> {
        let h = crate::specs::parse_app_handle(handle)?;
        if !h.names_group() {
            return Ok(None);
        }
        let group = GroupRecord::load(&crate::schedulers::default_state_dir(), h.app_id())?
            .ok_or_else(|| {
                Error::not_found(
                    "group",
                    handle,
                    " (no record of it in this machine's torchx state directory)",
                )
            })?;
        Ok(Some(group))
    }

    /// Forgets the group (its tasks are the scheduler's), with its submitter's log and marks.
    pub fn remove(&self, state_dir: &Path) -> Result<()> {
        let path = record_path(state_dir, &self.group_id)?;
        for extra in ["cancel", "log"] {
            let _ = std::fs::remove_file(path.with_extension(extra));
        }
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(
                format!("removing the group record {}", path.display()),
                e,
            )),
            _ => Ok(()),
        }
    }

    /// Every recorded group of `scheduler`, newest first.
    pub fn list(state_dir: &Path, scheduler: &str) -> Vec<GroupRecord> {
        let mut groups: Vec<GroupRecord> = std::fs::read_dir(groups_dir(state_dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str::<GroupRecord>(&t).ok())
            .filter(|g| g.scheduler == scheduler)
            .collect();
        groups.sort_by(|a, b| b.created.total_cmp(&a.created));
        groups
    }
}

/// How a run asks for a group (`torchx run`'s flags, the Python Runner's keywords): an array
/// (`N`, `A-B[:STEP]`, each with `%K`), or a sweep's grid or file, capped by `max_concurrent`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSpec {
    /// `--array`.
    pub array: Option<String>,
    /// `--sweep KEY=V1,V2` (each repeat one more key).
    pub sweep: Vec<String>,
    /// `--sweep_file`: JSON lines or CSV with a header.
    pub sweep_file: Option<String>,
    /// `--max_concurrent` (for sweeps; an array says `%K`).
    pub max_concurrent: Option<u32>,
}

impl GroupSpec {
    /// Whether it asks for a group at all.
    pub fn is_group(&self) -> bool {
        self.array.is_some() || !self.sweep.is_empty() || self.sweep_file.is_some()
    }

    /// The tasks, the spec as given (shown by status) and the cap.
    pub fn plan(&self) -> Result<(Vec<Task>, String, Option<u32>)> {
        let array = self
            .array
            .as_deref()
            .map(str::parse::<ArraySpec>)
            .transpose()?;
        let points: Option<Vec<Point>> = match (&self.sweep_file, self.sweep.is_empty()) {
            (Some(file), _) => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    Error::arg(format!("--sweep_file {file}: cannot read it: {e}")).with_source(e)
                })?;
                Some(sweep_file(file, &text)?)
            }
            (None, false) => Some(sweep_grid(&self.sweep)?),
            (None, true) => None,
        };
        let cap = match (&array, self.max_concurrent) {
            (Some(_), Some(_)) => {
                return Err(Error::arg(
                    "--max_concurrent is for sweeps: cap an --array with %K (e.g. 0-99%8)",
                ))
            }
            (Some(spec), None) => spec.max_concurrent,
            (None, Some(0)) => return Err(Error::arg("--max_concurrent 0 would run nothing")),
            (None, k) => k,
        };
        let spec = match (&self.array, &self.sweep_file) {
            (Some(s), _) => format!("--array {s}"),
            (None, Some(f)) => format!("--sweep_file {f}"),
            (None, None) => self
                .sweep
                .iter()
                .map(|s| format!("--sweep {s}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        Ok((tasks(array.as_ref(), points)?, spec, cap))
    }
}

/// What to submit as a group: a component, built once per task with its arguments
/// substituted (`${array_index}`, `${sweep.KEY}`) and the task's variables in every role.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    /// The component (`utils.sh`, `./app.yaml`, ...).
    pub component: String,
    /// Its arguments, before substitution.
    pub args: Vec<String>,
    /// The tasks.
    pub tasks: Vec<Task>,
    /// How many tasks the whole group has (`TORCHX_ARRAY_SIZE`): more than `tasks` when these
    /// are the rest of a group, or the tasks a rerun runs again.
    pub size: usize,
    /// The array or sweep, as given (shown by status).
    pub spec: String,
    /// At most this many tasks unfinished at once.
    pub max_concurrent: Option<u32>,
    /// What reruns the tasks (`torchx run` arguments), kept in the record.
    pub argv: Vec<String>,
    /// The group whose tasks these are again.
    pub parent: Option<String>,
}

/// How often a capped group's unfinished tasks are asked about.
pub(crate) const CAP_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// A group's dry run: every task's own, and how the scheduler submits them: one native
/// request for all (a Slurm job array, ...) or one submission per task, and why.
#[derive(Debug)]
pub struct GroupDryRun {
    /// The tasks with their apps' dry runs, in index order.
    pub tasks: Vec<(Task, DryRunInfo)>,
    /// The native submission of every task, or why each task goes on its own.
    pub array: ArrayRequest<DryRunInfo>,
}

pub(crate) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Why a task never submitted is CANCELLED.
pub const NOT_SUBMITTED_CANCELLED: &str = "cancelled before it was submitted";
/// How long `cancel` waits for a group's submitter to stop (it checks for the marker every
/// [`CAP_POLL`] while it waits for room, and around each submission).
pub(crate) const SUBMITTER_STOP: std::time::Duration = std::time::Duration::from_secs(3);

/// The file whose presence tells a group's submitter to stop.
pub(crate) fn cancel_marker(state_dir: &Path, group_id: &str) -> Result<PathBuf> {
    Ok(record_path(state_dir, group_id)?.with_extension("cancel"))
}

fn groups_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("groups")
}

fn record_path(state_dir: &Path, group_id: &str) -> Result<PathBuf> {
    let name = group_id.strip_prefix(GROUP_MARK).unwrap_or(group_id);
    crate::specs::check_path_component("group id", name)?;
    Ok(groups_dir(state_dir).join(format!("{name}.json")))
}

/// A group's state from its tasks': RUNNING while any runs, PENDING while any waits (and none
/// runs), else SUCCEEDED only if all did, FAILED if any failed (or was never submitted),
/// CANCELLED if any was cancelled.
pub fn group_state(states: &[AppState]) -> AppState {
    let any = |s: AppState| states.contains(&s);
    if any(AppState::Running) {
        AppState::Running
    } else if states.iter().any(|s| !s.is_terminal()) {
        if any(AppState::Unknown) && !any(AppState::Pending) && !any(AppState::Submitted) {
            AppState::Unknown
        } else {
            AppState::Pending
        }
    } else if states.is_empty() || states.iter().all(|s| *s == AppState::Succeeded) {
        AppState::Succeeded
    } else if any(AppState::Failed) {
        AppState::Failed
    } else {
        AppState::Cancelled
    }
}

/// How many tasks are in each state, by state name.
pub fn counts(states: &[AppState]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for s in states {
        *counts.entry(s.to_string()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use AppState::*;

    #[test]
    fn group_states() {
        for (states, want) in [
            (vec![Succeeded, Succeeded], Succeeded),
            (vec![Succeeded, Running, Failed], Running),
            (vec![Succeeded, Pending], Pending),
            (vec![Succeeded, Failed], Failed),
            (vec![Succeeded, Cancelled], Cancelled),
            (vec![Cancelled, Failed], Failed),
            (vec![Succeeded, Unknown], Unknown),
        ] {
            assert_eq!(group_state(&states), want, "{states:?}");
        }
    }

    #[test]
    fn records_round_trip_and_list_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let record = |id: &str, created: f64| GroupRecord {
            group_id: format!("~{id}"),
            scheduler: "local_cwd".into(),
            session: "torchx".into(),
            name: "sweep".into(),
            created,
            spec: "--array 2".into(),
            max_concurrent: None,
            tasks: vec![GroupTask {
                index: 0,
                params: Point::new(),
                handle: Some("local_cwd://torchx/sweep-1".into()),
                error: None,
            }],
            argv: vec!["utils.echo".into()],
            parent: None,
            native: None,
            submitter: None,
            size: None,
        };
        record("old-1", 1.0).save(dir.path()).unwrap();
        record("new-2", 2.0).save(dir.path()).unwrap();
        let loaded = GroupRecord::load(dir.path(), "~old-1").unwrap().unwrap();
        assert_eq!(loaded, record("old-1", 1.0));
        assert_eq!(loaded.handle(), "local_cwd://torchx/~old-1");
        let listed: Vec<String> = GroupRecord::list(dir.path(), "local_cwd")
            .into_iter()
            .map(|g| g.group_id)
            .collect();
        assert_eq!(listed, ["~new-2", "~old-1"]);
        assert!(GroupRecord::load(dir.path(), "~nope").unwrap().is_none());
        assert!(GroupRecord::load(dir.path(), "~../x").is_err());
    }
}

/// Dry-run goldens of a group on every builtin scheduler: its one native request, or why its
/// tasks go one submission each. (Every builtin: the default features.)
#[cfg(all(test, feature = "docker", feature = "kubernetes", feature = "aws"))]
mod goldens {
    use crate::opts::{Cfg, CfgValue};
    use crate::scheduler::{ArrayRequest, ArrayTask, DryRunContext, Registry};
    use crate::specs::AppDef;

    fn task_app(index: u32) -> AppDef {
        let mut app =
            crate::components::test_app("utils.sh", &["sh", "-c", &format!("echo task {index}")]);
        for role in &mut app.roles {
            role.env
                .insert("TORCHX_ARRAY_INDEX".into(), index.to_string());
            role.env.insert("TORCHX_ARRAY_SIZE".into(), "3".into());
            // What each scheduler makes of a task's `${app_id}`.
            role.env.insert("RUN_ID".into(), "${app_id}".into());
        }
        app
    }

    #[test]
    fn every_builtin_scheduler_says_how_it_submits_an_array() {
        let registry = Registry::builtin();
        let apps: Vec<AppDef> = [0, 2, 4].into_iter().map(task_app).collect();
        let tasks: Vec<ArrayTask<'_>> = apps
            .iter()
            .zip([0, 2, 4])
            .map(|(app, index)| ArrayTask { index, app })
            .collect();
        let ctx = DryRunContext::new("torchx", "golden", "/work");
        let mut names: Vec<&str> = registry.names().collect();
        names.sort_unstable();
        assert_eq!(names.len(), 8, "{names:?}");
        for name in names {
            let sched = registry.create(name).unwrap();
            // Required options get a placeholder; the rest keep their defaults.
            let mut cfg = Cfg::new();
            for opt in sched.run_opts().iter().filter(|o| o.required) {
                cfg.insert(opt.name.into(), CfgValue::Str("golden".into()));
            }
            let cfg = sched.run_opts().resolve(&cfg).unwrap();
            let mut shown = String::new();
            for cap in [None, Some(2)] {
                shown.push_str(&format!("=== max_concurrent {cap:?}: "));
                shown.push_str(&match sched.submit_array_dryrun(&tasks, cap, &cfg, &ctx) {
                    Ok(ArrayRequest::Native(request)) => format!("NATIVE\n{}\n", request.render()),
                    Ok(ArrayRequest::PerTask(why)) => format!("ONE SUBMISSION PER TASK: {why}\n"),
                    Err(e) => panic!("{name}: {e}"),
                });
            }
            insta::assert_snapshot!(format!("array_{name}"), shown);
        }
    }
}

/// Arrays combine with the recovery contract wherever both are native (the default features).
#[cfg(all(test, feature = "kubernetes", feature = "aws"))]
mod recovery_arrays {
    use crate::opts::{Cfg, CfgValue};
    use crate::scheduler::{ArrayRequest, ArrayTask, DryRunContext, Registry};

    #[test]
    fn a_native_array_keeps_each_tasks_time_limit() {
        let ctx = DryRunContext::new("torchx", "golden", "/work");
        let registry = Registry::builtin();
        for (name, limit) in [
            ("slurm", "--time=2"),
            ("lsf", "-W 2"),
            ("aws_batch", "\"attemptDurationSeconds\": 160"),
            ("kubernetes", "activeDeadlineSeconds: 160"),
        ] {
            let apps: Vec<_> = [0, 1]
                .into_iter()
                .map(|i| {
                    let mut app = crate::components::test_app(
                        "utils.sh",
                        &["sh", "-c", &format!("echo {i}")],
                    );
                    let role = &mut app.roles[0];
                    role.time_limit = Some(120);
                    if name != "slurm" {
                        // A container's checkpoints live on a mount.
                        role.mounts = vec![crate::specs::Mount::Bind {
                            src_path: "/shared/ckpt".into(),
                            dst_path: "/ckpt".into(),
                            read_only: false,
                        }];
                        role.checkpoint_dir = Some("/ckpt".into());
                    }
                    app
                })
                .collect();
            let tasks: Vec<ArrayTask<'_>> = apps
                .iter()
                .zip([0, 1])
                .map(|(app, index)| ArrayTask { index, app })
                .collect();
            let sched = registry.create(name).unwrap();
            let mut cfg = Cfg::new();
            for opt in sched.run_opts().iter().filter(|o| o.required) {
                cfg.insert(opt.name.into(), CfgValue::Str("golden".into()));
            }
            let cfg = sched.run_opts().resolve(&cfg).unwrap();
            match sched.submit_array_dryrun(&tasks, None, &cfg, &ctx).unwrap() {
                ArrayRequest::Native(r) => {
                    let text = r.render();
                    assert!(text.contains(limit), "{name}: no `{limit}` in {text}");
                }
                ArrayRequest::PerTask(why) => panic!("{name}: {why}"),
            }
        }
    }
}
