//! The `kubernetes` and `kubernetes_mcad` schedulers against a real Kubernetes control plane
//! (`scripts/k8s/up.sh`: etcd, kube-apiserver, kube-controller-manager and kube-scheduler of a
//! current release, with Volcano's and MCAD's CRDs), found through `$TORCHX_TEST_KUBECONFIG`
//! (`.ci/run` sets it from up.sh's last line; other suites keep their own `KUBECONFIG`).
//!
//! What this proves: the real API server validates (strict field validation, the CRDs'
//! schemas), defaults and stores every object we submit; Volcano's admission webhook defaults
//! and checks our Volcano Jobs, its controller and scheduler make and gang their pods, MCAD's
//! controller dispatches our AppWrappers; the Job controller makes the pods of our Indexed
//! Jobs, the scheduler places them on the node, whose kubelet runs them (containerd, runc, a
//! CNI bridge): status through Pending, Running, Succeeded and Failed, logs from the kubelet,
//! cancel, list and delete on real objects, in each of the three ways we submit. The fake API
//! server (`tests/kubernetes.rs`) keeps what a real cluster cannot be made to do on demand (API
//! errors, throttling).

mod support;

use std::time::Duration;

use support::k8s::{check, eventually, evict, running_pod, Cluster, Way};
use support::{stderr, stdout};

/// A job runs on the node: SUCCEEDED, its log read from the kubelet, listed, then deleted.
fn a_job_runs_and_its_log_is_read(way: Way) {
    let Some(k8s) = Cluster::get(&format!("a_job_runs_and_its_log_is_read {way:?}")) else {
        return;
    };
    let handle = k8s.sh_as(way, "echo one; echo two");
    let s = k8s.wait_status(&handle, |s| s["state"] == "SUCCEEDED");
    assert_eq!(s["roles"][0]["replicas"][0]["state"], 4, "{way:?}: {s}");
    let log = k8s.run(&["log", &handle]);
    assert_eq!(log.status.code(), Some(0), "{way:?}: {}", stderr(&log));
    assert_eq!(stdout(&log), "sh/0 one\nsh/0 two\n", "{way:?}");
    let listed = k8s.run(&["list", "-s", way.scheduler(), "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let ours = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["app_handle"] == handle.as_str())
        .unwrap_or_else(|| panic!("{way:?}: {handle} not in {listed}"));
    assert_eq!(ours["state"], "SUCCEEDED", "{way:?}: {ours}");
    assert_eq!(ours["name"], "sh", "{way:?}: {ours}");
    let out = k8s.run(&["delete", &handle]);
    assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
    k8s.wait_gone(&handle);
}

#[test]
fn an_indexed_job_runs_and_its_log_is_read() {
    a_job_runs_and_its_log_is_read(Way::IndexedJob);
}

#[test]
fn a_volcano_job_runs_and_its_log_is_read() {
    a_job_runs_and_its_log_is_read(Way::Volcano);
}

#[test]
fn an_appwrapper_runs_and_its_log_is_read() {
    a_job_runs_and_its_log_is_read(Way::Mcad);
}

/// The hang watch in the container's shell: a quiet pod is hung, its processes' stacks are in
/// its log (`log --stacks`), it is stopped, and the app is FAILED with the attempt `hung` and
/// what the watch said (the termination message) in its status; a pod that prints runs on.
fn a_quiet_pod_is_hung(way: Way) {
    let Some(k8s) = Cluster::get(&format!("a_quiet_pod_is_hung {way:?}")) else {
        return;
    };
    let submit = |script: &str| k8s.sh_with(way, &["--hang_timeout", "4s"], script);
    let quiet = submit("echo started; sleep 300");
    let prints = submit("for i in 1 2 3 4; do echo $i; sleep 2; done");
    let s = k8s.wait_status(&quiet, |s| s["state"] == "FAILED");
    let msg = s["msg"].as_str().unwrap();
    assert!(
        msg.contains("hung: sh/0 made no progress (output or heartbeat) for 4s"),
        "{way:?}: {s}"
    );
    let reasons: Vec<&str> = s["roles"][0]["replicas"][0]["attempts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["reason"].as_str())
        .collect();
    assert_eq!(reasons.last(), Some(&"hung"), "{way:?}: {s}");
    let stacks = k8s.run(&["log", "--stacks", &quiet]);
    assert_eq!(
        stacks.status.code(),
        Some(0),
        "{way:?}: {}",
        stderr(&stacks)
    );
    let stacks = stdout(&stacks);
    assert!(
        stacks.starts_with("--- sh/0 attempt 0 ---\n=== sh/0 pid "),
        "{way:?}: {stacks}"
    );
    assert!(stacks.contains("sleep 300"), "{way:?}: {stacks}");
    let s = k8s.wait_status(&prints, |s| {
        !["PENDING", "RUNNING", "UNKNOWN"].contains(&s["state"].as_str().unwrap())
    });
    assert_eq!(s["state"], "SUCCEEDED", "{way:?}: {s}");
    for handle in [&quiet, &prints] {
        k8s.run(&["delete", handle]);
    }
}

#[test]
fn a_quiet_indexed_job_pod_is_hung() {
    a_quiet_pod_is_hung(Way::IndexedJob);
}

#[test]
fn a_quiet_volcano_job_pod_is_hung() {
    a_quiet_pod_is_hung(Way::Volcano);
}

#[test]
fn a_quiet_appwrapper_pod_is_hung() {
    a_quiet_pod_is_hung(Way::Mcad);
}

/// A pod whose command fails ends the app FAILED (Volcano's webhook makes the gang need it),
/// with the container's exit code, and no restart.
fn a_failing_pod_fails_the_app(way: Way) {
    let Some(k8s) = Cluster::get(&format!("a_failing_pod_fails_the_app {way:?}")) else {
        return;
    };
    let handle = k8s.sh_as(way, "echo bad >&2; exit 3");
    let s = k8s.wait_status(&handle, |s| {
        !["PENDING", "RUNNING", "UNKNOWN"].contains(&s["state"].as_str().unwrap())
    });
    assert_eq!(s["state"], "FAILED", "{way:?}: {s}");
    let msg = s["msg"].as_str().unwrap();
    assert!(
        msg.contains("sh/0 exited with code 3 (Error)"),
        "{way:?}: {s}"
    );
    assert_eq!(s["num_restarts"], 0, "no restart without max_retries: {s}");
    let log = stdout(&k8s.run(&["log", &handle]));
    assert!(log.contains("bad"), "{way:?}: {log}");
    k8s.run(&["delete", &handle]);
}

#[test]
fn a_failing_pod_fails_the_indexed_job() {
    a_failing_pod_fails_the_app(Way::IndexedJob);
}

#[test]
fn a_failing_pod_fails_the_volcano_job() {
    a_failing_pod_fails_the_app(Way::Volcano);
}

#[test]
fn a_failing_pod_fails_the_appwrapper() {
    a_failing_pod_fails_the_app(Way::Mcad);
}

/// Whether a pod of `handle` still runs `sleep 300` on this machine (its `TORCHX_JOB_ID` is
/// `<scheduler>://<session>/<name>`, as TorchX's, without the namespace).
fn pod_still_sleeps(handle: &str) -> bool {
    let name = handle.rsplit(':').next().unwrap();
    let ps = std::process::Command::new("pgrep")
        .args(["-f", "sleep 300"])
        .output()
        .unwrap();
    stdout(&ps)
        .lines()
        .filter_map(|p| std::fs::read(format!("/proc/{}/environ", p.trim())).ok())
        .any(|env| {
            env.split(|b| *b == 0).any(|var| {
                let var = String::from_utf8_lossy(var);
                var.starts_with("TORCHX_JOB_ID=") && var.ends_with(&format!("/{name}"))
            })
        })
}

/// A running job is cancelled: CANCELLED (an AppWrapper, deleted as TorchX does, is gone), and
/// its pod stops on the node.
fn a_running_job_is_cancelled(way: Way) {
    let Some(k8s) = Cluster::get(&format!("a_running_job_is_cancelled {way:?}")) else {
        return;
    };
    let handle = k8s.sh_as(way, "echo up; sleep 300");
    k8s.wait_status(&handle, |s| s["state"] == "RUNNING");
    k8s.wait_log(&handle, "up");
    assert!(
        pod_still_sleeps(&handle),
        "{way:?}: no pod of {handle} found running"
    );
    let out = k8s.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
    match way {
        Way::Mcad => k8s.wait_gone(&handle),
        Way::IndexedJob | Way::Volcano => {
            k8s.wait_status(&handle, |s| s["state"] == "CANCELLED");
        }
    }
    eventually(|| {
        check(!pod_still_sleeps(&handle), || {
            format!("{way:?}: the pod of {handle} still runs")
        })
    });
    k8s.run(&["delete", &handle]);
}

#[test]
fn a_running_indexed_job_is_cancelled_and_its_pod_stops() {
    a_running_job_is_cancelled(Way::IndexedJob);
}

#[test]
fn a_running_volcano_job_is_cancelled_and_its_pod_stops() {
    a_running_job_is_cancelled(Way::Volcano);
}

#[test]
fn a_running_appwrapper_is_cancelled_and_its_pod_stops() {
    a_running_job_is_cancelled(Way::Mcad);
}

/// An array is one Indexed Job: each task runs with its index, each ends SUCCEEDED.
#[test]
fn an_array_is_one_indexed_job_whose_tasks_run() {
    let Some(k8s) = Cluster::get("an_array_is_one_indexed_job") else {
        return;
    };
    let out = k8s.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "mode=job",
        "--array",
        "3",
        "--detach",
        "utils.sh",
        "--image",
        "busybox:local",
        "-h",
        "NULL",
        "--",
        "sh",
        "-c",
        "echo task $TORCHX_ARRAY_INDEX",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let group = stdout(&out).trim().to_string();
    let s = k8s.wait_status(&group, |s| s["state"] == "SUCCEEDED");
    assert!(s.to_string().contains("SUCCEEDED"), "{s}");
    let log = stdout(&k8s.run(&["log", &group]));
    for i in 0..3 {
        assert!(log.contains(&format!("task {i}")), "{log}");
    }
    k8s.run(&["delete", &group]);
}

/// TorchX's default path, a Volcano Job, and an MCAD AppWrapper: the API server checks each
/// against its real CRD schema and stores it; torchx reads it back and deletes it.
#[test]
fn volcano_jobs_and_appwrappers_pass_their_real_crds() {
    let Some(k8s) = Cluster::get("volcano_jobs_and_appwrappers_pass_their_real_crds") else {
        return;
    };
    for (scheduler, cfg) in [("kubernetes", "queue=default"), ("kubernetes_mcad", "")] {
        let handle = k8s.submit(
            scheduler,
            cfg,
            &["dist.ddp", "-j", "2x1", "--script", "t.py"],
        );
        let s = k8s.status(&handle);
        assert!(!s["state"].as_str().unwrap().is_empty(), "{scheduler}: {s}");
        let out = k8s.run(&["delete", &handle]);
        assert_eq!(out.status.code(), Some(0), "{scheduler}: {}", stderr(&out));
    }
}

/// A job for a namespace the cluster does not have is refused by the real API server, the
/// namespace named, and nothing is left half-submitted.
#[test]
fn a_missing_namespace_is_refused_and_nothing_is_left() {
    let Some(k8s) = Cluster::get("a_missing_namespace_is_refused") else {
        return;
    };
    let out = k8s.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "namespace=no-such-namespace,mode=job",
        "utils.echo",
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("no-such-namespace"),
        "{}",
        stderr(&out)
    );
    let listed = stdout(&k8s.run(&["list", "-s", "kubernetes", "--json"]));
    assert!(!listed.contains("no-such-namespace"), "{listed}");
}

/// A pod over its memory limit (`--memMB`) is OOM-killed by the node, and the app and its
/// attempt say so (`oom`).
fn a_pod_over_its_memory_limit_is_oom_killed(way: Way) {
    let Some(k8s) = Cluster::get(&format!(
        "a_pod_over_its_memory_limit_is_oom_killed {way:?}"
    )) else {
        return;
    };
    let handle = k8s.submit(
        way.scheduler(),
        way.cfg(),
        &[
            "utils.sh",
            "--image",
            "busybox:local",
            "--memMB",
            "64",
            "--",
            "sh",
            "-c",
            "x=$(head -c 300000000 /dev/zero | tr '\\0' x); echo survived ${#x}",
        ],
    );
    let s = k8s.wait_status(&handle, |s| s["state"] == "FAILED");
    let msg = s["msg"].as_str().unwrap();
    assert!(
        msg.contains("exited with code 137 (OOMKilled)"),
        "{way:?}: {s}"
    );
    if let Way::IndexedJob = way {
        // The replica's attempt says why it ended.
        let attempt = &s["roles"][0]["replicas"][0]["attempts"][0];
        assert_eq!(attempt["reason"], "oom", "{s}");
        assert_eq!(attempt["exit_code"], 137, "{s}");
    }
    k8s.run(&["delete", &handle]);
}

#[test]
fn an_indexed_jobs_pod_over_its_memory_limit_is_oom_killed() {
    a_pod_over_its_memory_limit_is_oom_killed(Way::IndexedJob);
}

#[test]
fn a_volcano_jobs_pod_over_its_memory_limit_is_oom_killed() {
    a_pod_over_its_memory_limit_is_oom_killed(Way::Volcano);
}

#[test]
fn an_appwrappers_pod_over_its_memory_limit_is_oom_killed() {
    a_pod_over_its_memory_limit_is_oom_killed(Way::Mcad);
}

/// A workspace is built into an image, pushed to the local registry (`image_repo`) and pulled
/// by the node for the pod, which sees its files.
fn a_workspace_is_built_pushed_and_pulled_by_the_pod(way: Way) {
    let test = format!("a_workspace_on_kubernetes {way:?}");
    let Some(k8s) = Cluster::get(&test) else {
        return;
    };
    let Some(registries) = support::registries_up(&test) else {
        return;
    };
    let ws = k8s.env.cwd.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("hello.txt"), "from the workspace\n").unwrap();
    let cfg = [
        way.cfg(),
        &format!("image_repo={}/torchx-k8s", registries.open),
    ]
    .into_iter()
    .filter(|c| !c.is_empty())
    .collect::<Vec<_>>()
    .join(",");
    let out = k8s.run(&[
        "run",
        "--workspace",
        "ws",
        "-s",
        way.scheduler(),
        "-cfg",
        &cfg,
        "utils.sh",
        "--image",
        "busybox:local",
        "-h",
        "NULL",
        "--",
        "cat",
        "hello.txt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let s = k8s.wait_ended(&handle);
    assert_eq!(s["state"], "SUCCEEDED", "{way:?}: {s}");
    let log = stdout(&k8s.run(&["log", &handle]));
    assert_eq!(log, "sh/0 from the workspace\n", "{way:?}");
    k8s.run(&["delete", &handle]);
}

#[test]
fn a_workspace_reaches_an_indexed_jobs_pod() {
    a_workspace_is_built_pushed_and_pulled_by_the_pod(Way::IndexedJob);
}

#[test]
fn a_workspace_reaches_a_volcano_jobs_pod() {
    a_workspace_is_built_pushed_and_pulled_by_the_pod(Way::Volcano);
}

#[test]
fn a_workspace_reaches_an_appwrappers_pod() {
    a_workspace_is_built_pushed_and_pulled_by_the_pod(Way::Mcad);
}

/// The recovery contract on a real node: the container's own timer sends the checkpoint
/// signal before the limit and the trainer saves and asks for a requeue; an Indexed Job or a
/// Volcano Job runs the pod again (attempt 1, counted in the checkpoint directory on a host
/// mount) and it succeeds. MCAD never restarts a wrapped pod (a requeue option is refused
/// there): the signal and the save still happen, and the app fails with the pod.
fn a_time_limited_pod_is_signalled_and_saves(way: Way) {
    let Some(k8s) = Cluster::get(&format!("a_time_limited_pod_is_requeued {way:?}")) else {
        return;
    };
    let ckpt = k8s.env.cwd.join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let trainer = "trap 'echo \"attempt $TORCHX_ATTEMPT saved\" > $TORCHX_CHECKPOINT_DIR/saved; \
                   touch \"$TORCHX_REQUEUE_FILE\"; exit 75' USR1; \
                   if [ \"$TORCHX_ATTEMPT\" -ge 1 ]; then echo \"done in attempt $TORCHX_ATTEMPT\"; exit 0; fi; \
                   while :; do sleep 0.2; done";
    let mounts = format!("type=bind,src={},dst=/ckpt", ckpt.display());
    let handle = k8s.submit(
        way.scheduler(),
        way.cfg(),
        &[
            "--time_limit",
            "20s",
            "--checkpoint_signal",
            "USR1@15",
            "--checkpoint_dir",
            "/ckpt",
            "utils.sh",
            "--image",
            "busybox:local",
            "-h",
            "NULL",
            "--mounts",
            &mounts,
            "--",
            "sh",
            "-c",
            trainer,
        ],
    );
    let s = k8s.wait_ended(&handle);
    let saved = std::fs::read_to_string(ckpt.join("saved")).unwrap();
    assert_eq!(saved, "attempt 0 saved\n", "{way:?}");
    let log = stdout(&k8s.run(&["log", &handle]));
    if let Way::Mcad = way {
        assert_eq!(s["state"], "FAILED", "{s}");
        assert!(
            s["msg"].as_str().unwrap().contains("exited with code 75"),
            "{s}"
        );
    } else {
        assert_eq!(s["state"], "SUCCEEDED", "{way:?}: {s}");
        assert!(log.contains("done in attempt 1"), "{way:?}: {log}");
    }
    k8s.run(&["delete", &handle]);
}

#[test]
fn a_time_limited_indexed_job_pod_is_signalled_saves_and_is_requeued() {
    a_time_limited_pod_is_signalled_and_saves(Way::IndexedJob);
}

#[test]
fn a_time_limited_volcano_job_pod_is_signalled_saves_and_is_requeued() {
    a_time_limited_pod_is_signalled_and_saves(Way::Volcano);
}

#[test]
fn a_time_limited_appwrapper_pod_is_signalled_and_saves() {
    a_time_limited_pod_is_signalled_and_saves(Way::Mcad);
}

/// `torchx plan` asks the real cluster, in each way: a missing namespace, a missing Volcano
/// queue and a replica bigger than any node's allocatable fail, each named; a job that fits is
/// ok.
#[test]
fn plan_reads_the_real_namespaces_queues_and_node_allocatable() {
    let Some(k8s) = Cluster::get("plan against the real cluster") else {
        return;
    };
    let plan = |scheduler: &str, cfg: &str, cpu: &str| {
        let mut args = vec!["plan", "--json", "--workspace", "", "-s", scheduler];
        if !cfg.is_empty() {
            args.extend(["-cfg", cfg]);
        }
        args.extend([
            "utils.sh",
            "--image",
            "busybox:local",
            "--cpu",
            cpu,
            "--",
            "true",
        ]);
        let out = k8s.run(&args);
        let rows: serde_json::Value = serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (out.status.code(), rows.to_string())
    };
    for way in [Way::IndexedJob, Way::Volcano, Way::Mcad] {
        let (code, rows) = plan(way.scheduler(), way.cfg(), "1");
        assert_eq!(code, Some(0), "{way:?}: {rows}");
        let (code, rows) = plan(way.scheduler(), way.cfg(), "64");
        assert_ne!(code, Some(0), "{way:?}: {rows}");
        assert!(
            rows.contains("no node has that much allocatable (torchx-node: 2 CPU"),
            "{way:?}: {rows}"
        );
        let cfg = [way.cfg(), "namespace=no-such-namespace"]
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
            .join(",");
        let (code, rows) = plan(way.scheduler(), &cfg, "1");
        assert_ne!(code, Some(0), "{way:?}: {rows}");
        assert!(rows.contains("\"check\":\"namespace no-such-namespace\",\"detail\":\"the cluster has no such namespace\""), "{way:?}: {rows}");
    }
    let (code, rows) = plan("kubernetes", "queue=no-such-queue", "1");
    assert_ne!(code, Some(0), "{rows}");
    assert!(
        rows.contains("\"check\":\"queue no-such-queue\",\"detail\":\"Volcano has no such queue\""),
        "{rows}"
    );
    assert!(
        rows.contains("default"),
        "the queues there are named: {rows}"
    );
}

/// `--after` a Kubernetes job (which Kubernetes cannot hold): the second job is held by a
/// detached holder and runs on the node once the first succeeded.
#[test]
fn a_job_after_another_runs_once_the_first_succeeded() {
    let Some(k8s) = Cluster::get("--after on the real cluster") else {
        return;
    };
    let first = k8s.sh("sleep 2; echo first");
    let out = k8s.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "mode=job",
        "--after",
        &first,
        "utils.sh",
        "--image",
        "busybox:local",
        "-h",
        "NULL",
        "--",
        "echo",
        "second",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let held = stdout(&out).trim().to_string();
    let s = k8s.wait_ended(&held);
    assert_eq!(s["state"], "SUCCEEDED", "{s}");
    let log = stdout(&k8s.run(&["log", &held]));
    assert!(log.contains("second"), "{log}");
    let first_ended = k8s.status(&first);
    assert_eq!(first_ended["state"], "SUCCEEDED", "{first_ended}");
}

/// The conformance suite every scheduler runs, in-process against the cluster, in `way`: real
/// pods run its commands (both streams are one on Kubernetes), its mounts are the node's
/// hostPath volumes, its retries real restarts (MCAD's requeue waits 300 s: not within it).
async fn conforms(way: Way) {
    use torchx::opts::{Cfg, CfgValue};
    let Ok(kubeconfig) = std::env::var("TORCHX_TEST_KUBECONFIG") else {
        Cluster::get(&format!("conformance {way:?}"));
        return;
    };
    let (runner, state) = in_process(&kubeconfig);
    let mounted = tempfile::tempdir_in(state).unwrap();
    let mut opts = torchx::testing::Conformance::new("busybox:local");
    opts.cfg = way
        .cfg()
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), CfgValue::Str(v.to_string())))
        .collect::<Cfg>();
    opts.timeout = Duration::from_secs(120);
    opts.poll = Duration::from_millis(200);
    opts.mount_dir = Some(mounted.path().to_path_buf());
    if let Way::Mcad = way {
        opts.cancel_forgets = true;
        opts.check_retries = false;
    }
    torchx::testing::conformance(&runner, way.scheduler(), &opts).await;
}

/// A runner in this process for the cluster of `kubeconfig`, and its state directory.
fn in_process(kubeconfig: &str) -> (torchx::Runner, &'static std::path::Path) {
    use std::sync::OnceLock;
    // The kube client and the runner read these from the process's environment, once.
    static STATE: OnceLock<tempfile::TempDir> = OnceLock::new();
    let state = STATE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("KUBECONFIG", kubeconfig);
        std::env::set_var("TORCHX_STATE_DIR", dir.path());
        dir
    });
    let runner = torchx::Runner::new(
        torchx::scheduler::Registry::builtin(),
        torchx::config::TorchxConfig::default(),
    );
    (runner, state.path())
}

/// `describe_native` reads the live objects back from the cluster, in each way: the Indexed
/// Job and its Service, the Volcano Job, the AppWrapper, as the API server holds them (with
/// their status); `None` once they are deleted.
#[tokio::test]
async fn describe_native_reads_the_live_objects_back() {
    let Some(k8s) = Cluster::get("describe_native_reads_the_live_objects_back") else {
        return;
    };
    let (runner, _) = in_process(&k8s.kubeconfig);
    for way in [Way::IndexedJob, Way::Volcano, Way::Mcad] {
        let handle = k8s.sh_as(way, "echo native");
        let native = runner.describe_native(&handle).await.unwrap();
        let native = native.unwrap_or_else(|| panic!("{way:?}: nothing read back"));
        let kinds: Vec<&str> = match way {
            Way::Mcad => vec![native["kind"].as_str().unwrap()],
            _ => native["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["kind"].as_str().unwrap())
                .collect(),
        };
        let want: &[&str] = match way {
            Way::IndexedJob => &["Job", "Service"],
            Way::Volcano => &["Job"],
            Way::Mcad => &["AppWrapper"],
        };
        assert_eq!(kinds, want, "{way:?}: {native}");
        // Live: the server's own fields are there.
        let first = if let Way::Mcad = way {
            &native
        } else {
            &native["objects"][0]
        };
        assert!(first["metadata"]["uid"].is_string(), "{way:?}: {first}");
        assert!(
            native.to_string().contains("echo native"),
            "{way:?}: {native}"
        );
        k8s.wait_ended(&handle);
        let out = k8s.run(&["delete", &handle]);
        assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
        k8s.wait_gone(&handle);
        assert_eq!(
            runner.describe_native(&handle).await.unwrap(),
            None,
            "{way:?}"
        );
    }
}

#[tokio::test]
async fn indexed_jobs_conform_on_the_cluster() {
    conforms(Way::IndexedJob).await;
}

#[tokio::test]
async fn volcano_jobs_conform_on_the_cluster() {
    conforms(Way::Volcano).await;
}

#[tokio::test]
async fn appwrappers_conform_on_the_cluster() {
    conforms(Way::Mcad).await;
}

/// A pod evicted through the Eviction API (what a drain or a preemption does) is a preemption
/// under a recovery option: its replica runs again in a new attempt, and no retry is spent
/// (`max_retries` is 0).
fn an_evicted_pod_runs_again(way: Way) {
    let Some(k8s) = Cluster::get(&format!("an_evicted_pod_runs_again {way:?}")) else {
        return;
    };
    let handle = k8s.preemptible(way, &k8s.env.cwd.join("ckpt"));
    k8s.wait_log(&handle, "first");
    let pod = running_pod(&k8s.kubeconfig, &handle);
    let answer = evict(&k8s.kubeconfig, &pod);
    assert_eq!(answer["status"], "Success", "{way:?}: {answer}");
    let s = k8s.wait_ended(&handle);
    assert_eq!(s["state"], "SUCCEEDED", "{way:?}: {s}");
    let log = stdout(&k8s.run(&["log", &handle]));
    assert!(log.contains("again in attempt 1"), "{way:?}: {log}");
    k8s.run(&["delete", &handle]);
}

#[test]
fn an_evicted_pod_of_an_indexed_job_runs_again() {
    an_evicted_pod_runs_again(Way::IndexedJob);
}

#[test]
fn an_evicted_pod_of_a_volcano_job_runs_again() {
    an_evicted_pod_runs_again(Way::Volcano);
}

/// The dashboard (`torchx ui -s kubernetes,kubernetes_mcad`) lists the cluster's jobs of both
/// schedulers with their states, and shows a job's replicas.
#[test]
fn the_dashboard_lists_the_cluster_jobs() {
    use support::ui_server::{encode, Server};
    let Some(k8s) = Cluster::get("the_dashboard_lists_the_cluster_jobs") else {
        return;
    };
    let volcano = k8s.sh_as(Way::Volcano, "echo from-volcano");
    let wrapped = k8s.sh_as(Way::Mcad, "echo from-mcad");
    for h in [&volcano, &wrapped] {
        k8s.wait_status(h, |s| s["state"] == "SUCCEEDED");
    }
    let mut cmd = k8s.env.cmd(&[
        "ui",
        "--port",
        "0",
        "--read_only",
        "-s",
        "kubernetes,kubernetes_mcad",
    ]);
    cmd.env("KUBECONFIG", &k8s.kubeconfig);
    let ui = Server::spawn(cmd);
    let listed = ui.json("/api/apps");
    assert_eq!(listed["errors"], serde_json::json!([]), "{listed}");
    for h in [&volcano, &wrapped] {
        let row = listed["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["handle"] == h.as_str())
            .unwrap_or_else(|| panic!("{h} not on the jobs page: {listed}"));
        assert_eq!(row["state"], "SUCCEEDED", "{row}");
        assert_eq!(row["name"], "sh", "{row}");
    }
    let detail = ui.json(&format!("/api/apps/{}", encode(&volcano)));
    assert!(detail.to_string().contains("SUCCEEDED"), "{detail}");
    assert!(detail.to_string().contains("\"sh\""), "the role: {detail}");
    for h in [&volcano, &wrapped] {
        k8s.run(&["delete", h]);
    }
}

/// `torchx run --workspace "" --wait --log -s kubernetes utils.echo --msg hi` (TorchX's default
/// image, which the node has under its name; no workspace: without `image_repo` it could not be
/// pushed, as in TorchX) prints `hi` (on stderr, as TorchX's `--log`) from a real pod and ends
/// SUCCEEDED, in each of the three ways.
#[test]
fn utils_echo_prints_hi_from_a_pod_in_each_way() {
    let Some(k8s) = Cluster::get("utils_echo_prints_hi_from_a_pod_in_each_way") else {
        return;
    };
    for way in [Way::IndexedJob, Way::Volcano, Way::Mcad] {
        let mut args = vec![
            "run",
            "--workspace",
            "",
            "--wait",
            "--log",
            "-s",
            way.scheduler(),
        ];
        if !way.cfg().is_empty() {
            args.extend(["-cfg", way.cfg()]);
        }
        args.extend(["utils.echo", "--msg", "hi"]);
        let out = k8s.run(&args);
        assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
        // As TorchX, `--log` writes the job's lines to stderr.
        assert!(
            stderr(&out).contains("echo/0 hi"),
            "{way:?}: {}",
            stderr(&out)
        );
        let handle = stdout(&out)
            .lines()
            .find(|l| l.starts_with(&format!("{}://", way.scheduler())))
            .unwrap_or_else(|| panic!("{way:?}: no handle in {}", stdout(&out)))
            .to_string();
        assert_eq!(k8s.status(&handle)["state"], "SUCCEEDED", "{way:?}");
        k8s.run(&["delete", &handle]);
    }
}

/// `torchx log --tail` follows a pod's log from the kubelet (through Pending, while it runs)
/// and returns once the app has ended, in `way`.
fn a_log_is_followed_until_the_app_ends(way: Way) {
    let Some(k8s) = Cluster::get(&format!("a_log_is_followed_until_the_app_ends {way:?}")) else {
        return;
    };
    let handle = k8s.sh_as(way, "echo first; sleep 3; echo last");
    let out = k8s.run(&["log", "--tail", &handle]);
    assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
    assert_eq!(stdout(&out), "sh/0 first\nsh/0 last\n", "{way:?}");
    // The log ends with the container; the controller may say so a moment later.
    assert_eq!(k8s.wait_ended(&handle)["state"], "SUCCEEDED", "{way:?}");
    k8s.run(&["delete", &handle]);
}

#[test]
fn an_indexed_jobs_log_is_followed_until_it_ends() {
    a_log_is_followed_until_the_app_ends(Way::IndexedJob);
}

#[test]
fn a_volcano_jobs_log_is_followed_until_it_ends() {
    a_log_is_followed_until_the_app_ends(Way::Volcano);
}

#[test]
fn an_appwrappers_log_is_followed_until_it_ends() {
    a_log_is_followed_until_the_app_ends(Way::Mcad);
}

/// A pipeline whose steps run on the cluster, one in each way: each step sees the shared
/// directory at its `pipeline_dir` (a hostPath mount of the node, which is this machine), runs
/// after the step before it, and adds one to the value the step before it wrote.
#[test]
fn a_pipeline_runs_its_steps_on_the_cluster_in_each_way() {
    let Some(k8s) = Cluster::get("a pipeline on the cluster") else {
        return;
    };
    let shared = k8s.env.cwd.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let step = |name: &str, way: Way, after: &str, script: &str| {
        let cfg = match way.cfg().split_once('=') {
            Some((k, v)) => format!("\n    cfg: {{{k}: {v}}}"),
            None => String::new(),
        };
        format!(
            "
  - name: {name}
    scheduler: {scheduler}{cfg}
    workspace: ''
    pipeline_dir: /shared{after}
    component: utils.sh
    args:
      - --image
      - busybox:local
      - -h
      - 'NULL'
      - --mounts
      - 'type=bind,src={src},dst=/shared'
      - sh
      - -c
      - '{script}'",
            scheduler = way.scheduler(),
            src = shared.display(),
        )
    };
    let add_one = "echo $(( $(cat $TORCHX_PIPELINE_DIR/value) + 1 )) > $TORCHX_PIPELINE_DIR/value";
    let text = format!(
        "name: on-k8s\nsteps:{}{}{}\n",
        step(
            "prepare",
            Way::IndexedJob,
            "",
            "echo 1 > $TORCHX_PIPELINE_DIR/value"
        ),
        step("train", Way::Volcano, "\n    after: [prepare]", add_one),
        step("evaluate", Way::Mcad, "\n    after: [train]", add_one),
    );
    let file = k8s.env.cwd.join("on-k8s.yaml");
    std::fs::write(&file, text).unwrap();
    let out = k8s.run(&["run", "--wait", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let s = k8s.status(&handle);
    assert_eq!(s["state"], "SUCCEEDED", "{s}");
    let on: Vec<&str> = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["handle"].as_str().unwrap().split("://").next().unwrap())
        .collect();
    assert_eq!(on, ["kubernetes", "kubernetes", "kubernetes_mcad"], "{s}");
    let value = std::fs::read_to_string(shared.join("value")).unwrap();
    assert_eq!(value.trim(), "3", "each step added one");
}
