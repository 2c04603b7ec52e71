//! `torchx plan` and `torchx run -s auto:S1,S2,...`: a job planned on each scheduler (its dry
//! run, the pre-flight checks and what the scheduler can tell before anything is queued), one
//! row each with a verdict; `auto` submits to the first `ok` one.

use clap::Args;
use torchx::opts::Cfg;
use torchx::runner::PlanRow;
use torchx::runner::{ComponentOutcome, RunArgs as LibRunArgs};
use torchx::scheduler::{CheckOutcome, PlanVerdict};
use torchx::specs::{AppDef, Workspace};
use torchx::{Error, Result, Runner};

use crate::exit_codes;
use crate::output::print_json;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The schedulers to plan on, comma-separated (default: the configured scheduler).
    #[arg(short = 's', long, value_name = "S1,S2,...")]
    pub scheduler: Option<String>,
    /// Run options: key=value for every scheduler that has the option, S.key=value for
    /// scheduler S only; .torchxconfig sections fill the rest. Also -cfg.
    #[arg(long = "cfg", alias = "scheduler_args", value_name = "CFG")]
    pub cfg: Vec<String>,
    /// A workspace to plan with (built into images, or copied; never pushed by plan).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// The component (utils.echo, ./app.yaml) followed by its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMPONENT_AND_ARGS"
    )]
    pub component_and_args: Vec<String>,
}

/// The part of a `-cfg` string meant for `scheduler`: `S.key=value` items for it (without the
/// prefix), and unprefixed items whose key it has; items for other schedulers are left out.
pub fn cfg_for(
    runner: &Runner,
    scheduler: &str,
    raw: &str,
    schedulers: &[String],
) -> Result<String> {
    let opts = super::block_on(runner.scheduler(scheduler))?.run_opts();
    // Items start at a comma followed by `key=`; anything else continues a list value.
    let mut items: Vec<String> = Vec::new();
    for part in raw.split(',').filter(|p| !p.is_empty()) {
        let starts_item = part
            .split_once('=')
            .is_some_and(|(k, _)| !k.is_empty() && !k.contains([';', ' ']));
        match items.last_mut() {
            Some(last) if !starts_item => {
                last.push(',');
                last.push_str(part);
            }
            _ => items.push(part.to_string()),
        }
    }
    let mut mine = Vec::new();
    for item in items {
        let (key, value) = item.split_once('=').unwrap_or((item.as_str(), ""));
        match key.split_once('.') {
            Some((s, k)) if s == scheduler => mine.push(format!("{k}={value}")),
            Some((s, _)) if schedulers.iter().any(|x| x == s) => {}
            _ if schedulers.len() == 1 || opts.get(key).is_some() => mine.push(item.clone()),
            _ => {}
        }
    }
    Ok(mine.join(","))
}

/// The app the component builds (or its help text).
fn build(runner: &Runner, tokens: &[String]) -> Result<ComponentOutcome<AppDef>> {
    let mut tokens = tokens.to_vec();
    if tokens.first().map(String::as_str) == Some("--") {
        tokens.remove(0);
    }
    let Some(component) = tokens.first().cloned() else {
        return Err(Error::arg(
            "missing component: give a component (utils.echo, ./app.yaml) and its arguments",
        ));
    };
    super::block_on(runner.build_component(&component, &tokens[1..]))
}

/// Plans `tokens` (a component and its arguments) on each of `schedulers`.
pub fn plan_rows(
    runner: &Runner,
    schedulers: &[String],
    raw_cfg: &str,
    workspace: Option<&str>,
    tokens: &[String],
) -> Result<ComponentOutcome<Vec<PlanRow>>> {
    let app = match build(runner, tokens)? {
        ComponentOutcome::Help(h) => return Ok(ComponentOutcome::Help(h)),
        ComponentOutcome::Done(app) => app,
    };
    let args = LibRunArgs {
        workspace: workspace
            .filter(|w| !w.is_empty())
            .map(Workspace::parse)
            .transpose()?,
        ..LibRunArgs::default()
    };
    let mut rows = Vec::new();
    for scheduler in schedulers {
        let cfg: Result<Cfg> = cfg_for(runner, scheduler, raw_cfg, schedulers)
            .and_then(|c| super::block_on(runner.cfg_from_str(scheduler, &c)).map(|(cfg, _)| cfg));
        let row = match cfg {
            Ok(cfg) => super::block_on(runner.plan(app.clone(), scheduler, &cfg, &args)),
            Err(e) => PlanRow {
                scheduler: scheduler.clone(),
                verdict: PlanVerdict::Fails,
                checks: vec![torchx::scheduler::PlanCheck::fails(
                    "run options",
                    e.message(),
                    match e.suggestion() {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("`torchx runopts {scheduler}` lists them"),
                    },
                )],
                resources: Vec::new(),
                start: None,
                dryrun: None,
            },
        };
        rows.push(with_remedies(row));
    }
    Ok(ComponentOutcome::Done(rows))
}

/// The row with each failed check's way around it added to its fix, as the CLI's flag.
fn with_remedies(mut row: PlanRow) -> PlanRow {
    for c in &mut row.checks {
        let way = c.remedy.and_then(crate::output::remedy);
        if let (CheckOutcome::Fails { fix }, Some(way)) = (&mut c.outcome, way) {
            *fix = format!("{fix}, or {way}");
        }
    }
    row
}

fn print_rows(rows: &[PlanRow]) {
    for row in rows {
        let start = row
            .start
            .as_deref()
            .map(|s| format!(" (would start: {s})"))
            .unwrap_or_default();
        println!("{}: {}{start}", row.scheduler, row.verdict.as_str());
        for r in &row.resources {
            println!("  asks  {r}");
        }
        for c in &row.checks {
            match &c.outcome {
                CheckOutcome::Ok => println!("  ok    {}: {}", c.check, c.detail),
                CheckOutcome::Fails { fix } => {
                    println!("  FAILS {}: {}\n        -> {fix}", c.check, c.detail)
                }
                CheckOutcome::Unknown { why } => println!("  ?     {}: {why}", c.check),
            }
        }
    }
}

/// Why a row is not `ok`, in one line.
pub fn why_not(row: &PlanRow) -> String {
    row.checks
        .iter()
        .find_map(|c| match &c.outcome {
            CheckOutcome::Fails { .. } => Some(format!("{}: {}", c.check, c.detail)),
            CheckOutcome::Unknown { why } => Some(format!("{}: {why}", c.check)),
            CheckOutcome::Ok => None,
        })
        .unwrap_or_default()
}

/// `torchx plan`.
pub fn plan(a: PlanArgs) -> Result<i32> {
    let runner = super::runner()?;
    let schedulers: Vec<String> = match &a.scheduler {
        Some(s) => super::split_list(s),
        None => vec![runner.config().cli_run().scheduler.unwrap_or_else(|| {
            runner
                .registry()
                .default_name()
                .unwrap_or("local_cwd")
                .into()
        })],
    };
    if schedulers.is_empty() {
        return Err(Error::arg(
            "-s: give one or more schedulers, comma-separated",
        ));
    }
    let raw_cfg = a.cfg.join(",");
    let rows = match plan_rows(
        &runner,
        &schedulers,
        &raw_cfg,
        a.workspace.as_deref(),
        &a.component_and_args,
    )? {
        ComponentOutcome::Help(h) => {
            print!("{h}");
            return Ok(exit_codes::OK);
        }
        ComponentOutcome::Done(rows) => rows,
    };
    if a.json {
        print_json(&serde_json::to_value(&rows).unwrap_or_default());
    } else {
        print_rows(&rows);
    }
    Ok(if rows.iter().any(|r| r.verdict == PlanVerdict::Ok) {
        exit_codes::OK
    } else {
        exit_codes::JOB_FAILED
    })
}

/// What `run -s auto:S1,S2,...` chose.
pub struct AutoChoice {
    /// The schedulers whose plan is `ok`, in order, each with its part of `-cfg`.
    pub ok: Vec<(String, String)>,
    /// The app's name (none when the component's `--help` was asked).
    pub app_name: Option<String>,
}

/// `run -s auto:S1,S2,...`: the schedulers whose plan is `ok`; says on stderr why the others
/// were skipped. An error when none is.
pub fn choose(
    runner: &Runner,
    spec: &str,
    raw_cfg: &str,
    workspace: Option<&str>,
    tokens: &[String],
) -> Result<AutoChoice> {
    let schedulers = super::split_list(spec);
    if schedulers.is_empty() {
        return Err(Error::arg(
            "-s auto:S1,S2,...: give the schedulers to try, in order (e.g. auto:slurm,local_cwd)",
        ));
    }
    let rows = match plan_rows(runner, &schedulers, raw_cfg, workspace, tokens)? {
        // `--help` of the component: the first scheduler prints it.
        ComponentOutcome::Help(_) => {
            let cfg = cfg_for(runner, &schedulers[0], raw_cfg, &schedulers)?;
            return Ok(AutoChoice {
                ok: vec![(schedulers[0].clone(), cfg)],
                app_name: None,
            });
        }
        ComponentOutcome::Done(rows) => rows,
    };
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    for row in &rows {
        if row.verdict == PlanVerdict::Ok {
            ok.push((
                row.scheduler.clone(),
                cfg_for(runner, &row.scheduler, raw_cfg, &schedulers)?,
            ));
        } else {
            skipped.push(format!(
                "{} ({}: {})",
                row.scheduler,
                row.verdict.as_str(),
                why_not(row)
            ));
        }
    }
    if ok.is_empty() {
        return Err(Error::arg(format!(
            "-s auto: no scheduler can run this job: {}",
            skipped.join("; ")
        )));
    }
    for s in &skipped {
        eprintln!("torchx: -s auto: skipped {s}");
    }
    eprintln!("torchx: -s auto: running on {}", ok[0].0);
    let app_name = rows
        .iter()
        .find_map(|row| row.dryrun.as_ref())
        .map(|d| d.app.name.clone());
    Ok(AutoChoice { ok, app_name })
}
