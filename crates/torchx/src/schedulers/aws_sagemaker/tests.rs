//! aws_sagemaker: snapshots of the CreateTrainingJob request, and what SageMaker cannot do.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::components::test_app as component;
use crate::opts::{Cfg, TypedOpts};
use crate::scheduler::NativeRequest;
use crate::specs::{Mount, Resource, Role};

fn ctx() -> DryRunContext {
    DryRunContext::new("torchx", "fzfjxlmln9", "/work")
}

fn opts(v: serde_json::Value) -> AwsSageMakerOpts {
    let schema = AwsSageMakerOpts::schema();
    // The submitting user a dry run would have found, unless the test names one.
    let mut v = v;
    if v.get("user").is_none() {
        v["user"] = "alice".into();
    }
    let cfg = schema.resolve(&schema.parse_json(&v).unwrap()).unwrap();
    AwsSageMakerOpts::from_cfg(&cfg).unwrap()
}

fn base() -> serde_json::Value {
    json!({"role": "arn:aws:iam::123456789012:role/sm", "instance_type": "ml.p4d.24xlarge",
           "output_path": "s3://bucket/out"})
}

fn trainer() -> Role {
    let mut r = Role::new(
        "trainer",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
    )
    .with_entrypoint("python")
    .with_args(["-m", "train", "--epochs", "3", "--run", "${app_id}"]);
    r.num_replicas = 2;
    r.resource = Resource::new(96, 8, 1_000_000);
    r.env = crate::specs::Env::from([("NCCL_DEBUG".to_string(), "INFO".to_string())]);
    r
}

#[test]
fn requests_snapshot() {
    let app = AppDef::new("train", vec![trainer()]);
    insta::assert_snapshot!(
        "sagemaker_minimal",
        render(&app, &opts(base()), &ctx()).unwrap().render()
    );
    let ddp = component("dist.ddp", &["-j", "2x2", "--script", "train.py"]);
    insta::assert_snapshot!(
        "sagemaker_ddp_2x2",
        render(&ddp, &opts(base()), &ctx()).unwrap().render()
    );
    let mut retried = trainer();
    retried.max_retries = 2;
    let mut o = base();
    o["instance_type"] = json!("ml.g5.12xlarge");
    insta::assert_snapshot!(
        "sagemaker_instance_type_retries",
        render(&AppDef::new("fast", vec![retried]), &opts(o), &ctx())
            .unwrap()
            .render()
    );
    let mut all = base();
    let extra = json!({
        "instance_count": 4, "volume_size": 100, "volume_kms_key": "kms-vol", "max_run": 3600,
        "max_wait": 7200, "use_spot_instances": true, "keep_alive_period_in_seconds": 600,
        "subnets": ["subnet-1"], "security_group_ids": ["sg-1"], "tags": {"team": "ml"},
        "hyperparameters": {"lr": "0.1"}, "environment": {"FOO": "bar"},
        "metric_definitions": {"loss": "loss=([0-9.]+)"}, "checkpoint_s3_uri": "s3://bucket/ckpt",
        "checkpoint_local_path": "/opt/ml/checkpoints", "max_retry_attempts": 2,
        "enable_network_isolation": true, "encrypt_inter_container_traffic": true,
        "disable_profiler": true, "model_uri": "s3://bucket/model", "container_log_level": 20,
        "base_job_name": "nightly", "user": "bob", "disable_output_compression": true,
        "training_repository_access_mode": "Vpc", "enable_infra_check": true,
    });
    for (k, v) in extra.as_object().unwrap() {
        all[k] = v.clone();
    }
    let mut app = AppDef::new("train", vec![trainer()]);
    app.metadata = BTreeMap::from([("project".to_string(), "x".to_string())]);
    insta::assert_snapshot!(
        "sagemaker_all_options",
        render(&app, &opts(all), &ctx()).unwrap().render()
    );
}

#[test]
fn what_sagemaker_cannot_do_is_an_error() {
    let o = opts(base());
    let two = AppDef::new(
        "two",
        vec![trainer(), Role::new("b", "img").with_entrypoint("x")],
    );
    let e = render(&two, &o, &ctx()).unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Unsupported, "{e}");
    let mut mounted = trainer();
    mounted.mounts = vec![Mount::Bind {
        src_path: "/a".into(),
        dst_path: "/b".into(),
        read_only: false,
    }];
    let e = render(&AppDef::new("m", vec![mounted]), &o, &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("mounts"), "{e}");
    let mut macro_role = trainer();
    macro_role.args.push("${replica_id}".into());
    let e = render(&AppDef::new("m", vec![macro_role]), &o, &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("${replica_id}"), "{e}");
    let mut with_src = base();
    with_src["source_dir"] = json!(".");
    let e = render(&AppDef::new("s", vec![trainer()]), &opts(with_src), &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("source_dir"), "{e}");
    let mut no_out = base();
    no_out.as_object_mut().unwrap().remove("output_path");
    let e = render(&AppDef::new("s", vec![trainer()]), &opts(no_out), &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("output_path"), "{e}");
    let mut spot = base();
    spot["use_spot_instances"] = json!(true);
    let e = render(&AppDef::new("s", vec![trainer()]), &opts(spot), &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_wait"), "{e}");
    let e = render(&AppDef::new("x".repeat(60), vec![trainer()]), &o, &ctx())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not valid for SageMaker"), "{e}");
    let schema = AwsSageMakerOpts::schema();
    let e = schema
        .resolve(&Cfg::new())
        .and_then(|c| AwsSageMakerOpts::from_cfg(&c))
        .unwrap_err()
        .to_string();
    assert!(e.contains("role") || e.contains("instance_type"), "{e}");
}

#[test]
fn states() {
    assert_eq!(job_state("InProgress"), AppState::Running);
    assert_eq!(job_state("Completed"), AppState::Succeeded);
    assert_eq!(job_state("Failed"), AppState::Failed);
    assert_eq!(job_state("Stopping"), AppState::Cancelled);
    assert_eq!(job_state("Stopped"), AppState::Cancelled);
    assert_eq!(job_state("Mystery"), AppState::Unknown);
}

#[test]
fn recovery_maps_to_the_timer_max_runtime_and_checkpoint_config() {
    let mut r = trainer();
    r.time_limit = Some(4 * 3600);
    let app = AppDef::new("rec", vec![r.clone()]);
    let mut o = base();
    o["checkpoint_s3_uri"] = json!("s3://bucket/ckpt");
    let job = render(&app, &opts(o.clone()), &ctx()).unwrap();
    insta::assert_snapshot!("sagemaker_recovery", job.render());
    let req = job.to_json();
    assert_eq!(
        req["StoppingCondition"]["MaxRuntimeInSeconds"],
        json!(4 * 3600 + 40),
        "{req}"
    );
    assert_eq!(
        req["Environment"]["TORCHX_CHECKPOINT_DIR"],
        "/opt/ml/checkpoints"
    );
    assert_eq!(
        req["AlgorithmSpecification"]["ContainerEntrypoint"][0],
        "sh"
    );
    // Without somewhere to sync checkpoints to, with requeues, or with two limits: refused.
    let err = render(&app, &opts(base()), &ctx()).unwrap_err();
    assert!(err.to_string().contains("checkpoint_s3_uri"), "{err}");
    let mut requeued = r.clone();
    requeued.max_requeues = Some(2);
    let err = render(
        &AppDef::new("rec", vec![requeued]),
        &opts(o.clone()),
        &ctx(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Unsupported);
    o["max_run"] = json!(60);
    let err = render(&app, &opts(o), &ctx()).unwrap_err();
    assert!(err.to_string().contains("max_run"), "{err}");
}

/// A hang timeout puts the role's command under the watch (its replica told by the host's
/// number), under the timer; with a recovery option the watch sends the checkpoint signal
/// first.
#[test]
fn a_hang_timeout_runs_the_command_under_the_watch() {
    let mut role = trainer();
    role.hang_timeout = Some(30);
    let app = AppDef::new("train", vec![role.clone()]);
    let job = render(&app, &opts(base()), &ctx()).unwrap();
    let words: Vec<String> = serde_json::from_value(
        job.request["AlgorithmSpecification"]["ContainerEntrypoint"].clone(),
    )
    .unwrap();
    let watch = words
        .iter()
        .position(|w| w == "torchx-watch")
        .expect("the watch");
    // The timer runs the watch, which runs the entrypoint; the args follow (ContainerArguments).
    assert!(
        words[..watch].iter().any(|w| w.contains("requeue_code")),
        "{words:?}"
    );
    assert_eq!(
        &words[watch + 1..],
        ["", "", "", "10", "30", "trainer/@host", "python"],
        "{words:?}"
    );
    assert_eq!(
        job.request["AlgorithmSpecification"]["ContainerArguments"][0],
        "-m"
    );
    role.time_limit = Some(3600);
    let app = AppDef::new("train", vec![role]);
    let o = json!({"checkpoint_s3_uri": "s3://bucket/ckpt"});
    let mut o2 = base();
    o2.as_object_mut()
        .unwrap()
        .extend(o.as_object().unwrap().clone());
    let job = render(&app, &opts(o2), &ctx()).unwrap();
    let words: Vec<String> = serde_json::from_value(
        job.request["AlgorithmSpecification"]["ContainerEntrypoint"].clone(),
    )
    .unwrap();
    let watch = words.iter().position(|w| w == "torchx-watch").unwrap();
    assert_eq!(words[watch + 3], "USR1", "{words:?}");
}

/// `status`'s message for a failed job: the hang the watch reported, by its failure file or,
/// failing that, its exit code, only for a watched job; else SageMaker's reason or status.
#[test]
fn a_hung_job_says_so() {
    let watched = json!([
        "sh",
        "-c",
        "...",
        "torchx-watch",
        "",
        "",
        "",
        "10",
        "4",
        "t/@host"
    ]);
    let job = |entrypoint: serde_json::Value, reason: &str| {
        json!({"AlgorithmSpecification": {"ContainerEntrypoint": entrypoint},
               "FailureReason": reason, "SecondaryStatus": "Failed"})
    };
    let cases = [
        (
            job(watched.clone(), "AlgorithmError: torchx: hung: t/1 made no progress (output or heartbeat) for 4s (rank 1 in all_reduce)"),
            AppState::Failed,
            "a replica hung: t/1 made no progress (output or heartbeat) for 4s (rank 1 in all_reduce); its stacks: `torchx log --stacks`",
        ),
        (
            job(watched.clone(), "AlgorithmError: , exit code: 124"),
            AppState::Failed,
            "a replica hung (no progress, output or heartbeat, for its hang timeout); its stacks: `torchx log --stacks` (AlgorithmError: , exit code: 124)",
        ),
        (
            job(watched, "AlgorithmError: , exit code: 3"),
            AppState::Failed,
            "AlgorithmError: , exit code: 3",
        ),
        (
            job(json!(["python"]), "AlgorithmError: , exit code: 124"),
            AppState::Failed,
            "AlgorithmError: , exit code: 124",
        ),
        (job(json!(["python"]), ""), AppState::Running, "Failed"),
    ];
    for (job, state, want) in cases {
        assert_eq!(job_message(&job, state), want, "{job}");
    }
}
