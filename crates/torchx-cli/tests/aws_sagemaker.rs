//! aws_sagemaker against the AWS emulator of `scripts/aws/up.sh` (moto in lifecycle mode: training
//! jobs go InProgress → Completed, names matching `^bad-|must-fail` fail, StopTrainingJob works).
//! What the emulator does not prove: that SageMaker accepts the request (moto validates neither
//! the role nor the image nor the instance type) or that the container really runs.

mod support;

use std::time::Duration;

use support::{aws_emulator_up, stderr, stdout, Env};
use torchx::config::TorchxConfig;
use torchx::opts::{Cfg, CfgValue};
use torchx::scheduler::Registry;
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

const CFG: &str =
    "role=arn:aws:iam::123456789012:role/sm,instance_type=ml.m5.xlarge,output_path=s3://bucket/out";

/// [`CFG`] as run options.
fn cfg() -> Cfg {
    CFG.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), CfgValue::Str(v.to_string())))
        .collect()
}

#[tokio::test]
async fn aws_sagemaker_conforms() {
    if !aws_emulator_up("aws_sagemaker conformance") {
        return;
    }
    let cfg = cfg();
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut opts = Conformance::default();
    opts.cfg = cfg;
    opts.timeout = Duration::from_secs(60);
    opts.poll = Duration::from_millis(200);
    // The emulator moves jobs through their states; it runs no command.
    opts.runs_commands = false;
    conformance(&runner, "aws_sagemaker", &opts).await;
}

#[test]
fn training_job_lifecycle_failure_cancel_and_errors() {
    if !aws_emulator_up("aws_sagemaker lifecycle") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_sagemaker",
        "-cfg",
        CFG,
        "--wait",
        "utils.echo",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().to_string();
    assert!(
        handle.starts_with("aws_sagemaker://torchx/echo-"),
        "{handle}"
    );
    assert!(stdout(&env.run(&["status", &handle])).contains("SUCCEEDED"));
    let failing = format!("{CFG},base_job_name=must-fail");
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_sagemaker",
        "-cfg",
        &failing,
        "--wait",
        "utils.echo",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("FAILED"), "{}", stderr(&out));
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_sagemaker",
        "-cfg",
        CFG,
        "utils.sh",
        "sleep",
        "600",
    ]);
    let long = stdout(&out).trim().to_string();
    assert_eq!(env.run(&["cancel", &long]).status.code(), Some(0));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !stdout(&env.run(&["status", &long])).contains("CANCELLED") {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let listed = stdout(&env.run(&["list", "-s", "aws_sagemaker"]));
    assert!(
        listed.contains(handle.rsplit('/').next().unwrap()),
        "{listed}"
    );
    // Unknown job: not found; two roles: a clear Unsupported error and nothing submitted.
    assert_ne!(
        env.run(&["status", "aws_sagemaker://torchx/never-was-0"])
            .status
            .code(),
        Some(0)
    );
    std::fs::write(
        env.cwd.join("two.yaml"),
        "name: two\nroles:\n- name: a\n  image: i\n  entrypoint: x\n- name: b\n  image: i\n  entrypoint: y\n",
    )
    .unwrap();
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_sagemaker",
        "-cfg",
        CFG,
        "./two.yaml",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("2 roles"), "{}", stderr(&out));
    assert!(!stdout(&env.run(&["list", "-s", "aws_sagemaker"])).contains("two-"));
}

/// A workspace on aws_sagemaker: built on top of the role's image and pushed to `image_repo` in
/// a real registry (open and authenticated); the training job the emulator accepted runs it
/// (the dry run's request, which is the body sent, names the pushed image).
#[test]
#[cfg(feature = "docker")] // the image is built on the local Docker engine
fn workspace_image_is_pushed_and_run_by_the_training_job() {
    if !aws_emulator_up("aws_sagemaker workspace image") {
        return;
    }
    let Some(reg) = support::registries_up("aws_sagemaker workspace image") else {
        return;
    };
    let env = Env::new();
    let app = ["utils.sh", "--image", "busybox:local", "cat", "data.txt"];
    let runs = support::workspace_push_roundtrip(&env, &reg, "aws_sagemaker", CFG, &[], &app);
    for (handle, _) in [&runs.open, &runs.auth] {
        let out = env.run(&["status", handle]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let image = &runs.open.1;
    let cfg = format!("{CFG},image_repo={}", image.rsplit_once(':').unwrap().0);
    let ws = env.cwd.join("proj");
    let mut args = vec![
        "run",
        "--dryrun",
        "--json",
        "-s",
        "aws_sagemaker",
        "-cfg",
        &cfg,
    ];
    args.extend(["--workspace", ws.to_str().unwrap()]);
    args.extend(app);
    let out = env.run(&args);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        v["request"].to_string().contains(&format!("\"{image}\"")),
        "{v}"
    );
}

/// `describe_native` reads the training job back as SageMaker describes it: the request's
/// fields as sent, beside SageMaker's status; `None` for an unknown job.
#[tokio::test]
async fn describe_native_reads_the_training_job_back() {
    if !aws_emulator_up("aws_sagemaker describe_native") {
        return;
    }
    let cfg = cfg();
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut role = torchx::specs::Role::new("trainer", "busybox:local");
    role.entrypoint = "echo".into();
    role.args = vec!["read back".into()];
    role.resource = torchx::specs::Resource::new(1, 0, 512);
    let app = torchx::specs::AppDef::new("native", vec![role]);
    let args = torchx::runner::RunArgs::default();
    let info = runner
        .dryrun(app, "aws_sagemaker", &cfg, &args)
        .await
        .unwrap();
    let sent = info.request.to_json();
    let handle = runner.schedule(&info).await.unwrap();
    let native = runner
        .describe_native(&handle)
        .await
        .unwrap()
        .expect("read back");
    // What was sent comes back as sent (SageMaker adds its defaults beside it).
    for key in [
        "TrainingJobName",
        "RoleArn",
        "AlgorithmSpecification",
        "ResourceConfig",
    ] {
        match &sent[key] {
            serde_json::Value::Object(fields) => {
                for (field, value) in fields {
                    assert_eq!(&native[key][field], value, "{key}.{field}: {native}");
                }
            }
            value => assert_eq!(&native[key], value, "{key}: {native}"),
        }
    }
    assert!(native["TrainingJobStatus"].is_string(), "{native}");
    let unknown = handle.replace("native", "no-such-job-anywhere");
    assert_eq!(runner.describe_native(&unknown).await.unwrap(), None);
    runner.cancel(&handle).await.unwrap();
}
