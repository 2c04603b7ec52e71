//! `torchx plan` on local_cwd: what this machine has (CPUs, GPUs, available memory) against
//! what the app asks.

use std::process::{Command, Stdio};

use crate::scheduler::{PlanCheck, PlanReport};
use crate::specs::AppDef;

/// What this machine has against what the app asks (local_cwd reserves nothing: a job that
/// asks more CPUs or memory than there are still starts, one that asks GPUs there are not
/// cannot use them).
pub(super) fn plan_on_this_machine(app: &AppDef) -> PlanReport {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as i64);
    let gpus = gpu_count();
    let mem_mb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<i64>().ok())
        })
        .map(|kb| kb / 1024);
    let mut report = PlanReport {
        start: Some("now".into()),
        ..PlanReport::default()
    };
    let (mut want_cpu, mut want_gpu, mut want_mem) = (0, 0, 0);
    for role in &app.roles {
        let n = i64::from(role.num_replicas);
        want_cpu += role.resource.cpu.max(0) * n;
        want_gpu += role.resource.gpu.max(0) * n;
        want_mem += role.resource.mem_mb.max(0) * n;
    }
    let free_mem = mem_mb.map_or("unknown".to_string(), |m| format!("{m} MiB available"));
    let detail = format!(
        "asks {want_cpu} CPU, {want_gpu} GPU, {want_mem} MiB in all; this machine has {cpus} \
         CPUs, {gpus} GPUs, {free_mem}"
    );
    if want_gpu > gpus {
        report.checks.push(PlanCheck::fails(
            "resources",
            detail,
            format!("run it where there are {want_gpu} GPUs, or ask for at most {gpus}"),
        ));
    } else {
        report.checks.push(PlanCheck::ok("resources", detail));
    }
    report
}

/// The GPUs `nvidia-smi -L` lists (0 without it).
pub(super) fn gpu_count() -> i64 {
    match Command::new("nvidia-smi")
        .arg("-L")
        .stderr(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count() as i64,
        _ => 0,
    }
}
