//! A supervised container's side (local_docker's foreground `docker run` under this
//! supervisor): its processes as the host sees them, its signals, its removal.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `docker ARGS` with no input and no error output, for its exit status and stdout.
/// The host pids of a running container's processes (`docker top`), but Docker's own init
/// (`--init`), which only passes signals on.
pub(super) fn container_pids(name: &str) -> Vec<u32> {
    let Some(out) = quiet_docker(&["top", name, "-eo", "pid"]) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map_or(true, |comm| comm.trim() != "docker-init")
        })
        .collect();
    pids.sort_unstable();
    pids
}

pub(super) fn quiet_docker(args: &[&str]) -> Option<std::process::Output> {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
}

/// Removes the container of an attempt that ended (its `docker run` has no `--rm`, so that
/// the engine can still be asked how it ended); true if the engine says it was killed for
/// using too much memory. The engine learns of an OOM kill from an event of its own, which
/// may come after the exit: a `killed` container is asked again for up to a second.
pub(super) fn remove_container(name: &str, killed: bool) -> bool {
    let oom_killed = || {
        quiet_docker(&["inspect", "-f", "{{.State.OOMKilled}}", name])
            .is_some_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "true")
    };
    let mut oom = oom_killed();
    let deadline = Instant::now() + Duration::from_secs(1);
    while killed && !oom && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        oom = oom_killed();
    }
    quiet_docker(&["rm", "-f", name]);
    oom
}

/// Sends `signal` to a replica's container: `docker run` passes on only the signals it can
/// catch, and a killed `docker run` would leave its container running. `docker kill` runs in
/// the background; the loop reaps it with the other children it does not track.
pub(super) fn signal_container(name: &str, signal: i32) {
    let spawned = Command::new("docker")
        .args(["kill", "--signal", &signal.to_string(), name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        note!("torchx supervisor: cannot run `docker kill` for container {name}: {e}");
    }
}
