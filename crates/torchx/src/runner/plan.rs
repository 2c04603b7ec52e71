//! `torchx plan` and `run -s auto`: a job's dry run on each of several schedulers, the
//! pre-flight checks, and what each scheduler can tell before anything is queued
//! ([`Scheduler::plan`](crate::scheduler::Scheduler::plan)), as one row per scheduler with a
//! verdict.

use serde::Serialize;

use crate::error::{ErrorKind, Remedy, Result};
use crate::opts::Cfg;
use crate::runner::RunArgs;
use crate::scheduler::{DryRunInfo, PlanCheck, PlanVerdict};
use crate::specs::AppDef;
use crate::Runner;

/// One scheduler's plan of a job.
#[derive(Debug, Serialize)]
pub struct PlanRow {
    /// The scheduler.
    pub scheduler: String,
    /// `ok`, `fails` or `unknown`.
    pub verdict: PlanVerdict,
    /// Every check made (or not), in order.
    pub checks: Vec<PlanCheck>,
    /// What each role asks for: `role: N × CPU, GPU, MiB`.
    pub resources: Vec<String>,
    /// When it would start, where the scheduler can tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// The dry run, when it could be made (what `run` would submit).
    #[serde(skip)]
    pub dryrun: Option<DryRunInfo>,
}

/// Whether a dry run's error is certain to happen again at submission (a mistake in the job
/// or its options) rather than a backend that could not be asked.
fn certain(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidArgument
            | ErrorKind::InvalidSpec
            | ErrorKind::InvalidConfig
            | ErrorKind::NotFound
            | ErrorKind::Unsupported
    )
}

fn resources(app: &AppDef) -> Vec<String> {
    app.roles
        .iter()
        .map(|r| {
            let res = &r.resource;
            // A negative amount is TorchX's "not asked" (the NULL resource's -1).
            let asks: Vec<String> = [(res.cpu, "CPU"), (res.gpu, "GPU"), (res.mem_mb, "MiB")]
                .into_iter()
                .filter(|(n, _)| *n >= 0)
                .map(|(n, unit)| format!("{n} {unit}"))
                .collect();
            let asks = if asks.is_empty() {
                "no resources named".to_string()
            } else {
                asks.join(", ")
            };
            format!("{}: {} × {asks}", r.name, r.num_replicas)
        })
        .collect()
}

/// The workspace images the dry run planned, built on the local engine (or found there) but
/// never pushed: a workspace that does not build fails the plan.
#[cfg(feature = "docker")]
async fn build_workspace_images(info: &DryRunInfo) -> PlanCheck {
    let images: Vec<_> = info
        .images
        .iter()
        .cloned()
        .map(|mut i| {
            i.push = false;
            i
        })
        .collect();
    let names: Vec<&str> = images.iter().map(|i| i.image.as_str()).collect();
    let check = "workspace image";
    // An engine that does not answer says nothing about the workspace; once it answers, a
    // failed build is the workspace's.
    if let Err(e) = crate::workspace::docker::connect(&info.scheduler).await {
        return PlanCheck::unknown(check, e.to_string());
    }
    match crate::workspace::docker::build_images(&images, &info.scheduler, true).await {
        Ok(()) => PlanCheck::ok(check, format!("builds: {} (not pushed)", names.join(", "))),
        Err(e) => PlanCheck::fails(
            check,
            format!("does not build: {}", e.message()),
            "fix the workspace's Dockerfile (or what it copies)",
        ),
    }
}

impl Runner {
    /// The plan of `app` on `scheduler` with `cfg`: its dry run (a mistake there fails the
    /// plan), the pre-flight checks, then the scheduler's own checks. Never submits; an error
    /// is a check, not a failure of the call.
    pub async fn plan(&self, app: AppDef, scheduler: &str, cfg: &Cfg, args: &RunArgs) -> PlanRow {
        let mut row = PlanRow {
            scheduler: scheduler.to_string(),
            verdict: PlanVerdict::Ok,
            checks: Vec::new(),
            resources: resources(&app),
            start: None,
            dryrun: None,
        };
        let args = RunArgs {
            // Planned, not skipped: the checks are what plan is for.
            skip_preflight: false,
            ..args.clone()
        };
        match self.dryrun(app, scheduler, cfg, &args).await {
            Err(e) if certain(e.kind()) => {
                row.checks.push(PlanCheck {
                    remedy: e.remedy(),
                    ..PlanCheck::fails("dry run", e.message(), e.message())
                });
            }
            Err(e) => row
                .checks
                .push(PlanCheck::unknown("dry run", e.to_string())),
            Ok(info) => {
                row.checks
                    .push(PlanCheck::ok("dry run", "the request renders"));
                for problem in &info.preflight {
                    row.checks.push(
                        PlanCheck::fails("pre-flight", problem.clone(), "fix the path")
                            .with_remedy(Remedy::SkipPreflight),
                    );
                }
                match self.scheduler(scheduler).await {
                    Ok(s) => match s.plan(&info).await {
                        Ok(report) => {
                            row.checks.extend(report.checks);
                            row.start = report.start;
                        }
                        Err(e) if certain(e.kind()) => {
                            row.checks
                                .push(PlanCheck::fails(scheduler, e.message(), e.message()))
                        }
                        Err(e) => row
                            .checks
                            .push(PlanCheck::unknown(scheduler, e.to_string())),
                    },
                    Err(e) => {
                        row.checks
                            .push(PlanCheck::fails("scheduler", e.message(), e.message()))
                    }
                }
                #[cfg(feature = "docker")]
                if !info.images.is_empty() {
                    row.checks.push(build_workspace_images(&info).await);
                }
                row.dryrun = Some(info);
            }
        }
        row.verdict = crate::scheduler::PlanReport {
            checks: row.checks.clone(),
            start: None,
        }
        .verdict();
        row
    }

    /// [`plan`](Self::plan) of each `(scheduler, cfg)`, in order.
    pub async fn plan_each(
        &self,
        app: &AppDef,
        targets: &[(String, Cfg)],
        args: &RunArgs,
    ) -> Result<Vec<PlanRow>> {
        let mut rows = Vec::with_capacity(targets.len());
        for (scheduler, cfg) in targets {
            rows.push(self.plan(app.clone(), scheduler, cfg, args).await);
        }
        Ok(rows)
    }
}
