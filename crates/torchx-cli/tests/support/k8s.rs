//! A real Kubernetes cluster for the tests (`scripts/k8s/up.sh`, found through
//! `$TORCHX_TEST_KUBECONFIG`): the ways a job reaches it, `torchx` commands against it, and
//! its API as its admin.

use std::process::Output;
use std::time::{Duration, Instant};

use super::{stderr, stdout, Env};

/// Polls `poll` every 200 ms until it is `Ok`; after 60 s, fails with its last `Err`.
pub fn eventually(mut poll: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(why) = poll() {
        assert!(Instant::now() < deadline, "{why}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `Ok` if `holds`, else `Err(why())`.
pub fn check(holds: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    holds.then_some(()).ok_or_else(why)
}

/// The three ways a job reaches the cluster.
#[derive(Clone, Copy, Debug)]
pub enum Way {
    /// `kubernetes` with `mode=job`: native Indexed Jobs.
    IndexedJob,
    /// `kubernetes` with a queue: TorchX's Volcano Job.
    Volcano,
    /// `kubernetes_mcad`: an MCAD AppWrapper.
    Mcad,
}

impl Way {
    pub fn scheduler(self) -> &'static str {
        match self {
            Way::IndexedJob | Way::Volcano => "kubernetes",
            Way::Mcad => "kubernetes_mcad",
        }
    }

    pub fn cfg(self) -> &'static str {
        match self {
            Way::IndexedJob => "mode=job",
            Way::Volcano => "queue=default",
            Way::Mcad => "",
        }
    }
}

/// A test environment whose commands talk to the cluster.
pub struct Cluster {
    pub env: Env,
    pub kubeconfig: String,
}

impl Cluster {
    /// The cluster of `$TORCHX_TEST_KUBECONFIG`, or a loud skip (a failure where CI started it).
    pub fn get(test: &str) -> Option<Cluster> {
        match std::env::var("TORCHX_TEST_KUBECONFIG") {
            Ok(kubeconfig) if !kubeconfig.is_empty() => Some(Cluster {
                env: Env::new(),
                kubeconfig,
            }),
            _ => {
                super::skip_engine(
                    "k8s",
                    test,
                    "no TORCHX_TEST_KUBECONFIG: start scripts/k8s/up.sh, set it to its KUBECONFIG",
                );
                None
            }
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.env
            .cmd(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .unwrap()
    }

    pub fn status(&self, handle: &str) -> serde_json::Value {
        let out = self.run(&["status", handle, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }

    /// `torchx run -s <scheduler> ...` (no workspace: the image is used as it is); the handle.
    pub fn submit(&self, scheduler: &str, cfg: &str, args: &[&str]) -> String {
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

    /// An Indexed Job (`mode=job`) of busybox running `sh -c script`; the handle.
    pub fn sh(&self, script: &str) -> String {
        self.sh_as(Way::IndexedJob, script)
    }

    /// A trainer under a recovery option (time limit 10 m, checkpoints in `ckpt`, a host
    /// mount) that prints `first` and runs until preempted in attempt 0, and prints `again in
    /// attempt N` and succeeds in any later one; submitted `way`, the handle.
    pub fn preemptible(&self, way: Way, ckpt: &std::path::Path) -> String {
        std::fs::create_dir_all(ckpt).unwrap();
        let mounts = format!("type=bind,src={},dst=/ckpt", ckpt.display());
        let trainer = "if [ \"$TORCHX_ATTEMPT\" -ge 1 ]; then echo \"again in attempt $TORCHX_ATTEMPT\"; exit 0; fi; \
                       echo first; while :; do sleep 0.2; done";
        let args = [
            "--time_limit",
            "10m",
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
        ];
        self.submit(way.scheduler(), way.cfg(), &args)
    }

    /// busybox running `sh -c script`, submitted `way`; the handle.
    pub fn sh_as(&self, way: Way, script: &str) -> String {
        self.sh_with(way, &[], script)
    }

    /// [`Cluster::sh_as`] with run options (`--hang_timeout 4s`) before the component.
    pub fn sh_with(&self, way: Way, run_opts: &[&str], script: &str) -> String {
        let mut args = run_opts.to_vec();
        args.extend([
            "utils.sh",
            "--image",
            "busybox:local",
            "-h",
            "NULL",
            "--",
            "sh",
            "-c",
            script,
        ]);
        self.submit(way.scheduler(), way.cfg(), &args)
    }

    /// Polls `status --json` until `ok` holds (or fails after 60 s).
    pub fn wait_status(
        &self,
        handle: &str,
        ok: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut last = serde_json::Value::Null;
        eventually(|| {
            last = self.status(handle);
            check(ok(&last), || format!("{handle}: {last}"))
        });
        last
    }

    /// Until `handle` has ended, SUCCEEDED or FAILED: its status.
    pub fn wait_ended(&self, handle: &str) -> serde_json::Value {
        self.wait_status(handle, |s| {
            s["state"] == "SUCCEEDED" || s["state"] == "FAILED"
        })
    }

    /// Until `torchx log handle` holds `text`.
    pub fn wait_log(&self, handle: &str, text: &str) {
        eventually(|| {
            let log = stdout(&self.run(&["log", handle]));
            check(log.contains(text), || {
                format!("{handle}: no `{text}` in {log:?}")
            })
        });
    }

    /// Until `torchx status handle` no longer finds it.
    pub fn wait_gone(&self, handle: &str) {
        eventually(|| {
            let found = self.run(&["status", handle]).status.code() == Some(0);
            check(!found, || format!("{handle} was never deleted"))
        });
    }
}

/// `curl -sS -X method` of `path` on the cluster's API server as its admin (the kubeconfig's
/// CA and token).
fn curl(kubeconfig: &str, method: &str, path: &str) -> std::process::Command {
    let config = std::fs::read_to_string(kubeconfig).unwrap();
    let field = |key: &str| {
        config
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {kubeconfig}"))
            .trim()
            .to_string()
    };
    let mut curl = std::process::Command::new("curl");
    curl.args([
        "-sS",
        "-X",
        method,
        "--cacert",
        &field("certificate-authority:"),
    ])
    .arg("-H")
    .arg(format!("Authorization: Bearer {}", field("token:")))
    .arg(format!("{}{path}", field("server:")));
    curl
}

/// The API server's JSON answer to `method path` (with a JSON `body`).
pub fn api(kubeconfig: &str, method: &str, path: &str, body: Option<&str>) -> serde_json::Value {
    let mut curl = curl(kubeconfig, method, path);
    if let Some(body) = body {
        curl.args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
        ]);
    }
    let out = curl.output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}{}", stdout(&out), stderr(&out)))
}

/// Applies a JSON merge patch to the object at `path`; its new state.
pub fn merge_patch(kubeconfig: &str, path: &str, patch: &serde_json::Value) -> serde_json::Value {
    let out = curl(kubeconfig, "PATCH", path)
        .args([
            "-H",
            "Content-Type: application/merge-patch+json",
            "--data-binary",
        ])
        .arg(patch.to_string())
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("PATCH {path}: {e}: {}{}", stdout(&out), stderr(&out)))
}

/// Evicts pod `pod` of namespace `default` through the Eviction API (what a drain or a
/// preemption does); the API server's answer.
pub fn evict(kubeconfig: &str, pod: &str) -> serde_json::Value {
    let eviction = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": "default"},
    });
    api(
        kubeconfig,
        "POST",
        &format!("/api/v1/namespaces/default/pods/{pod}/eviction"),
        Some(&eviction.to_string()),
    )
}

/// Whether the API server answers `/readyz` with ok.
pub fn api_ready(kubeconfig: &str) -> bool {
    curl(kubeconfig, "GET", "/readyz")
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout == b"ok")
}

/// The pods of app `name` (the `name` of its handle), from the API.
pub fn pods_of(kubeconfig: &str, name: &str) -> Vec<serde_json::Value> {
    let pods = api(
        kubeconfig,
        "GET",
        &format!(
            "/api/v1/namespaces/default/pods?labelSelector=app.kubernetes.io/instance%3D{name}"
        ),
        None,
    );
    pods["items"].as_array().cloned().unwrap_or_default()
}

/// The name of a running pod of the app of `handle` (waits for one).
pub fn running_pod(kubeconfig: &str, handle: &str) -> String {
    let name = handle.rsplit(':').next().unwrap();
    let mut pod = String::new();
    eventually(|| {
        let pods = pods_of(kubeconfig, name);
        let running = pods.iter().find(|p| p["status"]["phase"] == "Running");
        pod = running
            .and_then(|p| p["metadata"]["name"].as_str())
            .unwrap_or_default()
            .to_string();
        check(!pod.is_empty(), || {
            format!("no running pod of {handle}: {pods:?}")
        })
    });
    pod
}
