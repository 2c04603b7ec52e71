//! Kubernetes and MCAD manifests: snapshots of the standard cases, validation of every Volcano
//! Job and AppWrapper against its CRD's openAPIV3Schema made strict (unknown fields rejected,
//! as the API server's strict field validation does), a typed round-trip of every built-in
//! object (Job, Pod, PodTemplateSpec, Service) through k8s-openapi, and the name rules.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, Service};
use serde_json::{json, Value};

use super::opts::{Mode, RawKubernetesOpts};
use super::*;
use crate::components::test_app as component;
use crate::opts::{Cfg, TypedOpts};
use crate::scheduler::NativeRequest;
use crate::schedulers::kubernetes_mcad::{self, KubernetesMcadOpts};
use crate::specs::{AppDef, Mount, Resource, RetryPolicy, Role};

fn ctx() -> DryRunContext {
    DryRunContext::new("torchx", "fzfjxlmln9", "/work")
}

fn opts(v: Value) -> KubernetesOpts {
    let schema = RawKubernetesOpts::schema();
    let cfg = schema.resolve(&schema.parse_json(&v).unwrap()).unwrap();
    KubernetesOpts::from_cfg(&cfg).unwrap()
}

fn mcad_opts(v: Value) -> KubernetesMcadOpts {
    let schema = KubernetesMcadOpts::schema();
    let cfg = schema.resolve(&schema.parse_json(&v).unwrap()).unwrap();
    KubernetesMcadOpts::from_cfg(&cfg).unwrap()
}

/// The standard cases every backend snapshots.
fn cases() -> Vec<(&'static str, AppDef)> {
    let single = component("utils.echo", &["--msg", "hello"]);
    let ddp = component(
        "dist.ddp",
        &["-j", "2x2", "--script", "train.py", "--", "--lr", "0.1"],
    );
    let mut trainer = Role::new("trainer", "ghcr.io/x/train:1")
        .with_entrypoint("python")
        .with_args([
            "-m",
            "train",
            "--rank",
            "${replica_id}",
            "--app",
            "${app_id}",
            "--master",
            "$${${rank0_env}:=localhost}",
            "--root",
            "${img_root}",
        ]);
    trainer.num_replicas = 2;
    trainer.resource = Resource::new(4, 2, 8192);
    trainer.port_map = BTreeMap::from([("c10d".to_string(), 29500), ("tb".to_string(), 6006)]);
    trainer.env = crate::specs::Env::from([
        ("NODE".to_string(), "[FIELD_PATH]spec.nodeName".to_string()),
        ("MODE".to_string(), "fast".to_string()),
    ]);
    let mut reader = Role::new("reader", "ghcr.io/x/read:1").with_entrypoint("reader");
    reader.resource = Resource::new(1, 0, 512);
    let multi = AppDef::new("multi", vec![trainer, reader]);
    let mut mounted = Role::new("m", "img").with_entrypoint("ls");
    mounted.mounts = vec![
        Mount::Bind {
            src_path: "/data".into(),
            dst_path: "/mnt/data".into(),
            read_only: true,
        },
        Mount::Volume {
            src: "my-pvc".into(),
            dst_path: "/mnt/pvc".into(),
            read_only: false,
        },
        Mount::Device {
            src_path: "/dev/fuse".into(),
            dst_path: "/dev/fuse".into(),
            permissions: "rwm".into(),
        },
        Mount::Device {
            src_path: "/dev/null".into(),
            dst_path: "/dev/ro".into(),
            permissions: "r".into(),
        },
    ];
    let mounts = AppDef::new("mounts", vec![mounted]);
    let mut dev = Role::new("d", "img").with_entrypoint("run");
    dev.resource = Resource::new(8, 0, 16384);
    dev.resource.devices = BTreeMap::from([("vpc.amazonaws.com/efa".to_string(), 4)]);
    dev.resource.capabilities = BTreeMap::from([(
        names::LABEL_INSTANCE_TYPE.to_string(),
        json!("p4d.24xlarge"),
    )]);
    let devices = AppDef::new("devices", vec![dev]);
    let mut retried = Role::new("r", "img").with_entrypoint("flaky");
    retried.num_replicas = 3;
    retried.max_retries = 3;
    retried.retry_policy = RetryPolicy::Replica;
    let mut app_retried = Role::new("a", "img").with_entrypoint("flaky");
    app_retried.max_retries = 2;
    app_retried.retry_policy = RetryPolicy::Application;
    app_retried.min_replicas = Some(1);
    app_retried.num_replicas = 2;
    let retries = AppDef::new("retries", vec![retried, app_retried]);
    let mut limited = Role::new("trainer", "img")
        .with_entrypoint("python")
        .with_args(["train.py", "--rank", "${replica_id}"]);
    limited.num_replicas = 2;
    limited.max_retries = 2;
    limited.retry_policy = RetryPolicy::Replica;
    limited.time_limit = Some(3600);
    limited.checkpoint_signal = Some("USR2@120".parse().unwrap());
    limited.mounts = vec![Mount::Volume {
        src: "ckpt".into(),
        dst_path: "/ckpt".into(),
        read_only: false,
    }];
    limited.checkpoint_dir = Some("/ckpt/trainer".into());
    let mut whole = Role::new("eval", "img").with_entrypoint("eval");
    whole.max_retries = 1;
    whole.retry_policy = RetryPolicy::Application;
    whole.time_limit = Some(600);
    whole.mounts = limited.mounts.clone();
    whole.checkpoint_dir = Some("/ckpt/eval".into());
    let recovery = AppDef::new("recovery", vec![limited, whole]);
    vec![
        ("single", single),
        ("ddp_2x2", ddp),
        ("multi_role", multi),
        ("mounts", mounts),
        ("devices_instance_type", devices),
        ("retries", retries),
        ("recovery", recovery),
    ]
}

// ---- A strict structural-schema validator (what the API server applies to a CRD) ----

fn crd_schema(file: &str, version: &str) -> Value {
    let path = format!(
        "{}/src/schedulers/kubernetes/crds/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let crd: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap();
    v["schema"]["openAPIV3Schema"].clone()
}

/// Errors of `v` against `schema`, with unknown fields rejected wherever the schema lists
/// properties and neither allows additional ones nor preserves unknown fields.
fn validate(schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    if schema["x-kubernetes-int-or-string"] == true {
        if !(v.is_i64() || v.is_u64() || v.is_string()) {
            errs.push(format!("{path}: {v} is not an int or string"));
        }
        return;
    }
    if v.is_null() {
        if schema["nullable"] != true {
            errs.push(format!("{path}: null"));
        }
        return;
    }
    if let Some(all) = schema["allOf"].as_array() {
        for s in all {
            validate(s, v, path, errs);
        }
    }
    let ok = match schema["type"].as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        _ => true,
    };
    if !ok {
        errs.push(format!("{path}: {v} is not of type {}", schema["type"]));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(v) {
            errs.push(format!("{path}: {v} not in {allowed:?}"));
        }
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), v.as_f64()) {
        if n < min {
            errs.push(format!("{path}: {n} < minimum {min}"));
        }
    }
    if let (Some(max), Some(s)) = (schema["maxLength"].as_u64(), v.as_str()) {
        if s.len() as u64 > max {
            errs.push(format!("{path}: longer than {max}"));
        }
    }
    if let Some(obj) = v.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            if !obj.contains_key(r.as_str().unwrap_or_default()) {
                errs.push(format!("{path}: missing required field {r}"));
            }
        }
        let props = schema["properties"].as_object();
        let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
        for (k, child) in obj {
            let sub = format!("{path}/{k}");
            if let Some(s) = props.and_then(|p| p.get(k)) {
                validate(s, child, &sub, errs);
            } else if schema["additionalProperties"].is_object() {
                validate(&schema["additionalProperties"], child, &sub, errs);
            } else if props.is_some() && !preserve && schema["additionalProperties"] != true {
                errs.push(format!("{sub}: unknown field"));
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, child) in arr.iter().enumerate() {
            validate(items, child, &format!("{path}/{i}"), errs);
        }
    }
}

fn assert_valid(schema: &Value, v: &Value, what: &str) {
    let mut errs = Vec::new();
    validate(schema, v, "", &mut errs);
    assert!(errs.is_empty(), "{what}: {errs:#?}");
}

/// `to_value(from_value::<T>(v)) == v`: no field is unknown to (and dropped by) the typed API.
fn assert_round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value, what: &str) {
    let typed: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        &serde_json::to_value(typed).unwrap(),
        v,
        "{what} lost or changed a field"
    );
}

#[test]
fn validator_rejects_unknown_fields_and_wrong_types() {
    let schema = crd_schema("volcano-batch.volcano.sh_jobs.yaml", "v1alpha1");
    let (_, app) = &cases()[0];
    let good =
        render::volcano_job(app, &opts(json!({"mode": "volcano", "queue": "q"})), "x").unwrap();
    assert_valid(&schema, &good, "good job");
    let mut typo = good.clone();
    typo["spec"]["minAvaliable"] = json!(1);
    typo["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = json!("x");
    let mut errs = Vec::new();
    validate(&schema, &typo, "", &mut errs);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    let mut wrong = good;
    wrong["spec"]["maxRetry"] = json!("one");
    let mut errs = Vec::new();
    validate(&schema, &wrong, "", &mut errs);
    assert_eq!(errs.len(), 1, "{errs:#?}");
}

#[test]
fn volcano_jobs_snapshot_and_validate_strictly() {
    let schema = crd_schema("volcano-batch.volcano.sh_jobs.yaml", "v1alpha1");
    let o = opts(
        json!({"mode": "volcano", "queue": "default", "priority_class": "high", "service_account": "trainer"}),
    );
    for (name, app) in cases() {
        let job = render(&app, &o, &ctx()).unwrap();
        insta::assert_snapshot!(format!("volcano_{name}"), job.render());
        assert_eq!(job.objects.len(), 1);
        assert_valid(&schema, &job.objects[0], name);
        for task in job.objects[0]["spec"]["tasks"].as_array().unwrap() {
            assert_round_trips::<PodTemplateSpec>(&task["template"], name);
        }
    }
}

#[test]
fn native_jobs_snapshot_and_round_trip() {
    let o = opts(
        json!({"node_selector": {"pool": "gpu"}, "tolerations": ["gpu=yes:NoSchedule", "spot"], "image_pull_secret": "regcred", "namespace": "ml"}),
    );
    for (name, app) in cases() {
        let job = render(&app, &o, &ctx()).unwrap();
        insta::assert_snapshot!(format!("job_{name}"), job.render());
        assert_eq!(job.objects.len(), 1 + app.roles.len());
        assert_round_trips::<Service>(&job.objects[0], name);
        for j in &job.objects[1..] {
            assert_round_trips::<Job>(j, name);
        }
    }
}

/// What the API server checks of a Job's `podFailurePolicy` beyond its schema (the Job API
/// reference, "Pod failure policy"): the pod template's restartPolicy is Never; each rule has
/// exactly one of onExitCodes and onPodConditions; actions are FailJob, FailIndex (only with
/// backoffLimitPerIndex), Ignore or Count; onExitCodes' operator is In or NotIn over 1 to 255
/// distinct values, with 0 never under In.
fn pod_failure_policy_errors(job: &Value) -> Vec<String> {
    let spec = &job["spec"];
    let mut errs = Vec::new();
    if spec["template"]["spec"]["restartPolicy"] != "Never" {
        errs.push("restartPolicy must be Never".to_string());
    }
    for (i, rule) in spec["podFailurePolicy"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let codes = &rule["onExitCodes"];
        if codes.is_null() == rule["onPodConditions"].is_null() {
            errs.push(format!(
                "rule {i}: exactly one of onExitCodes, onPodConditions"
            ));
        }
        match rule["action"].as_str() {
            Some("FailJob" | "Ignore" | "Count") => {}
            Some("FailIndex") if !spec["backoffLimitPerIndex"].is_null() => {}
            other => errs.push(format!("rule {i}: action {other:?}")),
        }
        if let Some(values) = codes["values"].as_array() {
            let mut seen: Vec<i64> = values.iter().filter_map(Value::as_i64).collect();
            let n = seen.len();
            seen.sort_unstable();
            seen.dedup();
            if !(1..=255).contains(&n) || seen.len() != n {
                errs.push(format!("rule {i}: 1 to 255 distinct exit codes"));
            }
            if codes["operator"] == "In" && seen.contains(&0) {
                errs.push(format!("rule {i}: 0 under In"));
            }
            if !matches!(codes["operator"].as_str(), Some("In" | "NotIn")) {
                errs.push(format!("rule {i}: operator {}", codes["operator"]));
            }
        }
    }
    errs
}

#[test]
fn recovery_maps_to_pod_deadlines_failure_policies_and_volcano_policies() {
    let (_, app) = cases().pop().unwrap();
    // Job mode: the requeue code and disruptions do not count toward backoffLimit; every
    // pod has its deadline (the attempt's limit + the timer's grace) and a timed command.
    let job = render(&app, &opts(json!({})), &ctx()).unwrap();
    for j in &job.objects[1..] {
        assert_round_trips::<Job>(j, "recovery");
        assert_eq!(pod_failure_policy_errors(j), Vec::<String>::new());
        let rules = &j["spec"]["podFailurePolicy"]["rules"];
        assert_eq!(rules[1]["onExitCodes"]["values"], json!([75]), "{rules}");
        let pod = &j["spec"]["template"]["spec"];
        assert!(
            pod["activeDeadlineSeconds"].as_i64().unwrap() > 600,
            "{pod}"
        );
        assert_eq!(pod["containers"][0]["command"][0], "sh");
    }
    // The checker catches what the API server refuses.
    let mut bad = job.objects[1].clone();
    bad["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] = json!([0, 75]);
    bad["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    assert_eq!(pod_failure_policy_errors(&bad).len(), 2);
    // Volcano: the requeue code restarts the job, an eviction re-creates the pod (the job for
    // APPLICATION); each requeue is one of Volcano's job restarts.
    let vc = render(
        &app,
        &opts(json!({"mode": "volcano", "queue": "q"})),
        &ctx(),
    )
    .unwrap();
    let tasks = vc.objects[0]["spec"]["tasks"].as_array().unwrap();
    assert_eq!(
        tasks[0]["policies"],
        json!([{"exitCode": 75, "action": "RestartJob"}, {"event": "PodEvicted", "action": "RestartTask"}])
    );
    assert_eq!(
        vc.objects[0]["spec"]["maxRetry"],
        json!(app.roles.iter().map(|r| r.max_retries).min().unwrap() + 100)
    );
    assert_eq!(
        tasks[2]["policies"][0],
        json!({"exitCode": 75, "action": "RestartJob"})
    );
    // What Kubernetes cannot count, or MCAD cannot restart, is refused by name.
    let mut counted = app.clone();
    counted.roles[0].max_requeues = Some(3);
    let err = render(&counted, &opts(json!({})), &ctx()).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Unsupported);
    assert!(err.to_string().contains("max_requeues 3"), "{err}");
    let err = kubernetes_mcad::render(&counted, &mcad_opts(json!({})), &ctx()).unwrap_err();
    assert!(err.to_string().contains("never restarted"), "{err}");
}

#[test]
fn appwrappers_snapshot_and_validate_strictly() {
    let schema = crd_schema("mcad-workload.codeflare.dev_appwrappers.yaml", "v1beta1");
    let plain = mcad_opts(json!({}));
    let full = mcad_opts(
        json!({"namespace": "ml", "priority": 5, "priority_class_name": "high", "image_secret": "regcred", "coscheduler_name": "scheduler-plugins", "network": "roce-net", "service_account": "trainer"}),
    );
    for (name, app) in cases() {
        for (variant, o) in [("", &plain), ("_all_options", &full)] {
            let aw = kubernetes_mcad::render(&app, o, &ctx()).unwrap();
            insta::assert_snapshot!(format!("appwrapper_{name}{variant}"), aw.render());
            assert_valid(&schema, &aw.resource, name);
            // The wrapped objects are not checked by the CRD schema: check them as typed ones.
            for item in aw.resource["spec"]["resources"]["GenericItems"]
                .as_array()
                .unwrap()
            {
                let t = &item["generictemplate"];
                match t["kind"].as_str() {
                    Some("Pod") => assert_round_trips::<Pod>(t, name),
                    Some("Service") => assert_round_trips::<Service>(t, name),
                    _ => assert_eq!(t["kind"], "PodGroup"),
                }
            }
        }
    }
}

#[test]
fn mcad_pods_of_several_roles_do_not_collide() {
    let (_, app) = cases().remove(2);
    let aw = kubernetes_mcad::render(&app, &mcad_opts(json!({})), &ctx()).unwrap();
    let names: Vec<&str> = aw.resource["spec"]["resources"]["GenericItems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["generictemplate"]["kind"] == "Pod")
        .map(|i| i["generictemplate"]["metadata"]["name"].as_str().unwrap())
        .collect();
    let mut unique = names.clone();
    unique.dedup();
    assert_eq!(names, unique);
    assert_eq!(
        names,
        [
            "multi-fzfjxlmln9-0",
            "multi-fzfjxlmln9-1",
            "multi-fzfjxlmln9-1-0"
        ]
    );
}

#[test]
fn names_that_kubernetes_would_reject_are_preflight_errors() {
    let mut long = component("utils.echo", &[]);
    long.name = "a".repeat(60);
    let err = render(&long, &opts(json!({})), &ctx())
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not a valid Kubernetes name"), "{err}");
    let mut role = component("utils.echo", &[]);
    role.roles[0].name = "r".repeat(50);
    let err = render(
        &role,
        &opts(json!({"mode": "volcano", "queue": "q"})),
        &ctx(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("pod name"), "{err}");
    let mut ports = component("utils.echo", &[]);
    ports.roles[0].port_map = BTreeMap::from([("Way_Too_Long_Port".to_string(), 1)]);
    let err = render(&ports, &opts(json!({})), &ctx())
        .unwrap_err()
        .to_string();
    assert!(err.contains("port_map key `Way_Too_Long_Port`"), "{err}");
    let mut label = component("utils.echo", &[]);
    label.name = "bad name!".into();
    assert!(render(&label, &opts(json!({})), &ctx()).is_err());
    // MCAD truncates a long app name (as TorchX) instead of failing.
    let aw = kubernetes_mcad::render(&long, &mcad_opts(json!({})), &ctx()).unwrap();
    assert!(aw.name.len() <= 63 - 4, "{}", aw.name);
}

#[test]
fn a_queue_selects_volcano_as_in_torchx_configs() {
    let schema = RawKubernetesOpts::schema();
    let mode = |s: &str| {
        KubernetesOpts::from_cfg(&schema.resolve(&schema.parse_cli(s).unwrap()).unwrap())
            .map(|o| o.mode)
    };
    assert_eq!(mode("queue=default").unwrap(), Mode::Volcano);
    assert_eq!(mode("namespace=ns").unwrap(), Mode::Job);
    assert_eq!(mode("mode=volcano,queue=q").unwrap(), Mode::Volcano);
    let e = mode("mode=job,queue=q").unwrap_err().to_string();
    assert!(e.contains("queue=q needs mode=volcano"), "{e}");
}

/// `queue` without `mode` renders TorchX's own Volcano Job: TorchX 0.7.0's request for the same
/// command (testdata, verbatim) equals ours up to the generated name and the version label,
/// with the nightly's one addition: `TORCHX_IMAGE` after the role's environment.
#[test]
fn a_queue_renders_torchx_s_own_volcano_job() {
    let text = include_str!("testdata/torchx-0.7.0-volcano-echo.yaml");
    let mut theirs: Value = serde_norway::from_str(text).unwrap();
    let container = &mut theirs["spec"]["tasks"][0]["template"]["spec"]["containers"][0];
    let image = container["image"].clone();
    container["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "TORCHX_IMAGE", "value": image}));
    let app_id = theirs["metadata"]["name"].as_str().unwrap();
    let mut app = component("utils.echo", &["--msg", "hi"]);
    // What TorchX's runner injects (ours also injects its session id, left out here).
    app.roles[0].env.insert(
        "TORCHX_JOB_ID".into(),
        "kubernetes://torchx/${app_id}".into(),
    );
    let queue_only = opts(json!({"queue": "default"}));
    assert_eq!(queue_only.mode, Mode::Volcano);
    let mut ours = render::volcano_job(&app, &queue_only, app_id).unwrap();
    let labels = &mut ours["spec"]["tasks"][0]["template"]["metadata"]["labels"];
    labels["torchx.pytorch.org/version"] = json!("0.7.0");
    assert_eq!(ours, theirs);
}

#[test]
fn option_errors_name_the_key() {
    let schema = RawKubernetesOpts::schema();
    let cfg = |s: &str| schema.resolve(&schema.parse_cli(s).unwrap()).unwrap();
    let e = KubernetesOpts::from_cfg(&cfg("mode=volcano"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("queue"), "{e}");
    let e = KubernetesOpts::from_cfg(&cfg("mode=slurm"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("run option mode: `slurm`"), "{e}");
    let e = KubernetesOpts::from_cfg(&cfg("tolerations=gpu:Sometimes"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown effect `Sometimes`"), "{e}");
    let e = KubernetesOpts::from_cfg(&cfg("namespace=Not_OK"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("run option namespace"), "{e}");
    let mut role_policy = component("utils.echo", &[]);
    role_policy.roles[0].max_retries = 1;
    role_policy.roles[0].retry_policy = RetryPolicy::Role;
    let e = render(
        &role_policy,
        &opts(json!({"mode": "volcano", "queue": "q"})),
        &ctx(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("retry_policy ROLE is not supported by Volcano"),
        "{e}"
    );
    assert!(KubernetesOpts::from_cfg(&Cfg::new()).is_ok());
}

#[test]
fn torchx_name_helpers() {
    assert_eq!(names::normalize_str("-Foo_Bar-1"), "foobar-1");
    assert_eq!(names::cleanup_str("-12Foo"), "foo");
    assert_eq!(
        kubernetes_mcad::render::truncated_app_id("app", 1, "fzfjxlmln9"),
        "app-fzfjxlmln9"
    );
    assert_eq!(parse_time("1970-01-02T00:00:01Z"), Some(86_401.0));
    assert_eq!(parse_time("2026-11-21T10:00:00.5Z"), Some(1_795_255_200.5));
    assert_eq!(parse_time("nonsense"), None);
    // A followed log that resumes skips what it read by exact (nanosecond) timestamps; the
    // API server trims trailing zeros of the fraction.
    let at = |s| logs::stamp_order(s).unwrap();
    assert_eq!(at("1970-01-02T00:00:01Z"), (86_401, 0));
    assert_eq!(at("1970-01-02T00:00:01.5Z"), (86_401, 500_000_000));
    assert!(at("2026-11-28T21:24:44.611477123Z") > at("2026-11-28T21:24:44.6114771Z"));
    assert!(at("2026-11-28T21:24:44.61147712Z") < at("2026-11-28T21:24:44.611477121Z"));
    assert_eq!(logs::stamp_order("21:24:44"), None);
}

/// A role with TorchX 0.8's `V1Pod` overlay (nested format) merging into every render.
fn overlaid_app() -> AppDef {
    let mut app = component("utils.echo", &["--msg", "hi"]);
    app.roles[0].metadata.insert(
        "kubernetes".into(),
        json!({
            crate::specs::overlay::FORMAT_KEY: true,
            "V1Pod": {
                "metadata": {"annotations": {"team": "ml"}},
                "spec": {
                    "nodeSelector": {"pool": "a100"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "__put__:volumes": [{"name": "scratch", "emptyDir": {}}],
                    "__join__:containers:name": [{"name": "echo-0", "imagePullPolicy": "Always"}],
                },
            },
        }),
    );
    app
}

#[test]
fn pod_overlays_merge_into_every_kubernetes_render() {
    let volcano = render(
        &overlaid_app(),
        &opts(json!({"mode": "volcano", "queue": "default"})),
        &ctx(),
    )
    .unwrap();
    let schema = crd_schema("volcano-batch.volcano.sh_jobs.yaml", "v1alpha1");
    assert_valid(&schema, &volcano.objects[0], "overlaid");
    let pod = &volcano.objects[0]["spec"]["tasks"][0]["template"];
    assert_round_trips::<PodTemplateSpec>(pod, "overlaid");
    assert_eq!(pod["metadata"]["annotations"]["team"], "ml");
    assert_eq!(pod["spec"]["nodeSelector"]["pool"], "a100");
    assert_eq!(
        pod["spec"]["volumes"],
        json!([{"name": "scratch", "emptyDir": {}}])
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        (
            container["name"].as_str(),
            container["imagePullPolicy"].as_str()
        ),
        (Some("echo-0"), Some("Always"))
    );
    assert!(
        container["command"].is_array(),
        "JOIN keeps the rendered fields: {container}"
    );
    // The labels TorchX needs are set after the overlay, so it cannot lose them.
    assert!(pod["metadata"]["labels"]["app.kubernetes.io/instance"].is_string());

    let native = render(&overlaid_app(), &opts(json!({})), &ctx()).unwrap();
    let template = &native.objects[1]["spec"]["template"];
    assert_round_trips::<Job>(&native.objects[1], "overlaid");
    assert_eq!(template["spec"]["nodeSelector"]["pool"], "a100");
    assert_eq!(template["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");

    let aw = kubernetes_mcad::render(&overlaid_app(), &mcad_opts(json!({})), &ctx()).unwrap();
    let rendered = aw.render();
    assert!(
        rendered.contains("pool: a100") && rendered.contains("team: ml"),
        "{rendered}"
    );
}

#[test]
fn bad_pod_overlays_are_spec_errors() {
    let mut app = overlaid_app();
    app.roles[0].metadata.insert(
        "kubernetes".into(),
        json!({"spec": {"containers": {"not": "a list"}}}),
    );
    let err = render(&app, &opts(json!({})), &ctx()).unwrap_err();
    assert!(
        err.to_string().contains("V1Pod overlay") && err.to_string().contains("containers"),
        "{err}"
    );
}

fn array_tasks(apps: &[AppDef]) -> Vec<crate::scheduler::ArrayTask<'_>> {
    apps.iter()
        .enumerate()
        .map(|(i, app)| crate::scheduler::ArrayTask {
            index: 10 + i as u32,
            app,
        })
        .collect()
}

#[test]
fn an_array_is_one_indexed_job_whose_pods_pick_their_task() {
    let apps: Vec<AppDef> = ["a b", "it's", "$(HOME) ${x}"]
        .iter()
        .map(|m| {
            let mut app = component("utils.sh", &["sh", "-c", "echo \"$0\" $T", m]);
            app.roles[0].env.insert("T".into(), format!("t{}", m.len()));
            app.roles[0].max_retries = 2;
            app
        })
        .collect();
    let o = opts(json!({"namespace": "ml"}));
    let crate::scheduler::ArrayRequest::Native(job) =
        render::render_array(&array_tasks(&apps), Some(2), &o, &ctx()).unwrap()
    else {
        panic!("not native")
    };
    insta::assert_snapshot!(job.render());
    let jobs: Vec<&Value> = job.objects.iter().filter(|o| o["kind"] == "Job").collect();
    assert_eq!(jobs.len(), 1);
    assert_round_trips::<Job>(jobs[0], "array job");
    let spec = &jobs[0]["spec"];
    assert_eq!(
        (
            &spec["completionMode"],
            &spec["completions"],
            &spec["parallelism"]
        ),
        (&json!("Indexed"), &json!(3), &json!(2))
    );
    assert_eq!(spec["backoffLimitPerIndex"], 2);
    assert!(spec.get("backoffLimit").is_none(), "{spec}");
    // The pod's command, run by a real shell for each completion index (Kubernetes turns
    // `$$(` back into `$(`).
    let container = &spec["template"]["spec"]["containers"][0];
    assert_eq!(
        (&container["command"][0], &container["command"][1]),
        (&json!("sh"), &json!("-c"))
    );
    let script = container["command"][2]
        .as_str()
        .unwrap()
        .replace("$$(", "$(");
    for (index, want) in ["a b t3", "it's t4", "$(HOME) ${x} t12"].iter().enumerate() {
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), *want);
    }
    // Volcano keeps each task its own gang; a multi-replica app has no index to spare.
    let volcano = opts(json!({"mode": "volcano", "queue": "q"}));
    let why = |r: crate::scheduler::ArrayRequest<KubernetesJob>| match r {
        crate::scheduler::ArrayRequest::PerTask(why) => why,
        crate::scheduler::ArrayRequest::Native(_) => panic!("native"),
    };
    let w = why(render::render_array(&array_tasks(&apps), None, &volcano, &ctx()).unwrap());
    assert!(w.contains("gang"), "{w}");
    let ddp = vec![component("dist.ddp", &["-j", "2x1", "--script", "t.py"]); 2];
    let w = why(render::render_array(&array_tasks(&ddp), None, &o, &ctx()).unwrap());
    assert!(w.contains("several replicas"), "{w}");
}

#[test]
fn quantities_parse_as_kubernetes_writes_them() {
    use super::client::parse_quantity;
    assert_eq!(parse_quantity("3500m"), Some(3.5));
    assert_eq!(parse_quantity("4"), Some(4.0));
    assert_eq!(
        parse_quantity("16Gi"),
        Some(16.0 * 1024.0 * 1024.0 * 1024.0)
    );
    assert_eq!(parse_quantity("500M"), Some(5e8));
    assert_eq!(parse_quantity("12Ki"), Some(12.0 * 1024.0));
    assert_eq!(parse_quantity("x"), None);
    assert_eq!(parse_quantity("3Qi"), None);
}
