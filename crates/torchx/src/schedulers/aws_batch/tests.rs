//! aws_batch: snapshots of the rendered job definition for the standard cases, and the
//! pre-flight errors (role and node limits, memory, names).

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::components::test_app as component;
use crate::opts::{Cfg, TypedOpts};
use crate::scheduler::NativeRequest;
use crate::specs::{Mount, Resource, RetryPolicy, Role};

fn ctx() -> DryRunContext {
    DryRunContext::new("torchx", "fzfjxlmln9", "/work")
}

fn opts(v: serde_json::Value) -> AwsBatchOpts {
    let schema = AwsBatchOpts::schema();
    // The submitting user a dry run would have found, unless the test names one.
    let mut v = v;
    if v.get("user").is_none() {
        v["user"] = "alice".into();
    }
    let cfg = schema.resolve(&schema.parse_json(&v).unwrap()).unwrap();
    AwsBatchOpts::from_cfg(&cfg).unwrap()
}

/// TORCHX_CHECKPOINT_DIR on an EFS volume.
fn with_checkpoint_volume(r: &mut Role) {
    r.mounts.push(Mount::Volume {
        src: "fs-ckpt".into(),
        dst_path: "/ckpt".into(),
        read_only: false,
    });
    r.checkpoint_dir = Some("/ckpt".into());
}

fn cases() -> Vec<(&'static str, AppDef, serde_json::Value)> {
    let q = json!({"queue": "torchx"});
    let mut trainer = Role::new("trainer", "ghcr.io/x/train:1")
        .with_entrypoint("python")
        .with_args([
            "-m",
            "train",
            "--rank",
            "${replica_id}",
            "--master",
            "$${${rank0_env}}",
            "--app",
            "${app_id}",
        ]);
    trainer.num_replicas = 2;
    trainer.resource = Resource::new(8, 1, 32000);
    let mut reader = Role::new("reader", "ghcr.io/x/read:1").with_entrypoint("reader");
    reader.resource = Resource::new(2, 0, 4096);
    let mut multi = AppDef::new("multi", vec![trainer, reader]);
    multi.metadata = BTreeMap::from([("team".to_string(), "ml".to_string())]);
    let mut mounted = Role::new("m", "img").with_entrypoint("ls");
    mounted.resource = Resource::new(1, 0, 1024);
    mounted.mounts = vec![
        Mount::Bind {
            src_path: "/data".into(),
            dst_path: "/mnt/data".into(),
            read_only: true,
        },
        Mount::Volume {
            src: "fs-1234".into(),
            dst_path: "/mnt/efs".into(),
            read_only: false,
        },
        Mount::Device {
            src_path: "/dev/fuse".into(),
            dst_path: "/dev/fuse".into(),
            permissions: "rw".into(),
        },
    ];
    let mut dev = Role::new("d", "img").with_entrypoint("run");
    dev.resource = Resource::new(96, 8, 1_000_000);
    dev.resource.devices = BTreeMap::from([("vpc.amazonaws.com/efa".to_string(), 2)]);
    dev.resource.capabilities = BTreeMap::from([(
        "node.kubernetes.io/instance-type".to_string(),
        json!("p4d.24xlarge"),
    )]);
    let mut retried = Role::new("r", "img").with_entrypoint("flaky");
    retried.resource = Resource::new(1, 0, 1024);
    retried.max_retries = 3;
    retried.retry_policy = RetryPolicy::Application;
    let mut recovering = Role::new("train", "img")
        .with_entrypoint("python")
        .with_args(["train.py"]);
    recovering.resource = Resource::new(1, 0, 1024);
    recovering.time_limit = Some(3600);
    recovering.max_requeues = Some(5);
    with_checkpoint_volume(&mut recovering);
    vec![
        (
            "single",
            component("utils.echo", &["--msg", "hi"]),
            q.clone(),
        ),
        (
            "ddp_2x2",
            component("dist.ddp", &["-j", "2x2", "--script", "train.py"]),
            q.clone(),
        ),
        (
            "multi_role",
            multi,
            json!({"queue": "torchx", "privileged": true,
            "job_role_arn": "arn:aws:iam::1:role/job", "execution_role_arn": "arn:aws:iam::1:role/exec"}),
        ),
        ("mounts", AppDef::new("mounts", vec![mounted]), q.clone()),
        (
            "devices_instance_type",
            AppDef::new("devices", vec![dev]),
            q.clone(),
        ),
        ("retries", AppDef::new("retries", vec![retried]), q.clone()),
        (
            "recovery",
            AppDef::new("recovery", vec![recovering]),
            q.clone(),
        ),
        (
            "share_id",
            component("utils.echo", &[]),
            json!({"queue": "torchx", "share_id": "teamA", "priority": 7, "user": "bob"}),
        ),
    ]
}

#[test]
fn job_definitions_snapshot() {
    for (name, app, o) in cases() {
        let job = render(&app, &opts(o), &ctx()).unwrap();
        insta::assert_snapshot!(format!("batch_{name}"), job.render());
    }
}

#[test]
fn limits_and_bad_input_are_preflight_errors() {
    let q = opts(json!({"queue": "torchx"}));
    let role = |n: &str| {
        let mut r = Role::new(n, "img").with_entrypoint("x");
        r.resource = Resource::new(1, 0, 1024);
        r
    };
    let six = AppDef::new("six", (0..6).map(|i| role(&format!("r{i}"))).collect());
    let e = render(&six, &q, &ctx()).unwrap_err().to_string();
    assert!(e.contains("only supports <= 5 roles"), "{e}");
    let mut big = role("big");
    big.num_replicas = 1001;
    let e = render(&AppDef::new("big", vec![big]), &q, &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 1000 nodes"), "{e}");
    let mut nomem = role("nomem");
    nomem.resource.mem_mb = 0;
    let e = render(&AppDef::new("nomem", vec![nomem]), &q, &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("memMB > 0"), "{e}");
    let e = render(&AppDef::new("bad name!", vec![role("a")]), &q, &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a valid AWS Batch name"), "{e}");
    let schema = AwsBatchOpts::schema();
    let e = schema
        .resolve(&Cfg::new())
        .and_then(|c| AwsBatchOpts::from_cfg(&c))
        .unwrap_err()
        .to_string();
    assert!(e.contains("queue"), "{e}");
    let e = render(
        &AppDef::new("a", vec![role("a")]),
        &opts(json!({"queue": "bad queue"})),
        &ctx(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("run option queue"), "{e}");
}

#[test]
fn recovery_beyond_what_batch_can_do_is_refused() {
    let mut unmounted = Role::new("r", "img").with_entrypoint("x");
    unmounted.resource = Resource::new(1, 0, 1024);
    unmounted.time_limit = Some(600);
    let err = render(
        &AppDef::new("a", vec![unmounted]),
        &opts(json!({"queue": "torchx"})),
        &ctx(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--checkpoint_dir"), "{err}");
    let role = |limit: u64, requeues: Option<u32>| {
        let mut r = Role::new("r", "img").with_entrypoint("x");
        r.resource = Resource::new(1, 0, 1024);
        r.time_limit = Some(limit);
        r.max_requeues = requeues;
        with_checkpoint_volume(&mut r);
        AppDef::new("a", vec![r])
    };
    let q = || opts(json!({"queue": "torchx"}));
    let err = render(&role(30, None), &q(), &ctx()).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Unsupported);
    assert!(err.to_string().contains("at least 60 seconds"), "{err}");
    let err = render(&role(600, Some(20)), &q(), &ctx()).unwrap_err();
    assert!(err.to_string().contains("at most 10 attempts"), "{err}");
    // The default requeue budget is capped to Batch's 10 attempts, as README says.
    let job = render(&role(600, None), &q(), &ctx()).unwrap();
    assert_eq!(job.job_def.retry_strategy.attempts, 10);
}

#[test]
fn capacity_is_the_largest_compute_environment() {
    use crate::scheduler::CheckOutcome;
    assert_eq!(
        super::plan::capacity_check(Some(4), 8).outcome,
        CheckOutcome::Fails {
            fix: "ask for fewer CPUs per replica, or use a queue with bigger compute environments"
                .into()
        }
    );
    assert_eq!(
        super::plan::capacity_check(Some(16), 8).outcome,
        CheckOutcome::Ok
    );
    assert_eq!(
        super::plan::capacity_check(None, 64).outcome,
        CheckOutcome::Ok
    );
}
