//! Pipeline files (pure): `torchx run ./pipe.yaml` whose top level has `name` and `steps`
//! (instead of an AppDef's `roles`). Each step says what to run (`component` with `args` as
//! on the command line, or `appdef` naming an AppDef file), where (`scheduler`, `cfg`,
//! `workspace`), the recovery and group options of `torchx run`, and which steps it runs
//! after (`after: [step, step:notok, ...]`). Parsing refuses unknown keys, unknown or
//! repeated steps, bad conditions and cycles before anything runs; a step becomes the
//! `torchx run` arguments that submit it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::after::{Condition, Verdict};
use super::{AppState, RECOVERY_KEYS};
use crate::error::{Error, Result};

/// The keys a step may have besides its `torchx run` options ([`GROUP_OPTIONS`] and
/// [`RECOVERY_KEYS`]).
const STEP_OWN_KEYS: &[&str] = &[
    "name",
    "component",
    "args",
    "appdef",
    "scheduler",
    "cfg",
    "workspace",
    "after",
    "pipeline_dir",
    "sweep",
    "skip_preflight",
];

/// The group options a step may set (with the recovery keys), each passed on as `--<key> <value>`.
const GROUP_OPTIONS: &[&str] = &["array", "sweep_file", "max_concurrent"];

/// The longest step name (it becomes part of an environment variable and of file names).
const MAX_STEP_NAME: usize = 48;

/// A step's dependency on another step of its pipeline, or on a job outside it (a handle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDependency {
    /// The step it waits for, or the handle of a job (or group, or pipeline).
    pub step: String,
    /// How that step must end.
    pub condition: Condition,
}

impl StepDependency {
    /// Whether it names a job outside the pipeline (by its handle).
    pub fn is_external(&self) -> bool {
        self.step.contains("://")
    }
}

impl std::fmt::Display for StepDependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.condition {
            Condition::Ok => f.write_str(&self.step),
            c => write!(f, "{}:{}", self.step, c.as_str()),
        }
    }
}

/// One step of a pipeline file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// Its name, unique in the pipeline.
    pub name: String,
    /// The scheduler it runs on (`None`: the run's).
    pub scheduler: Option<String>,
    /// Where `TORCHX_PIPELINE_DIR` is inside its containers (container schedulers).
    pub pipeline_dir: Option<String>,
    /// The steps it runs after.
    pub after: Vec<StepDependency>,
    /// `torchx run`'s options and then `--`, the component and its arguments.
    pub run_args: Vec<String>,
}

/// A parsed and checked pipeline file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineSpec {
    /// The pipeline's name.
    pub name: String,
    /// Its steps, in the order of the file.
    pub steps: Vec<Step>,
}

/// Whether the text of a YAML or JSON file is a pipeline (its top level has `steps`) rather
/// than an AppDef.
pub fn is_pipeline(text: &str) -> bool {
    serde_norway::from_str::<Value>(text)
        .ok()
        .is_some_and(|v| v.get("steps").is_some())
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::spec(format!("pipeline: {what}"))
}

/// A scalar as the command line would give it.
fn scalar(v: &Value, what: &str) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(bad(format!("{what} must be a string or a number, got {v}"))),
    }
}

fn strings(v: &Value, what: &str) -> Result<Vec<String>> {
    match v {
        Value::Array(items) => items.iter().map(|i| scalar(i, what)).collect(),
        other => Ok(vec![scalar(other, what)?]),
    }
}

/// Checks a step name: letters, digits, `_` and `-`, starting with a letter.
fn check_step_name(name: &str) -> Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.len() <= MAX_STEP_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "step name `{name}`: use a letter, then letters, digits, `_` or `-` (at most \
             {MAX_STEP_NAME})"
        )))
    }
}

/// The environment variable that holds the handle of upstream `step`.
pub fn upstream_env_var(step: &str) -> String {
    format!(
        "TORCHX_UPSTREAM_{}_HANDLE",
        step.to_ascii_uppercase().replace('-', "_")
    )
}

fn parse_dependency(step: &str, v: &Value) -> Result<StepDependency> {
    let text = scalar(v, &format!("step `{step}`: after"))?;
    if text.contains("://") {
        let dep: super::Dependency = text
            .parse()
            .map_err(|e: Error| bad(format!("step `{step}`: {}", e.message())))?;
        return Ok(StepDependency {
            step: dep.handle,
            condition: dep.condition,
        });
    }
    let (name, condition) = match text.split_once(':') {
        None => (text.as_str(), Condition::Ok),
        Some((name, "ok")) => (name, Condition::Ok),
        Some((name, "notok")) => (name, Condition::NotOk),
        Some((name, "any")) => (name, Condition::Any),
        Some((_, c)) => {
            return Err(bad(format!(
                "step `{step}`: after `{text}`: unknown condition `{c}` (use ok, notok or any)"
            )))
        }
    };
    Ok(StepDependency {
        step: name.to_string(),
        condition,
    })
}

fn parse_step(v: &Value, index: usize) -> Result<Step> {
    let Value::Object(map) = v else {
        return Err(bad(format!("step {index} must be a mapping, got {v}")));
    };
    let name = match map.get("name") {
        Some(n) => scalar(n, &format!("step {index}: name"))?,
        None => return Err(bad(format!("step {index} has no `name`"))),
    };
    check_step_name(&name)?;
    let step_keys: Vec<&str> = STEP_OWN_KEYS
        .iter()
        .chain(GROUP_OPTIONS)
        .chain(&RECOVERY_KEYS)
        .copied()
        .collect();
    if let Some(key) = map.keys().find(|k| !step_keys.contains(&k.as_str())) {
        let hint = strsim_nearest(key, &step_keys)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        return Err(bad(format!(
            "step `{name}`: unknown key `{key}`{hint}; a step has: {}",
            step_keys.join(", ")
        )));
    }
    let text = |key: &str| -> Result<Option<String>> {
        map.get(key)
            .map(|v| scalar(v, &format!("step `{name}`: {key}")))
            .transpose()
    };
    let mut run_args = Vec::new();
    let scheduler = text("scheduler")?;
    if let Some(s) = &scheduler {
        run_args.extend(["--scheduler".to_string(), s.clone()]);
    }
    run_args.extend(cfg_args(&name, map.get("cfg"))?);
    if let Some(w) = text("workspace")? {
        run_args.extend(["--workspace".to_string(), w]);
    }
    for key in GROUP_OPTIONS.iter().chain(&RECOVERY_KEYS) {
        if let Some(v) = text(key)? {
            run_args.extend([format!("--{key}"), v]);
        }
    }
    run_args.extend(sweep_args(&name, map.get("sweep"))?);
    match map.get("skip_preflight") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => run_args.push("--skip_preflight".into()),
        Some(other) => {
            return Err(bad(format!(
                "step `{name}`: skip_preflight must be true or false, got {other}"
            )))
        }
    }
    let after = match map.get("after") {
        None => Vec::new(),
        Some(Value::Array(deps)) => deps
            .iter()
            .map(|d| parse_dependency(&name, d))
            .collect::<Result<_>>()?,
        Some(one) => vec![parse_dependency(&name, one)?],
    };
    run_args.push("--".into());
    run_args.extend(command(
        &name,
        text("component")?,
        text("appdef")?,
        map.get("args"),
    )?);
    let pipeline_dir = text("pipeline_dir")?;
    Ok(Step {
        name,
        scheduler,
        pipeline_dir,
        after,
        run_args,
    })
}

/// A step's `cfg` mapping as `--cfg k=v,k2=a;b`.
fn cfg_args(name: &str, cfg: Option<&Value>) -> Result<Vec<String>> {
    let cfg = match cfg {
        None => return Ok(Vec::new()),
        Some(Value::Object(cfg)) => cfg,
        Some(other) => {
            return Err(bad(format!(
                "step `{name}`: cfg must be a mapping of run options, got {other}"
            )))
        }
    };
    let mut pairs = Vec::new();
    for (k, v) in cfg {
        let values = strings(v, &format!("step `{name}`: cfg.{k}"))?;
        if let Some(v) = values.iter().find(|v| v.contains([',', ';', '='])) {
            return Err(bad(format!(
                "step `{name}`: cfg.{k} `{v}`: a value may not contain `,`, `;` or `=`"
            )));
        }
        pairs.push(format!("{k}={}", values.join(";")));
    }
    Ok(if pairs.is_empty() {
        Vec::new()
    } else {
        vec!["--cfg".to_string(), pairs.join(",")]
    })
}

/// A step's `sweep` mapping as `--sweep k=v1,v2` per key.
fn sweep_args(name: &str, sweep: Option<&Value>) -> Result<Vec<String>> {
    match sweep {
        None => Ok(Vec::new()),
        Some(Value::Object(grid)) => {
            let mut args = Vec::new();
            for (k, v) in grid {
                let values = strings(v, &format!("step `{name}`: sweep.{k}"))?;
                args.extend(["--sweep".to_string(), format!("{k}={}", values.join(","))]);
            }
            Ok(args)
        }
        Some(other) => Err(bad(format!(
            "step `{name}`: sweep must map each key to its values, got {other}"
        ))),
    }
}

/// What a step runs: its component and arguments, or an AppDef file.
fn command(
    name: &str,
    component: Option<String>,
    appdef: Option<String>,
    args: Option<&Value>,
) -> Result<Vec<String>> {
    match (component, appdef) {
        (Some(component), None) => {
            let mut command = vec![component];
            if let Some(args) = args {
                command.extend(strings(args, &format!("step `{name}`: args"))?);
            }
            Ok(command)
        }
        (None, Some(appdef)) if args.is_none() => Ok(vec![appdef]),
        (None, Some(_)) => Err(bad(format!(
            "step `{name}`: `args` go with `component`; an `appdef` file takes none"
        ))),
        (Some(_), Some(_)) => Err(bad(format!(
            "step `{name}`: give `component` or `appdef`, not both"
        ))),
        (None, None) => Err(bad(format!(
            "step `{name}`: says nothing to run; give `component` (with `args`) or \
             `appdef` (an AppDef file)"
        ))),
    }
}

fn strsim_nearest<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(key, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, c)| c)
}

impl PipelineSpec {
    /// Parses and checks a pipeline file's text (YAML or JSON).
    pub fn parse(text: &str) -> Result<PipelineSpec> {
        let doc: Value =
            serde_norway::from_str(text).map_err(|e| bad(format!("not YAML or JSON: {e}")))?;
        let Value::Object(top) = &doc else {
            return Err(bad(
                "the top level must be a mapping with `name` and `steps`",
            ));
        };
        if let Some(key) = top
            .keys()
            .find(|k| !["name", "steps"].contains(&k.as_str()))
        {
            return Err(bad(format!(
                "unknown top-level key `{key}`; a pipeline has `name` and `steps`"
            )));
        }
        let name = match top.get("name") {
            Some(n) => scalar(n, "name")?,
            None => return Err(bad("no `name`")),
        };
        crate::specs::check_path_component("pipeline name", &name)?;
        let Some(Value::Array(items)) = top.get("steps") else {
            return Err(bad("`steps` must be a list of steps"));
        };
        if items.is_empty() {
            return Err(bad("`steps` is empty"));
        }
        let steps: Vec<Step> = items
            .iter()
            .enumerate()
            .map(|(i, s)| parse_step(s, i + 1))
            .collect::<Result<_>>()?;
        let spec = PipelineSpec { name, steps };
        spec.check()?;
        Ok(spec)
    }

    /// Unique names (also as environment variables), known dependencies, no cycle.
    fn check(&self) -> Result<()> {
        let mut seen = BTreeMap::new();
        for step in &self.steps {
            if let Some(other) = seen.insert(upstream_env_var(&step.name), &step.name) {
                return Err(bad(format!(
                    "steps `{other}` and `{}` have the same name (as {})",
                    step.name,
                    upstream_env_var(&step.name)
                )));
            }
        }
        for step in &self.steps {
            for dep in step.after.iter().filter(|d| !d.is_external()) {
                if dep.step == step.name {
                    return Err(bad(format!("step `{}` runs after itself", step.name)));
                }
                if self.step(&dep.step).is_none() {
                    let names: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
                    return Err(bad(format!(
                        "step `{}` runs after `{}`, which is not a step (steps: {})",
                        step.name,
                        dep.step,
                        names.join(", ")
                    )));
                }
            }
        }
        if let Some(cycle) = self.cycle() {
            return Err(bad(format!(
                "the steps form a cycle: {}",
                cycle.join(" -> ")
            )));
        }
        Ok(())
    }

    /// The step called `name`.
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }

    /// A cycle of steps (each after the next), if there is one.
    fn cycle(&self) -> Option<Vec<String>> {
        // Depth-first search; `path` holds the steps on the current chain.
        fn visit<'a>(
            spec: &'a PipelineSpec,
            name: &'a str,
            done: &mut BTreeSet<&'a str>,
            path: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|p| *p == name) {
                let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(name.to_string());
                return Some(cycle);
            }
            if !done.insert(name) {
                return None;
            }
            path.push(name);
            let step = spec.step(name)?;
            for dep in step.after.iter().filter(|d| !d.is_external()) {
                if let Some(c) = visit(spec, &dep.step, done, path) {
                    return Some(c);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        for step in &self.steps {
            let mut path = Vec::new();
            if let Some(c) = visit(self, &step.name, &mut done, &mut path) {
                return Some(c);
            }
        }
        None
    }

    /// The steps in an order where each comes after those it depends on (file order where
    /// free).
    pub fn ordered(&self) -> Vec<&Step> {
        let mut placed: Vec<&Step> = Vec::new();
        while placed.len() < self.steps.len() {
            let before = placed.len();
            for step in &self.steps {
                let ready = step
                    .after
                    .iter()
                    .all(|d| d.is_external() || placed.iter().any(|p| p.name == d.step));
                if ready && !placed.iter().any(|p| p.name == step.name) {
                    placed.push(step);
                }
            }
            if placed.len() == before {
                break; // a cycle, which `check` refuses
            }
        }
        placed
    }

    /// The DAG as text: one line per step, in order, with what it runs after.
    pub fn render_dag(&self, default_scheduler: &str) -> String {
        let mut out = String::new();
        for step in self.ordered() {
            let on = step.scheduler.as_deref().unwrap_or(default_scheduler);
            out.push_str(&format!("{} ({on})", step.name));
            if !step.after.is_empty() {
                let deps: Vec<String> = step.after.iter().map(ToString::to_string).collect();
                out.push_str(&format!(" after {}", deps.join(", ")));
            }
            out.push('\n');
        }
        out
    }
}

/// What a step's dependencies, ended as `upstream` says (`None`: not yet), mean for it:
/// [`Verdict::Satisfied`] once all are met, [`Verdict::Impossible`] with the first that can
/// no longer be, else [`Verdict::Waiting`] with the first it waits for.
pub fn step_verdict(
    after: &[StepDependency],
    upstream: impl Fn(&str) -> Option<AppState>,
) -> (Verdict, Option<&StepDependency>) {
    let mut waiting = None;
    for dep in after {
        let verdict = match upstream(&dep.step) {
            Some(state) => dep.condition.verdict(state),
            None => Verdict::Waiting,
        };
        match verdict {
            Verdict::Impossible => return (Verdict::Impossible, Some(dep)),
            Verdict::Waiting if waiting.is_none() => waiting = Some(dep),
            _ => {}
        }
    }
    match waiting {
        Some(dep) => (Verdict::Waiting, Some(dep)),
        None => (Verdict::Satisfied, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &str = "
name: demo
steps:
  - name: prepare
    component: utils.sh
    args: [sh, -c, 'echo 42 > $TORCHX_PIPELINE_DIR/x']
  - name: train
    scheduler: slurm
    cfg: {partition: debug, mail_type: [BEGIN, END]}
    component: utils.echo
    args: [--msg, hi]
    time_limit: 1h
    sweep: {lr: [0.1, 0.01]}
    after: [prepare]
  - name: cleanup
    appdef: ./app.yaml
    after: [train:notok, prepare:any, 'slurm://torchx/12:any']
";

    #[test]
    fn parses_steps_into_run_arguments() {
        let spec = PipelineSpec::parse(THREE).unwrap();
        assert_eq!(spec.name, "demo");
        let train = spec.step("train").unwrap();
        assert_eq!(
            train.run_args,
            [
                "--scheduler",
                "slurm",
                "--cfg",
                "partition=debug,mail_type=BEGIN;END",
                "--time_limit",
                "1h",
                "--sweep",
                "lr=0.1,0.01",
                "--",
                "utils.echo",
                "--msg",
                "hi"
            ]
        );
        let cleanup = spec.step("cleanup").unwrap();
        assert_eq!(cleanup.run_args, ["--", "./app.yaml"]);
        assert_eq!(
            cleanup
                .after
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["train:notok", "prepare:any", "slurm://torchx/12:any"]
        );
        assert!(cleanup.after[2].is_external());
        assert_eq!(
            spec.render_dag("local_cwd"),
            "prepare (local_cwd)\ntrain (slurm) after prepare\n\
             cleanup (local_cwd) after train:notok, prepare:any, slurm://torchx/12:any\n"
        );
        assert!(is_pipeline(THREE));
        assert!(!is_pipeline("name: x\nroles: []\n"));
        let json = r#"{"name": "j", "steps": [{"name": "a", "component": "utils.echo"}]}"#;
        assert_eq!(PipelineSpec::parse(json).unwrap().steps.len(), 1);
    }

    #[test]
    fn refuses_bad_pipelines_by_name() {
        let one = |step: &str| format!("name: p\nsteps:\n  - {step}\n");
        for (text, expected) in [
            ("name: p\nsteps: []\n".to_string(), "`steps` is empty"),
            (
                "name: p\nroles: []\nsteps: [x]\n".into(),
                "unknown top-level key `roles`",
            ),
            (one("{name: a}"), "says nothing to run"),
            (
                one("{name: a, component: x, aftr: [b]}"),
                "unknown key `aftr` (did you mean `after`?)",
            ),
            (
                one("{name: a, component: x, after: [b]}"),
                "`b`, which is not a step",
            ),
            (
                one("{name: a, component: x, after: [a]}"),
                "runs after itself",
            ),
            (
                one("{name: a, component: x, after: ['b:maybe']}"),
                "unknown condition `maybe`",
            ),
            (one("{name: '1a', component: x}"), "step name `1a`"),
            (one("{name: 'a b', component: x}"), "step name `a b`"),
            (one("{name: a, component: x, appdef: y}"), "not both"),
            (
                one("{name: a, component: x, cfg: [a]}"),
                "cfg must be a mapping",
            ),
            (
                one("{name: a, component: x, cfg: {k: 'a,b'}}"),
                "may not contain",
            ),
            (
                one("{name: a, component: x, skip_preflight: 1}"),
                "true or false",
            ),
            (
                "name: p\nsteps:\n  - {name: a-b, component: x}\n  - {name: a_b, component: x}\n"
                    .into(),
                "the same name",
            ),
            (
                "name: p\nsteps:\n  - {name: a, component: x, after: [c]}\n  \
                 - {name: b, component: x, after: [a]}\n  - {name: c, component: x, after: [b]}\n"
                    .into(),
                "cycle: a -> c -> b -> a",
            ),
            (
                "name: ../x\nsteps: [{name: a, component: x}]\n".into(),
                "pipeline name",
            ),
            ("[1, 2]".into(), "top level must be a mapping"),
        ] {
            let e = PipelineSpec::parse(&text).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidSpec, "{text}");
            assert!(e.to_string().contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn orders_steps_after_their_dependencies() {
        let spec = PipelineSpec::parse(
            "name: p\nsteps:\n  - {name: c, component: x, after: [b]}\n  \
             - {name: a, component: x}\n  - {name: b, component: x, after: [a]}\n",
        )
        .unwrap();
        let names: Vec<&str> = spec.ordered().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            upstream_env_var("pre-process"),
            "TORCHX_UPSTREAM_PRE_PROCESS_HANDLE"
        );
    }

    #[test]
    fn verdicts_of_a_step() {
        let spec = PipelineSpec::parse(THREE).unwrap();
        let after = &spec.step("cleanup").unwrap().after;
        let states = |train: Option<AppState>, prepare: Option<AppState>| {
            move |s: &str| match s {
                "train" => train,
                "prepare" => prepare,
                _ => Some(Succeeded),
            }
        };
        use AppState::*;
        let (v, dep) = step_verdict(after, states(None, Some(Succeeded)));
        assert_eq!(
            (v, dep.map(|d| d.step.as_str())),
            (Verdict::Waiting, Some("train"))
        );
        let (v, dep) = step_verdict(after, states(Some(Succeeded), Some(Succeeded)));
        assert_eq!(
            (v, dep.map(|d| d.step.as_str())),
            (Verdict::Impossible, Some("train"))
        );
        let (v, _) = step_verdict(after, states(Some(Failed), Some(Succeeded)));
        assert_eq!(v, Verdict::Satisfied);
    }
}
