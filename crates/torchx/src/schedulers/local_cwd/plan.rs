//! `torchx plan` on local_cwd: what this machine has (CPUs, GPUs, available memory) against
//! what the app asks.

use std::time::Duration;

use super::NAME;

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

/// The GPUs `nvidia-smi -L` lists (0 without it, or when it does not answer within
/// [`GPU_QUERY_TIMEOUT`]: a wedged driver must not hang a replica's start or a plan).
pub(super) fn gpu_count() -> i64 {
    gpus_listed_by("nvidia-smi", GPU_QUERY_TIMEOUT)
}

/// How long `nvidia-smi -L` may take.
const GPU_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

fn gpus_listed_by(program: &str, timeout: Duration) -> i64 {
    match crate::schedulers::command::run(NAME, program, &["-L"], &[], timeout, "GPUs") {
        Ok(out) if out.ok => out.stdout.lines().filter(|l| !l.trim().is_empty()).count() as i64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &std::path::Path, body: &str) -> String {
        let path = dir.join("nvidia-smi");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    /// A wedged driver (an `nvidia-smi` that never answers) costs the timeout, not the start.
    #[test]
    fn a_wedged_nvidia_smi_counts_no_gpus_after_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let two = script(dir.path(), "echo 'GPU 0: A'; echo 'GPU 1: B'");
        // Retried: a fork elsewhere in this test process may hold the new script open for
        // writing an instant (ETXTBSY).
        let listed = (0..5)
            .map(|_| gpus_listed_by(&two, Duration::from_secs(10)))
            .find(|&n| n == 2);
        assert_eq!(listed, Some(2));
        let wedged = script(dir.path(), "exec sleep 600");
        let started = std::time::Instant::now();
        assert_eq!(gpus_listed_by(&wedged, Duration::from_millis(300)), 0);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            gpus_listed_by("/no/such/nvidia-smi", Duration::from_secs(1)),
            0
        );
    }
}
