//! `kubernetes` and `kubernetes_mcad` against an in-process fake API server
//! (`support/kube_fake.rs`): the exact REST calls, the state walk submit → pending → running →
//! succeeded/failed, cancel, delete, list, logs (with follow), unknown apps, 409 conflicts.
//! No Kubernetes API server can run on this machine; what the fake does not prove is written
//! at the top of `kube_fake.rs` and in README.md.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::json;
use support::kube_fake::{FakeKube, AUTO};
use support::{stderr, stdout, Env};
use torchx::config::TorchxConfig;
use torchx::opts::{Cfg, CfgValue};
use torchx::scheduler::{DryRunContext, LogQuery, Registry};
use torchx::specs::{AppDef, AppState, Role};
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

/// One fake for the in-process tests (the kube client reads KUBECONFIG from the environment,
/// which is per process). Its context namespace is `auto`.
fn fake() -> &'static FakeKube {
    static FAKE: OnceLock<FakeKube> = OnceLock::new();
    FAKE.get_or_init(|| {
        let f = FakeKube::start(AUTO);
        std::env::set_var("KUBECONFIG", &f.kubeconfig);
        f
    })
}

fn runner() -> Runner {
    fake();
    Runner::new(Registry::builtin(), TorchxConfig::default())
}

fn cfg(pairs: &[(&str, &str)]) -> Cfg {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), CfgValue::Str(v.to_string())))
        .collect()
}

fn sh_app(name: &str, script: &str) -> AppDef {
    let role = Role::new("main", "busybox")
        .with_entrypoint("sh")
        .with_args(["-c", script]);
    AppDef::new(name, vec![role])
}

async fn wait(runner: &Runner, handle: &str) -> AppState {
    runner
        .wait(
            handle,
            Duration::from_millis(30),
            Some(Duration::from_secs(20)),
        )
        .await
        .unwrap()
        .unwrap()
        .state
}

#[tokio::test]
async fn native_jobs_conform() {
    let mut opts = Conformance::default();
    opts.cfg = cfg(&[("namespace", AUTO)]);
    opts.timeout = Duration::from_secs(20);
    // The fake API server's stand-in controllers run no container.
    opts.runs_commands = false;
    conformance(&runner(), "kubernetes", &opts).await;
}

#[tokio::test]
async fn volcano_jobs_conform() {
    let mut opts = Conformance::default();
    opts.cfg = cfg(&[
        ("namespace", AUTO),
        ("mode", "volcano"),
        ("queue", "default"),
    ]);
    opts.timeout = Duration::from_secs(20);
    // The fake API server's stand-in controllers run no container.
    opts.runs_commands = false;
    conformance(&runner(), "kubernetes", &opts).await;
}

#[tokio::test]
async fn kubernetes_mcad_conforms() {
    let mut opts = Conformance::default();
    opts.cfg = cfg(&[("namespace", AUTO)]);
    opts.timeout = Duration::from_secs(20);
    // The fake API server's stand-in controllers run no container.
    opts.runs_commands = false;
    // As TorchX's: cancel deletes the AppWrapper.
    opts.cancel_forgets = true;
    conformance(&runner(), "kubernetes_mcad", &opts).await;
}

#[tokio::test]
async fn appwrapper_lifecycle() {
    let runner = &runner();
    let c = cfg(&[("namespace", AUTO)]);
    let c = &c;
    let submit = |app: AppDef| async move {
        let info = runner
            .dryrun(app, "kubernetes_mcad", c, &Default::default())
            .await
            .unwrap();
        runner.schedule(&info).await.unwrap()
    };
    let ok = submit(sh_app("awok", "echo wrapped-ok")).await;
    assert!(
        ok.starts_with("kubernetes_mcad://torchx/auto:awok-"),
        "{ok}"
    );
    let first = runner.status(&ok).await.unwrap().unwrap().state;
    assert_eq!(first, AppState::Pending);
    assert_eq!(wait(runner, &ok).await, AppState::Succeeded);
    let desc = runner.status(&ok).await.unwrap().unwrap();
    assert_eq!(desc.roles[0].replicas[0].state, AppState::Succeeded);
    let mut lines = runner
        .log_lines(&ok, "main", 0, &LogQuery::default())
        .await
        .unwrap();
    assert_eq!(
        lines.next_line().await.unwrap().as_deref(),
        Some("wrapped-ok")
    );
    let bad = submit(sh_app("awbad", "exit 2")).await;
    assert_eq!(wait(runner, &bad).await, AppState::Failed);
    let listed = runner.list("kubernetes_mcad").await.unwrap();
    assert!(listed
        .iter()
        .any(|a| a.app_handle == ok && a.state == AppState::Succeeded));
    // Cancel deletes the AppWrapper, as TorchX does.
    let long = submit(sh_app("awlong", "sleep 600")).await;
    runner.cancel(&long).await.unwrap();
    assert!(runner.status(&long).await.unwrap().is_none());
    let reqs = fake().requests();
    assert!(reqs.iter().any(
        |r| r.starts_with("POST /apis/workload.codeflare.dev/v1beta1/namespaces/auto/appwrappers?")
    ));
    assert!(reqs.iter().any(|r| r.starts_with(
        "DELETE /apis/workload.codeflare.dev/v1beta1/namespaces/auto/appwrappers/awlong-"
    )));
}

/// A test walks a native app through its phases by hand (namespace `manual`: nothing moves
/// on its own) and reads each state back.
#[tokio::test]
async fn native_states_walk_as_the_test_advances_them() {
    let runner = runner();
    let mut app = sh_app("walk", "true");
    app.roles[0].num_replicas = 2;
    let info = runner
        .dryrun(
            app,
            "kubernetes",
            &cfg(&[("namespace", "manual")]),
            &Default::default(),
        )
        .await
        .unwrap();
    let handle = runner.schedule(&info).await.unwrap();
    let name = handle.rsplit(':').next().unwrap().to_string();
    let jobs = "/apis/batch/v1/namespaces/manual/jobs";
    let job = format!("{name}-main");
    let status = || async { runner.status(&handle).await.unwrap().unwrap() };
    assert_eq!(status().await.state, AppState::Pending);
    let labels = |k: u32| {
        json!({"app.kubernetes.io/instance": name, "torchx.pytorch.org/role-name": "main",
               "batch.kubernetes.io/job-completion-index": k.to_string()})
    };
    {
        let mut s = fake().store.lock().unwrap();
        s.set_status(jobs, &job, json!({"active": 2}));
        s.set_pod("manual", &format!("{job}-0-x"), labels(0), "Running");
        s.set_pod("manual", &format!("{job}-1-x"), labels(1), "Pending");
    }
    let d = status().await;
    assert_eq!(d.state, AppState::Running);
    let states: Vec<AppState> = d.roles[0].replicas.iter().map(|r| r.state).collect();
    assert_eq!(states, [AppState::Running, AppState::Pending]);
    {
        let mut s = fake().store.lock().unwrap();
        s.set_status(
            jobs,
            &job,
            json!({"active": 1, "completedIndexes": "0", "succeeded": 1}),
        );
        s.set_pod("manual", &format!("{job}-1-x"), labels(1), "SomethingNew");
    }
    let d = status().await;
    let states: Vec<AppState> = d.roles[0].replicas.iter().map(|r| r.state).collect();
    assert_eq!(states, [AppState::Succeeded, AppState::Unknown]);
    fake().store.lock().unwrap().set_status(
        jobs,
        &job,
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True",
               "message": "Job has reached the specified backoff limit"}]}),
    );
    let d = status().await;
    assert_eq!(d.state, AppState::Failed);
    assert!(d.msg.contains("backoff limit"), "{}", d.msg);
    // An unknown Volcano phase reads UNKNOWN, not an error.
    let vc = "/apis/batch.volcano.sh/v1alpha1/namespaces/manual/jobs";
    let info = runner
        .dryrun(
            sh_app("vc", "true"),
            "kubernetes",
            &cfg(&[("namespace", "manual"), ("mode", "volcano"), ("queue", "q")]),
            &Default::default(),
        )
        .await
        .unwrap();
    let vh = runner.schedule(&info).await.unwrap();
    let vname = vh.rsplit(':').next().unwrap().to_string();
    assert_eq!(
        runner.status(&vh).await.unwrap().unwrap().state,
        AppState::Unknown
    );
    fake()
        .store
        .lock()
        .unwrap()
        .set_status(vc, &vname, json!({"state": {"phase": "Running"}}));
    assert_eq!(
        runner.status(&vh).await.unwrap().unwrap().state,
        AppState::Running
    );
    fake()
        .store
        .lock()
        .unwrap()
        .set_status(vc, &vname, json!({"state": {"phase": "Hibernating"}}));
    assert_eq!(
        runner.status(&vh).await.unwrap().unwrap().state,
        AppState::Unknown
    );
}

/// A name taken already (409) is a clear error, and what this submission created before the
/// conflict is removed again: nothing is left half-submitted.
#[tokio::test]
async fn conflicts_are_clear_errors_and_roll_back() {
    fake();
    let sched = Registry::builtin().create("kubernetes").unwrap();
    let app = sh_app("clash", "true");
    let schema = sched.run_opts();
    let c = schema.resolve(&cfg(&[("namespace", "conflict")])).unwrap();
    let ctx = DryRunContext::new("torchx", "fixed0", "/tmp");
    let request = sched.submit_dryrun(&app, &c, &ctx).unwrap();
    let json = request.to_json();
    // Someone else's Job already has our Job's name.
    let job = json["objects"][1].clone();
    fake()
        .store
        .lock()
        .unwrap()
        .objects
        .entry("/apis/batch/v1/namespaces/conflict/jobs".into())
        .or_default()
        .insert(job["metadata"]["name"].as_str().unwrap().into(), job);
    let info = torchx::scheduler::DryRunInfo {
        app,
        scheduler: "kubernetes".into(),
        cfg: c,
        request,
        images: Vec::new(),
        after: Vec::new(),
        preflight: Vec::new(),
    };
    let err = sched.schedule(&info).await.unwrap_err().to_string();
    assert!(
        err.contains("Job `clash-fixed0-main` already exists in namespace `conflict`"),
        "{err}"
    );
    let s = fake().store.lock().unwrap();
    let services = s.objects.get("/api/v1/namespaces/conflict/services");
    assert!(
        services.is_none_or(|m| m.is_empty()),
        "the Service was left behind"
    );
}

/// The whole CLI against its own fake: run --wait --log streams the replica's log as it is
/// written, status/list/log/cancel/delete work from new processes, with the exact REST paths.
#[test]
fn cli_end_to_end() {
    let fake = FakeKube::start(AUTO);
    let env = Env::new();
    let run = |args: &[&str]| {
        env.cmd(args)
            .env("KUBECONFIG", &fake.kubeconfig)
            .output()
            .unwrap()
    };
    let out = run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "namespace=auto",
        "--wait",
        "--log",
        "utils.sh",
        "echo",
        "from-the-pod",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().to_string();
    assert!(
        handle.starts_with("kubernetes://torchx/auto:sh-"),
        "{handle}"
    );
    assert!(
        stderr(&out).contains("sh/0 from-the-pod"),
        "{}",
        stderr(&out)
    );
    let out = run(&["status", &handle]);
    assert!(stdout(&out).contains("SUCCEEDED"), "{}", stdout(&out));
    let out = run(&["log", &handle]);
    assert!(stdout(&out).contains("from-the-pod"), "{}", stdout(&out));
    let out = run(&["list", "-s", "kubernetes"]);
    assert!(
        stdout(&out).contains(handle.rsplit('/').next().unwrap()),
        "{}",
        stdout(&out)
    );
    let long = run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "namespace=auto",
        "utils.sh",
        "sleep",
        "600",
    ]);
    let long = stdout(&long).trim().to_string();
    let out = run(&["cancel", &long]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(&["status", &long]);
    assert!(stdout(&out).contains("CANCELLED"), "{}", stdout(&out));
    let out = run(&["delete", &long]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(&["status", &long]);
    assert_ne!(out.status.code(), Some(0));
    let out = run(&["status", "kubernetes://torchx/auto:nope-123"]);
    assert_ne!(out.status.code(), Some(0));
    let app = handle.rsplit(':').next().unwrap();
    let reqs = fake.requests();
    for want in [
        "POST /api/v1/namespaces/auto/services?".to_string(),
        "POST /apis/batch/v1/namespaces/auto/jobs?".to_string(),
        format!("GET /apis/batch/v1/namespaces/auto/jobs?&labelSelector=app.kubernetes.io%2Finstance%3D{app}"),
        "PATCH /apis/batch/v1/namespaces/auto/jobs/".to_string(),
        "DELETE /api/v1/namespaces/auto/services/".to_string(),
        format!("GET /api/v1/namespaces/auto/pods/{app}-sh-0-abcde/log?&follow=true&timestamps=true"),
    ] {
        assert!(reqs.iter().any(|r| r.starts_with(&want)), "no `{want}` in {reqs:#?}");
    }
}

/// A workspace on `kubernetes` and `kubernetes_mcad`: built on top of the role's image and pushed
/// to `image_repo` in a real registry (open and authenticated); the Job / AppWrapper the fake
/// API server receives runs the pushed image. (What this does not prove: that a real cluster
/// pulls it; the pull itself is proven against the registry with the Docker engine.)
#[test]
#[cfg(feature = "docker")] // the image is built on the local Docker engine
fn workspace_image_is_pushed_and_run_by_the_submitted_job() {
    let Some(reg) = support::registries_up("kubernetes workspace image") else {
        return;
    };
    let fake = FakeKube::start(AUTO);
    let kubeconfig = fake.kubeconfig.to_str().unwrap().to_string();
    for scheduler in ["kubernetes", "kubernetes_mcad"] {
        let env = Env::new();
        let runs = support::workspace_push_roundtrip(
            &env,
            &reg,
            scheduler,
            "namespace=auto",
            &[("KUBECONFIG", &kubeconfig)],
            &["utils.sh", "--image", "busybox:local", "cat", "data.txt"],
        );
        let store = fake.store.lock().unwrap();
        for (handle, image) in [runs.open, runs.auth] {
            let app = handle.rsplit(':').next().unwrap();
            // The submitted objects with pod specs (not the headless Service).
            let with_pods: Vec<String> = store
                .objects
                .values()
                .flat_map(|named| named.iter())
                .filter(|(name, _)| name.starts_with(app))
                .map(|(_, obj)| obj.to_string())
                .filter(|text| text.contains("\"containers\""))
                .collect();
            assert!(
                !with_pods.is_empty(),
                "{scheduler}: nothing submitted for {handle}"
            );
            for text in with_pods {
                assert!(
                    text.contains(&format!("\"image\":\"{image}\"")),
                    "{scheduler}: {text}"
                );
            }
        }
    }
}

/// An array as one Indexed Job on the fake API server (in a namespace the stand-in controller
/// leaves alone, so the test says how each index fares): one POST, `completions` the tasks,
/// `parallelism` the cap, per-index retries; each task's status, log and the group's counts
/// read from the Job's `completedIndexes`/`failedIndexes` and the index's pod. (The manifest's
/// schema: `an_array_is_one_indexed_job_whose_pods_pick_their_task` in the crate's tests.)
#[test]
fn an_array_is_one_indexed_job_and_its_tasks_are_its_indexes() {
    let fake = FakeKube::start(AUTO);
    let env = Env::new();
    let run = |args: &[&str]| {
        env.cmd(args)
            .env("KUBECONFIG", &fake.kubeconfig)
            .output()
            .unwrap()
    };
    let out = run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "namespace=ml",
        "--array",
        "0-2%2",
        "utils.sh",
        "echo",
        "task",
        "${array_index}",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let group = stdout(&out).trim().to_string();
    let jobs = "/apis/batch/v1/namespaces/ml/jobs";
    let (app, job) = {
        let store = fake.store.lock().unwrap();
        let created: Vec<&serde_json::Value> = store.objects[jobs].values().collect();
        assert_eq!(created.len(), 1, "one Job for the array");
        let job = created[0].clone();
        let app = job["metadata"]["labels"]["app.kubernetes.io/instance"]
            .as_str()
            .unwrap()
            .to_string();
        (app, job)
    };
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(
        (spec["completions"].as_i64(), spec["parallelism"].as_i64()),
        (Some(3), Some(2))
    );
    assert_eq!(spec["backoffLimitPerIndex"], 0, "{spec}");
    let job_name = job["metadata"]["name"].as_str().unwrap().to_string();
    let pod = |k: u32| format!("{job_name}-{k}-xyz");
    {
        let mut store = fake.store.lock().unwrap();
        for (k, phase) in [(0, "Succeeded"), (1, "Running")] {
            let labels = serde_json::json!({
                "app.kubernetes.io/instance": app, "torchx.pytorch.org/role-name": "sh",
                "batch.kubernetes.io/job-completion-index": k.to_string()});
            store.set_pod("ml", &pod(k), labels, phase);
        }
        store.log("ml", &pod(1), "task 1");
        store.set_status(
            jobs,
            &job_name,
            serde_json::json!({"active": 2, "completedIndexes": "0"}),
        );
    }
    let status = |h: &str| -> serde_json::Value {
        serde_json::from_str(&stdout(&run(&["status", "--json", h]))).unwrap()
    };
    let s = status(&group);
    assert_eq!(s["state"], "RUNNING", "{s}");
    assert_eq!(
        s["counts"],
        serde_json::json!({"PENDING": 1, "RUNNING": 1, "SUCCEEDED": 1})
    );
    let task = |k: u32| format!("kubernetes://torchx/ml:{app}:{k}");
    assert_eq!(s["tasks"][1]["handle"], task(1).as_str());
    assert_eq!(status(&task(1))["state"], "RUNNING");
    let log = stdout(&run(&["log", &task(1)]));
    assert_eq!(log.trim(), "sh/0 task 1", "{log}");
    // One index cannot be cancelled on its own; the group can (the Job is suspended).
    assert_eq!(run(&["cancel", &task(1)]).status.code(), Some(6));
    fake.store.lock().unwrap().set_status(
        jobs,
        &job_name,
        serde_json::json!({"active": 0, "completedIndexes": "0,1", "failedIndexes": "2"}),
    );
    let s = status(&group);
    assert_eq!(s["state"], "FAILED", "{s}");
    assert_eq!(
        s["counts"],
        serde_json::json!({"FAILED": 1, "SUCCEEDED": 2})
    );
    let long = run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "-cfg",
        "namespace=ml",
        "--array",
        "2",
        "utils.sh",
        "sleep",
        "600",
    ]);
    let long = stdout(&long).trim().to_string();
    assert_eq!(run(&["cancel", &long]).status.code(), Some(0));
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.starts_with("PATCH /apis/batch/v1/namespaces/ml/jobs/")),
        "the group's Job is suspended"
    );
}

/// `torchx plan` asks the API server whether the job's namespace exists: a namespace the fake
/// does not have fails the plan (kubernetes and kubernetes_mcad), one it has passes; nothing is
/// created. What this does not prove: that a real API server answers the same (the request is
/// the standard `GET /api/v1/namespaces/{ns}`).
#[test]
fn plan_checks_the_namespace() {
    let fake = FakeKube::start(AUTO);
    let env = Env::new();
    let plan = |scheduler: &str, ns: &str| {
        let out = env
            .cmd(&[
                "plan",
                "--json",
                "--workspace",
                "",
                "-s",
                scheduler,
                "-cfg",
                &format!("namespace={ns}"),
                "utils.echo",
            ])
            .env("KUBECONFIG", &fake.kubeconfig)
            .output()
            .unwrap();
        let rows: serde_json::Value =
            serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (out.status.code(), rows[0].clone())
    };
    for scheduler in ["kubernetes", "kubernetes_mcad"] {
        let (code, row) = plan(scheduler, "nosuch");
        assert_eq!(code, Some(1), "{row}");
        assert_eq!(row["verdict"], "fails", "{row}");
        let check = row["checks"][1].clone();
        assert_eq!(check["check"], "namespace nosuch", "{row}");
        assert!(
            check["fix"].as_str().unwrap().contains("namespace="),
            "{row}"
        );
        let (code, row) = plan(scheduler, AUTO);
        assert_eq!(code, Some(0), "{row}");
        assert_eq!(row["verdict"], "ok", "{row}");
    }
    // A replica no node can hold (the fake's one node has 3.8 CPUs allocatable).
    std::fs::write(
        env.cwd.join("big.yaml"),
        "name: big\nroles:\n- name: t\n  image: x\n  entrypoint: 'true'\n  \
         resource: {cpu: 8, gpu: 0, memMB: 1024}\n",
    )
    .unwrap();
    let out = env
        .cmd(&[
            "plan",
            "--json",
            "--workspace",
            "",
            "-s",
            "kubernetes",
            "-cfg",
            &format!("namespace={AUTO}"),
            "./big.yaml",
        ])
        .env("KUBECONFIG", &fake.kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let nodes = rows[0]["checks"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(nodes["check"], "nodes", "{nodes}");
    assert_eq!(nodes["outcome"], "fails", "{nodes}");
    assert!(
        nodes["detail"]
            .as_str()
            .unwrap()
            .contains("node-a: 3.8 CPU"),
        "{nodes}"
    );
    let requests = fake.store.lock().unwrap().requests.clone();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /api/v1/namespaces/nosuch")),
        "{requests:?}"
    );
    assert!(
        !requests.iter().any(|r| r.starts_with("POST")),
        "plan created nothing: {requests:?}"
    );
}
