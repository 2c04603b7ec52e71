//! What Batch can tell about a job before it is queued: its job queue (exists, enabled) and
//! the queue's compute environments' vCPU capacity against a replica.

use aws_sdk_batch::types as bt;

use super::{aws_err, AwsBatchScheduler, BatchJob};
use crate::error::Result;
use crate::scheduler::{DryRunInfo, PlanCheck, PlanReport};

pub(super) async fn plan(
    s: &AwsBatchScheduler,
    job: &BatchJob,
    info: &DryRunInfo,
) -> Result<PlanReport> {
    let check = format!("job queue {}", job.queue);
    let mut report = PlanReport::default();
    let described = match s.batch().await {
        Ok(batch) => batch
            .describe_job_queues()
            .job_queues(&job.queue)
            .send()
            .await
            .map_err(aws_err("describing the job queue")),
        Err(e) => Err(e),
    };
    let queue = match described {
        Ok(out) => out.job_queues().first().cloned(),
        Err(e) => {
            report.checks.push(PlanCheck::unknown(check, e.to_string()));
            return Ok(report);
        }
    };
    let Some(queue) = queue else {
        report.checks.push(PlanCheck::fails(
            check,
            "Batch has no such job queue",
            "give an existing queue (run option `queue=...`; `aws batch describe-job-queues`)",
        ));
        return Ok(report);
    };
    if queue.state() == Some(&bt::JqState::Disabled) {
        report.checks.push(PlanCheck::fails(
            check,
            "the queue is disabled",
            "enable it, or give another queue",
        ));
        return Ok(report);
    }
    report.checks.push(PlanCheck::ok(
        check,
        queue.status().map_or("exists", |s| s.as_str()).to_string(),
    ));
    let environments: Vec<String> = queue
        .compute_environment_order()
        .iter()
        .filter_map(|o| o.compute_environment().map(String::from))
        .collect();
    let described = match s.batch().await {
        Ok(batch) => batch
            .describe_compute_environments()
            .set_compute_environments(Some(environments))
            .send()
            .await
            .map_err(aws_err("describing the compute environments")),
        Err(e) => Err(e),
    };
    let asks = info
        .app
        .roles
        .iter()
        .map(|r| r.resource.cpu.max(1))
        .max()
        .unwrap_or(1);
    report.checks.push(match described {
        Ok(out) => {
            let max_vcpus = out
                .compute_environments()
                .iter()
                .filter_map(|ce| ce.compute_resources().and_then(|c| c.maxv_cpus()))
                .max();
            capacity_check(max_vcpus, asks)
        }
        Err(e) => PlanCheck::unknown("capacity", e.to_string()),
    });
    Ok(report)
}

/// Whether a replica asking `asks` vCPUs fits the queue's compute environments, the largest
/// of which allows `max_vcpus` (`None`: unmanaged environments, whose capacity is the
/// instances their owner runs, which Batch does not state).
pub(super) fn capacity_check(max_vcpus: Option<i32>, asks: i64) -> PlanCheck {
    match max_vcpus {
        None => PlanCheck::ok(
            "capacity",
            "unmanaged compute environments: capacity is the instances you run",
        ),
        Some(max) if i64::from(max) < asks => PlanCheck::fails(
            "capacity",
            format!(
                "a replica asks {asks} vCPUs; the queue's largest compute environment allows {max}"
            ),
            "ask for fewer CPUs per replica, or use a queue with bigger compute environments",
        ),
        Some(max) => PlanCheck::ok(
            "capacity",
            format!("a replica asks {asks} vCPUs; compute environments allow up to {max}"),
        ),
    }
}
