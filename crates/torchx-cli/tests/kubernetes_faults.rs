//! Faults on the real cluster (`scripts/k8s/up.sh`, `$TORCHX_TEST_KUBECONFIG`): the API server
//! restarted while `torchx` waits on a job, a pod deleted under a running job, and the node
//! drained. Each disturbs the whole cluster, so they run in their own test binary (cargo runs
//! binaries one at a time) and one at a time within it.

mod support;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::k8s::{api, api_ready, evict, merge_patch, running_pod, Cluster, Way};
use support::{stderr, stdout};

/// One fault at a time: each disturbs what the others would run on.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Polls `holds` every 500 ms for up to `secs` seconds.
fn within(secs: u64, mut holds: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if holds() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The directory of up.sh's pid files and logs (beside the kubeconfig it wrote).
fn run_dir(k8s: &Cluster) -> std::path::PathBuf {
    std::path::Path::new(&k8s.kubeconfig)
        .parent()
        .unwrap()
        .join("run")
}

/// Stops kube-apiserver for `down`, then starts it again with the same command line, as an
/// operator restarting it would, and waits until it is ready.
fn restart_api_server(k8s: &Cluster, down: Duration) {
    let run = run_dir(k8s);
    let pid_file = run.join("kube-apiserver.pid");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    // Gone, or a zombie its parent has not reaped yet.
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z'))
        })
    };
    // SIGTERM, and SIGKILL when it has not ended 10 s later (its graceful shutdown can wait
    // on open streams far longer), as a service manager restarting it would.
    assert!(Command::new("kill").arg(&pid).status().unwrap().success());
    if !within(10, gone) {
        assert!(Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap()
            .success());
    }
    assert!(within(30, gone), "kube-apiserver {pid} did not stop");
    std::thread::sleep(down);
    // Started by a shell that exits at once, as up.sh starts it: the server is nobody's child
    // here and outlives this test binary.
    let log = run.join("kube-apiserver.log");
    let started = Command::new("sh")
        .args([
            "-c",
            "log=$1; shift; nohup \"$@\" >>\"$log\" 2>&1 </dev/null & echo $!",
            "sh",
        ])
        .arg(&log)
        .args(&argv)
        .output()
        .unwrap();
    assert!(started.status.success(), "{}", stderr(&started));
    std::fs::write(&pid_file, stdout(&started).trim()).unwrap();
    assert!(
        within(60, || api_ready(&k8s.kubeconfig)),
        "kube-apiserver did not come back"
    );
}

/// `torchx run --wait --log` of a job in each way, with the API server restarted while they
/// wait: each still prints its job's last line and exits 0, and the job reads SUCCEEDED.
#[test]
fn waiting_on_jobs_survives_an_api_server_restart() {
    let Some(k8s) = Cluster::get("waiting_on_jobs_survives_an_api_server_restart") else {
        return;
    };
    let _one = serial();
    let ways = [Way::IndexedJob, Way::Volcano, Way::Mcad];
    let waiters: Vec<_> = ways
        .iter()
        .map(|way| {
            let mut args = vec!["run", "--workspace", "", "-s", way.scheduler()];
            if !way.cfg().is_empty() {
                args.extend(["-cfg", way.cfg()]);
            }
            args.extend([
                "--wait",
                "--log",
                "utils.sh",
                "--image",
                "busybox:local",
                "-h",
                "NULL",
                "--",
                "sh",
                "-c",
                "echo started; sleep 25; echo survived",
            ]);
            k8s.env
                .cmd(&args)
                .env("KUBECONFIG", &k8s.kubeconfig)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Every job is running before the server goes away.
    let running = || {
        ["kubernetes", "kubernetes_mcad"]
            .iter()
            .map(|scheduler| {
                let out = k8s.run(&["list", "-s", scheduler, "--json"]);
                let apps: serde_json::Value =
                    serde_json::from_str(&stdout(&out)).unwrap_or_default();
                apps.as_array()
                    .map_or(0, |a| a.iter().filter(|x| x["state"] == "RUNNING").count())
            })
            .sum::<usize>()
    };
    // Generous: right after another test's API server restart, Volcano's and MCAD's
    // controllers may take a while to watch again (on a loaded 2-core CI machine, over 90 s).
    assert!(
        within(240, || running() >= ways.len()),
        "the jobs never all ran"
    );
    let ready_while_down = std::thread::scope(|scope| {
        let restart = scope.spawn(|| restart_api_server(&k8s, Duration::from_secs(6)));
        std::thread::sleep(Duration::from_secs(3));
        let ready = api_ready(&k8s.kubeconfig);
        restart.join().unwrap();
        ready
    });
    assert!(!ready_while_down, "the API server was never down");
    for (way, waiter) in ways.iter().zip(waiters) {
        let out = waiter.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
        let printed = format!("{}{}", stdout(&out), stderr(&out));
        assert!(printed.contains("sh/0 survived"), "{way:?}: {printed}");
        let handle = stdout(&out)
            .lines()
            .find(|l| l.starts_with(way.scheduler()))
            .unwrap_or_else(|| panic!("{way:?}: no handle in {printed}"))
            .trim()
            .to_string();
        assert_eq!(k8s.status(&handle)["state"], "SUCCEEDED", "{way:?}");
        k8s.run(&["delete", &handle]);
    }
}

/// While the API server is down, `torchx status` says the cluster does not answer (a
/// non-zero exit, no panic, no library log lines), and answers again once it is back.
#[test]
fn status_while_the_api_server_is_down_says_so() {
    let Some(k8s) = Cluster::get("status_while_the_api_server_is_down_says_so") else {
        return;
    };
    let _one = serial();
    let handle = k8s.sh("sleep 20");
    let stopped = std::thread::scope(|scope| {
        let restart = scope.spawn(|| restart_api_server(&k8s, Duration::from_secs(8)));
        std::thread::sleep(Duration::from_secs(3));
        let out = k8s.run(&["status", &handle]);
        restart.join().unwrap();
        out
    });
    assert_ne!(stopped.status.code(), Some(0), "{}", stdout(&stopped));
    let err = stderr(&stopped);
    assert!(
        !err.contains("panicked") && !err.contains("torchx ERROR"),
        "{err}"
    );
    assert!(
        err.contains("kubernetes: ") && err.contains("the Kubernetes API server does not answer"),
        "the error says the cluster does not answer: {err}"
    );
    let s = k8s.wait_ended(&handle);
    assert_eq!(s["state"], "SUCCEEDED", "{s}");
    k8s.run(&["delete", &handle]);
}

/// A pod deleted under a running job (`kubectl delete pod`), whose program ends on SIGTERM as
/// a trainer does: an Indexed Job with a retry left makes it again and succeeds; without one
/// it fails at its backoff limit, as on any cluster (and `torchx log` says the pod is gone);
/// MCAD never makes a wrapped pod again, and the AppWrapper reads FAILED, naming the pod,
/// instead of RUNNING forever. (A Volcano Job re-creates a deleted pod or fails, depending on
/// whether its controller saw the pod fail before it was gone: not asserted.)
#[test]
fn a_deleted_pod_is_made_again_or_fails_the_job() {
    let Some(k8s) = Cluster::get("a_deleted_pod_is_made_again_or_fails_the_job") else {
        return;
    };
    let _one = serial();
    let script = "trap 'exit 143' TERM; echo run; sleep 8 & wait; echo done";
    let submit = |way: Way, retries: &str| {
        k8s.submit(
            way.scheduler(),
            way.cfg(),
            &[
                "utils.sh",
                "--image",
                "busybox:local",
                "-h",
                "NULL",
                "--max_retries",
                retries,
                "--",
                "sh",
                "-c",
                script,
            ],
        )
    };
    let cases = [
        (Way::IndexedJob, "1", "SUCCEEDED"),
        (Way::IndexedJob, "0", "FAILED"),
        (Way::Mcad, "0", "FAILED"),
    ];
    let handles: Vec<String> = cases.iter().map(|(way, r, _)| submit(*way, r)).collect();
    for handle in &handles {
        k8s.wait_log(handle, "run");
        let pod = running_pod(&k8s.kubeconfig, handle);
        let gone = api(
            &k8s.kubeconfig,
            "DELETE",
            &format!("/api/v1/namespaces/default/pods/{pod}"),
            None,
        );
        assert_eq!(gone["kind"], "Pod", "{gone}");
    }
    for ((way, retries, want), handle) in cases.iter().zip(&handles) {
        let mut last = serde_json::Value::Null;
        let ended = within(150, || {
            last = k8s.status(handle);
            last["state"] == "SUCCEEDED" || last["state"] == "FAILED"
        });
        assert!(ended, "{way:?} {retries}: {last}");
        assert_eq!(last["state"], *want, "{way:?} {retries}: {last}");
        let msg = last["msg"].as_str().unwrap();
        let log = k8s.run(&["log", handle]);
        match (way, *want) {
            (Way::Mcad, _) => assert!(
                msg.contains("of sh/0 is gone") && msg.contains("MCAD does not make it again"),
                "{msg}"
            ),
            (_, "SUCCEEDED") => assert!(stdout(&log).contains("sh/0 done"), "{}", stdout(&log)),
            _ => {
                assert!(msg.contains("backoff limit"), "{msg}");
                assert!(
                    stderr(&log).contains("no pod of it is left"),
                    "{}",
                    stderr(&log)
                );
            }
        }
        k8s.run(&["delete", handle]);
    }
}

/// The node drained (cordoned, its pod evicted) under a job with a recovery option: the job
/// waits PENDING, not FAILED, while no node takes pods, and runs its new attempt once the
/// node is uncordoned, as an Indexed Job and as a Volcano Job.
#[test]
fn a_drained_node_holds_the_job_pending_until_it_is_back() {
    let Some(k8s) = Cluster::get("a_drained_node_holds_the_job_pending_until_it_is_back") else {
        return;
    };
    let _one = serial();
    /// Cordons the node; uncordons it when dropped (a failing test leaves it usable).
    struct Cordoned<'a>(&'a str);
    fn cordon(kubeconfig: &str, unschedulable: bool) {
        let patch = serde_json::json!({"spec": {"unschedulable": unschedulable}});
        let node = merge_patch(kubeconfig, "/api/v1/nodes/torchx-node", &patch);
        assert_eq!(node["kind"], "Node", "{node}");
    }
    impl Drop for Cordoned<'_> {
        fn drop(&mut self) {
            cordon(self.0, false);
        }
    }
    let ckpt = k8s.env.cwd.join("ckpt");
    for way in [Way::IndexedJob, Way::Volcano] {
        let _ = std::fs::remove_dir_all(&ckpt);
        let handle = k8s.preemptible(way, &ckpt);
        k8s.wait_log(&handle, "first");
        let pod = running_pod(&k8s.kubeconfig, &handle);
        cordon(&k8s.kubeconfig, true);
        let cordoned = Cordoned(&k8s.kubeconfig);
        let answer = evict(&k8s.kubeconfig, &pod);
        let held = within(60, || k8s.status(&handle)["state"] == "PENDING");
        let still = (0..6).all(|_| {
            std::thread::sleep(Duration::from_secs(1));
            k8s.status(&handle)["state"] == "PENDING"
        });
        drop(cordoned);
        assert_eq!(answer["status"], "Success", "{way:?}: {answer}");
        assert!(held && still, "{way:?}: {}", k8s.status(&handle));
        let s = k8s.wait_ended(&handle);
        assert_eq!(s["state"], "SUCCEEDED", "{way:?}: {s}");
        let log = stdout(&k8s.run(&["log", &handle]));
        assert!(log.contains("again in attempt 1"), "{way:?}: {log}");
        k8s.run(&["delete", &handle]);
    }
}
