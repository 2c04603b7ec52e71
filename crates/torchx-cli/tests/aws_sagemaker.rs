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
    let mut cfg = cfg();
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut opts = Conformance::default();
    // In Docker mode the emulator runs the jobs it is asked to (their logs in CloudWatch);
    // else it moves them through their states and runs no command.
    opts.runs_commands = support::aws_emulator_runs_containers("aws_sagemaker conformance");
    // Lifecycle mode: the suite's `ok` app echoes `conformance-ok`, its `tail` app two lines
    // around a sleep; write them where SageMaker would, for every such job that runs.
    let feeder = (!opts.runs_commands).then(|| {
        tokio::spawn(async {
            let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
            let conf = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let logs = aws_sdk_cloudwatchlogs::Client::new(&conf);
            let group = "/aws/sagemaker/TrainingJobs";
            let _ = logs.create_log_group().log_group_name(group).send().await;
            let mut fed = std::collections::BTreeSet::new();
            loop {
                for app in runner.list("aws_sagemaker").await.unwrap_or_default() {
                    let lines: &[&str] = if app.app_id.starts_with("ok-") {
                        &["conformance-ok"]
                    } else if app.app_id.starts_with("tail-") {
                        &["tail-first", "tail-last"]
                    } else {
                        continue;
                    };
                    if app.state != torchx::specs::AppState::Running
                        || !fed.insert(app.app_id.clone())
                    {
                        continue;
                    }
                    let stream = format!("{}/algo-1-1700000000", app.app_id);
                    let _ = logs
                        .create_log_stream()
                        .log_group_name(group)
                        .log_stream_name(&stream)
                        .send()
                        .await;
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis() as i64;
                    let events = lines.iter().map(|l| {
                        aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
                            .timestamp(now)
                            .message(*l)
                            .build()
                            .unwrap()
                    });
                    logs.put_log_events()
                        .log_group_name(group)
                        .log_stream_name(&stream)
                        .set_log_events(Some(events.collect()))
                        .send()
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
    if opts.runs_commands {
        let tags = [("aws-emulator".to_string(), "docker".to_string())];
        cfg.insert("tags".into(), CfgValue::Dict(tags.into_iter().collect()));
        opts.image = "busybox:local".into();
    }
    opts.cfg = cfg;
    opts.timeout = Duration::from_secs(60);
    opts.poll = Duration::from_millis(200);
    // SageMaker retries only its own internal errors, never an exit code.
    opts.check_retries = false;
    conformance(&runner, "aws_sagemaker", &opts).await;
    if let Some(feeder) = feeder {
        feeder.abort();
    }
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

/// The hang watch in a training job's containers (the emulator's Docker mode runs a job tagged
/// `aws-emulator: docker` as SageMaker runs a training image: a container per host `algo-N`
/// with `/opt/ml`, logs in CloudWatch `/aws/sagemaker/TrainingJobs`, FailureReason from
/// `/opt/ml/output/failure`): on two hosts, the first prints and ends, the second is quiet and
/// hung; `status` says which replica hung, `log --stacks` shows its stacks from its
/// CloudWatch stream, `log` the other host's lines. What the emulator does not prove: that
/// SageMaker itself reports the failure file as this FailureReason.
#[test]
fn a_quiet_host_is_hung_and_one_that_prints_is_not() {
    if !aws_emulator_up("aws_sagemaker hang watch")
        || !support::aws_emulator_runs_containers("aws_sagemaker hang watch")
    {
        return;
    }
    let env = Env::new();
    // `sh -c script` under a 4 s hang timeout, waited for, on `instances` hosts that run it.
    let run = |instances: u32, script: &str| {
        let cfg = format!("{CFG},instance_count={instances},tags=aws-emulator:docker");
        env.run(&[
            "run",
            "--workspace",
            "",
            "-s",
            "aws_sagemaker",
            "-cfg",
            &cfg,
            "--hang_timeout",
            "4s",
            "--wait",
            "utils.sh",
            "--image",
            "busybox:local",
            "sh",
            "-c",
            script,
        ])
    };
    let out = run(
        2,
        "if [ \"$(hostname)\" = algo-2 ]; then echo started; sleep 300; fi; \
         for i in 1 2 3 4; do echo line $i; sleep 2; done",
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap_or_default().to_string();
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    let msg = status["msg"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("a replica hung: sh/1 made no progress (output or heartbeat) for 4s"),
        "{status}"
    );
    let stacks = stdout(&env.run(&["log", "--stacks", &handle]));
    assert!(
        stacks.starts_with("--- sh/1 attempt 0 ---\n=== sh/1 pid "),
        "{stacks}"
    );
    assert!(stacks.contains("sleep 300"), "{stacks}");
    let first = stdout(&env.run(&["log", &format!("{handle}/sh/0")]));
    assert_eq!(
        first, "sh/0 line 1\nsh/0 line 2\nsh/0 line 3\nsh/0 line 4\n",
        "{first}"
    );
    // A job that prints runs to its end under the watch.
    let out = run(1, "for i in 1 2 3 4; do echo $i; sleep 2; done");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
