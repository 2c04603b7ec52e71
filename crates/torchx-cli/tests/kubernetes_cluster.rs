//! The `kubernetes` and `kubernetes_mcad` schedulers against a real Kubernetes control plane
//! (`scripts/k8s/up.sh`: etcd, kube-apiserver, kube-controller-manager and kube-scheduler of a
//! current release, with Volcano's and MCAD's CRDs), found through `$TORCHX_TEST_KUBECONFIG`
//! (`.ci/run` sets it from up.sh's last line; other suites keep their own `KUBECONFIG`).
//!
//! What this proves: the real API server validates (strict field validation, the CRDs'
//! schemas), defaults and stores every object we submit; the Job controller makes the pods of
//! our Indexed Jobs and the scheduler tries to place them; status, list, cancel and delete read
//! and change the real objects. What it does not (yet): no node runs the pods, so nothing here
//! reaches Running, prints a log or ends; no Volcano or MCAD controller acts on their objects.
//! The fake API server (`tests/kubernetes.rs`) still drives those lifecycles.

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use support::{stderr, stdout, Env};

/// A test environment whose commands talk to the cluster.
struct Cluster {
    env: Env,
    kubeconfig: String,
}

impl Cluster {
    /// The cluster of `$TORCHX_TEST_KUBECONFIG`, or a loud skip (a failure where CI started it).
    fn get(test: &str) -> Option<Cluster> {
        match std::env::var("TORCHX_TEST_KUBECONFIG") {
            Ok(kubeconfig) if !kubeconfig.is_empty() => Some(Cluster {
                env: Env::new(),
                kubeconfig,
            }),
            _ => {
                support::skip_engine(
                    "k8s",
                    test,
                    "no TORCHX_TEST_KUBECONFIG: start scripts/k8s/up.sh, set it to its KUBECONFIG",
                );
                None
            }
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.env
            .cmd(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .unwrap()
    }

    fn status(&self, handle: &str) -> serde_json::Value {
        let out = self.run(&["status", handle, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }

    /// `torchx run -s <scheduler> ...` (no workspace: the image is used as it is); the handle.
    fn submit(&self, scheduler: &str, cfg: &str, args: &[&str]) -> String {
        let mut full = vec!["run", "--workspace", "", "-s", scheduler];
        if !cfg.is_empty() {
            full.extend(["-cfg", cfg]);
        }
        full.extend_from_slice(args);
        let out = self.run(&full);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let handle = stdout(&out).trim().to_string();
        assert!(handle.starts_with(&format!("{scheduler}://")), "{handle}");
        handle
    }

    /// Polls `status --json` until `ok` holds (or fails after 60 s).
    fn wait_status(
        &self,
        handle: &str,
        ok: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.status(handle);
            if ok(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "{handle}: {s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A native Indexed Job (`mode=job`): accepted, its pods made by the Job controller and left
/// unschedulable (no node), so the app is PENDING, not RUNNING; listed by its labels; cancel
/// suspends it (CANCELLED), delete removes it.
#[test]
fn an_indexed_job_is_accepted_made_into_pods_cancelled_and_deleted() {
    let Some(k8s) = Cluster::get("an_indexed_job_is_accepted") else {
        return;
    };
    let handle = k8s.submit("kubernetes", "mode=job", &["utils.echo", "--msg", "hi"]);
    let s = k8s.wait_status(&handle, |s| {
        s["roles"][0]["replicas"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    });
    assert_eq!(s["state"], "PENDING", "{s}");
    let listed = k8s.run(&["list", "-s", "kubernetes", "--json"]);
    assert!(stdout(&listed).contains(&handle), "{}", stdout(&listed));
    let out = k8s.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    k8s.wait_status(&handle, |s| s["state"] == "CANCELLED");
    let out = k8s.run(&["delete", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(60);
    while k8s.run(&["status", &handle]).status.code() == Some(0) {
        assert!(Instant::now() < deadline, "{handle} was never deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
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
