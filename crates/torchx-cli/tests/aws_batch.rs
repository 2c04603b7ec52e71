//! aws_batch against the AWS emulator that `scripts/aws/up.sh` starts (moto with the patches of
//! `scripts/aws/moto_ext.py`, real HTTP, SigV4-signed SDK calls; `.ci/run` starts it and exports
//! AWS_ENDPOINT_URL). Without the emulator every test says loudly that it was skipped.
//!
//! The emulator runs Batch in one of two modes, and every test says which it saw
//! (`support::aws_emulator_runs_containers`; CI, which has a Docker engine, must have the first):
//! - docker: jobs really run, as containers on the local engine (`scripts/aws/batch_docker.py`):
//!   node environment, per-node CloudWatch streams written while they run, the container's exit
//!   code, retryStrategy with evaluateOnExit, attempt timeouts, TerminateJob.
//! - lifecycle: nothing runs; jobs move SUBMITTED → … → RUNNING → SUCCEEDED, names `bad-*`
//!   end FAILED, and the tests put log events where Batch would.
//!
//! Emulator gaps (documented in README.md): `endTime` is inclusive; in lifecycle mode nothing runs.

mod support;

use std::time::Duration;

use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use support::{aws_emulator_runs_containers, aws_emulator_up as emulator_up, stderr, stdout, Env};
use torchx::config::TorchxConfig;
use torchx::opts::{Cfg, CfgValue};
use torchx::scheduler::Registry;
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

const QUEUE: &str = "torchx";

async fn clients() -> (aws_sdk_batch::Client, aws_sdk_cloudwatchlogs::Client) {
    let conf = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    (
        aws_sdk_batch::Client::new(&conf),
        aws_sdk_cloudwatchlogs::Client::new(&conf),
    )
}

/// The job id behind a handle `aws_batch://session/queue:name`.
async fn job_id(batch: &aws_sdk_batch::Client, handle: &str) -> String {
    let name = handle.rsplit(':').next().unwrap();
    let jobs = batch
        .list_jobs()
        .job_queue(QUEUE)
        .filters(
            aws_sdk_batch::types::KeyValuesPair::builder()
                .name("JOB_NAME")
                .values(name)
                .build(),
        )
        .send()
        .await
        .unwrap();
    jobs.job_summary_list()[0].job_id().unwrap().to_string()
}

/// Writes `lines` into node `node`'s CloudWatch stream, as Batch's awslogs driver would.
async fn put_logs(handle: &str, node: u32, lines: &[&str]) {
    let (batch, logs) = clients().await;
    let id = job_id(&batch, handle).await;
    let node_job = batch
        .describe_jobs()
        .jobs(format!("{id}#{node}"))
        .send()
        .await
        .unwrap();
    let stream = node_job.jobs()[0]
        .container()
        .and_then(|c| c.log_stream_name())
        .unwrap()
        .to_string();
    let _ = logs
        .create_log_group()
        .log_group_name("/aws/batch/job")
        .send()
        .await;
    let _ = logs
        .create_log_stream()
        .log_group_name("/aws/batch/job")
        .log_stream_name(&stream)
        .send()
        .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let events: Vec<InputLogEvent> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            InputLogEvent::builder()
                .timestamp(now + i as i64)
                .message(*l)
                .build()
                .unwrap()
        })
        .collect();
    logs.put_log_events()
        .log_group_name("/aws/batch/job")
        .log_stream_name(&stream)
        .set_log_events(Some(events))
        .send()
        .await
        .unwrap();
}

fn cfg() -> Cfg {
    Cfg::from([("queue".to_string(), CfgValue::Str(QUEUE.into()))])
}

#[tokio::test]
async fn aws_batch_conforms() {
    if !emulator_up("aws_batch conformance") {
        return;
    }
    let containers = aws_emulator_runs_containers("aws_batch conformance");
    let mounted = tempfile::tempdir().unwrap();
    // Lifecycle mode runs no command: the suite's `ok` app echoes `conformance-ok`, its `tail`
    // app two lines around a sleep; write them where Batch would, for every such job that
    // starts, while the suite runs.
    let feeder = (!containers).then(|| {
        tokio::spawn(async {
            let (batch, _) = clients().await;
            let mut fed = std::collections::BTreeSet::new();
            loop {
                let jobs = batch
                    .list_jobs()
                    .job_queue(QUEUE)
                    .job_status(aws_sdk_batch::types::JobStatus::Running)
                    .send()
                    .await
                    .unwrap();
                for j in jobs.job_summary_list() {
                    let name = j.job_name().unwrap_or_default().to_string();
                    let lines: &[&str] = if name.starts_with("ok-") {
                        &["conformance-ok"]
                    } else if name.starts_with("tail-") {
                        &["tail-first", "tail-last"]
                    } else {
                        continue;
                    };
                    if fed.insert(name.clone()) {
                        put_logs(&format!("aws_batch://torchx/{QUEUE}:{name}"), 0, lines).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut opts = Conformance::new("busybox:local");
    opts.cfg = cfg();
    opts.timeout = Duration::from_secs(60);
    opts.poll = Duration::from_millis(200);
    opts.resource = Some(torchx::specs::Resource::new(1, 0, 512));
    opts.runs_commands = containers;
    opts.mount_dir = containers.then(|| mounted.path().to_path_buf());
    conformance(&runner, "aws_batch", &opts).await;
    if let Some(feeder) = feeder {
        feeder.abort();
    }
}

/// Two roles (2 + 1 nodes) through the lifecycle, per-node states, list, and the CLI's exit
/// codes for success and failure.
#[test]
fn multi_role_lifecycle_per_node_states_and_failure() {
    if !emulator_up("aws_batch lifecycle") {
        return;
    }
    aws_emulator_runs_containers("aws_batch lifecycle");
    let env = Env::new();
    // Commands that succeed when they run (docker mode) and long enough to be seen RUNNING.
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: pair\nroles:\n- name: trainer\n  image: busybox:local\n  entrypoint: sh\n  \
         args: [-c, 'sleep 2; echo rank ${replica_id}']\n  num_replicas: 2\n  \
         resource: {cpu: 2, gpu: 0, memMB: 2048}\n- name: reader\n  image: busybox:local\n  \
         entrypoint: sh\n  args: [-c, 'sleep 2']\n  resource: {cpu: 1, gpu: 0, memMB: 1024}\n",
    )
    .unwrap();
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "./app.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(
        handle.starts_with("aws_batch://torchx/torchx:pair-"),
        "{handle}"
    );
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = env.run(&["status", "--json", &handle]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let state = v["state"].as_str().unwrap().to_string();
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        if state == "SUCCEEDED" {
            let replicas: Vec<(String, String)> = v["roles"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r["replicas"].as_array().unwrap().clone())
                .map(|r| {
                    (
                        r["role"].as_str().unwrap().to_string(),
                        r["state"].to_string(),
                    )
                })
                .collect();
            assert_eq!(replicas.len(), 3, "{v}");
            // Replica states are TorchX's numbers (4 = SUCCEEDED).
            assert!(replicas.iter().all(|(_, s)| s == "4"), "{v}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "stuck: {seen:?}");
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(seen.contains(&"RUNNING".to_string()), "{seen:?}");
    assert!(
        seen.first()
            .is_some_and(|s| s == "PENDING" || s == "RUNNING"),
        "{seen:?}"
    );
    // `bad-*` jobs fail in lifecycle mode, `false` fails in docker mode: run --wait exits
    // non-zero and says so.
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "--wait",
        "utils.echo",
        "--image",
        "busybox:local",
        "--msg",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::write(env.cwd.join("bad.yaml"), "name: bad-app\nroles:\n- name: b\n  image: busybox:local\n  entrypoint: 'false'\n  resource: {cpu: 1, gpu: 0, memMB: 512}\n").unwrap();
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "--wait",
        "./bad.yaml",
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stderr(&out).contains("FAILED"), "{}", stderr(&out));
    let out = env.run(&["list", "-s", "aws_batch", "--json"]);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(listed
        .iter()
        .any(|a| a["app_handle"] == handle.as_str() && a["state"] == "SUCCEEDED"));
    assert!(listed
        .iter()
        .any(|a| a["name"] == "bad-app" && a["state"] == "FAILED"));
}

/// Logs read back from CloudWatch: whole, by regex, since/until, and followed (`--tail`) until
/// the job ends; cancel → CANCELLED; delete deregisters the job definition.
#[test]
fn logs_cancel_and_delete() {
    if !emulator_up("aws_batch logs") {
        return;
    }
    let containers = aws_emulator_runs_containers("aws_batch logs");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "utils.sh",
        "--image",
        "busybox:local",
        "sh",
        "-c",
        "sleep 1; echo first line; echo ERROR second; sleep 1; echo third",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    // Follow the log from the start; lines written while it runs arrive, then it ends.
    let follower = env
        .cmd(&["log", "--tail", &handle])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until RUNNING (the node's log stream name exists then).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !stdout(&env.run(&["status", &handle])).contains("RUNNING") {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    if !containers {
        rt.block_on(put_logs(
            &handle,
            0,
            &["first line", "ERROR second", "third"],
        ));
    }
    let out = follower.wait_with_output().unwrap();
    let followed = stdout(&out);
    assert!(
        followed.contains("first line") && followed.contains("third"),
        "{followed}"
    );
    let out = env.run(&["log", "--regex", "ERROR", &handle]);
    let text = stdout(&out);
    assert!(
        text.contains("ERROR second") && !text.contains("first line"),
        "{text}"
    );
    let out = env.run(&[
        "log",
        "--since",
        "2000-01-01T00:00:00",
        "--until",
        "2001-01-01T00:00:00",
        &handle,
    ]);
    assert!(!stdout(&out).contains("first line"), "{}", stdout(&out));
    // Cancel a running job.
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "utils.sh",
        "--image",
        "busybox:local",
        "sleep",
        "600",
    ]);
    let long = stdout(&out).trim().to_string();
    let out = env.run(&["cancel", &long]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = stdout(&env.run(&["status", &long]));
        if s.contains("CANCELLED") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Delete deregisters the job definition.
    let out = env.run(&["delete", &long]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let name = long.rsplit(':').next().unwrap().to_string();
    let status = rt.block_on(async {
        let (batch, _) = clients().await;
        let defs = batch
            .describe_job_definitions()
            .job_definition_name(&name)
            .send()
            .await
            .unwrap();
        defs.job_definitions()[0].status().map(str::to_string)
    });
    assert_eq!(status.as_deref(), Some("INACTIVE"));
    // Unknown apps are not found.
    let out = env.run(&["status", "aws_batch://torchx/torchx:never-was-0"]);
    assert_ne!(out.status.code(), Some(0));
}

/// Docker mode: the job's containers really run with Batch's node environment, every node's
/// output comes back from its own CloudWatch stream, and the main node's exit code decides the
/// job and its retries (`retryStrategy.attempts`, TorchX's `max(max_retries, 1)`).
#[test]
fn commands_run_with_node_env_exit_codes_and_retries() {
    if !emulator_up("aws_batch commands") || !aws_emulator_runs_containers("aws_batch commands") {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.cwd.join("nodes.yaml"),
        "name: nodes\nroles:\n- name: trainer\n  image: busybox:local\n  entrypoint: sh\n  \
         args: [-c, 'echo node=$AWS_BATCH_JOB_NODE_INDEX/$AWS_BATCH_JOB_NUM_NODES \
         attempt=$AWS_BATCH_JOB_ATTEMPT main=${AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS:-self}; \
         sleep 1; exit 3']\n  num_replicas: 2\n  max_retries: 2\n  \
         resource: {cpu: 1, gpu: 0, memMB: 512}\n",
    )
    .unwrap();
    let out = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "--wait",
        "./nodes.yaml",
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    let handle = stdout(&out).lines().next().unwrap().trim().to_string();
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(status["num_restarts"], 1, "{status}");
    // The last attempt's output, node by node.
    let out = env.run(&["log", &handle]);
    let text = stdout(&out);
    assert!(
        text.contains("trainer/0 node=0/2 attempt=2 main=self"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("trainer/1 node=1/2 attempt=2 main=") && !l.ends_with("=self")),
        "{text}"
    );
    // Both attempts ended with the container's own exit code.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let codes = rt.block_on(async {
        let (batch, _) = clients().await;
        let id = job_id(&batch, &handle).await;
        let job = batch.describe_jobs().jobs(id).send().await.unwrap();
        job.jobs()[0]
            .attempts()
            .iter()
            .map(|a| a.container().and_then(|c| c.exit_code()))
            .collect::<Vec<_>>()
    });
    assert_eq!(codes, [Some(3), Some(3)]);
}

/// The hang watch in Batch's containers (the emulator's Docker mode runs them): a quiet node is
/// hung, its stacks are in its log (`log --stacks`), it exits with the watch's code and the job
/// is FAILED with the attempt `hung`; a node that prints runs to its end.
#[test]
fn a_quiet_node_is_hung_and_one_that_prints_is_not() {
    if !emulator_up("aws_batch hang watch") || !aws_emulator_runs_containers("aws_batch hang watch")
    {
        return;
    }
    let env = Env::new();
    let run = |name: &str, script: &str| {
        let yaml = serde_json::json!({"name": name, "roles": [{"name": "trainer",
            "image": "busybox:local", "entrypoint": "sh", "args": ["-c", script],
            "resource": {"cpu": 1, "gpu": 0, "memMB": 512}}]});
        std::fs::write(env.cwd.join(format!("{name}.yaml")), yaml.to_string()).unwrap();
        let out = env.run(&[
            "run",
            "--workspace",
            "",
            "-s",
            "aws_batch",
            "-cfg",
            "queue=torchx",
            "--hang_timeout",
            "4s",
            "--wait",
            &format!("./{name}.yaml"),
        ]);
        let handle = stdout(&out)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        (out, handle)
    };
    let (out, quiet) = run("quiet", "echo started; sleep 300");
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = env.status(&quiet);
    assert_eq!(status["state"], "FAILED", "{status}");
    let attempts = &status["roles"][0]["replicas"][0]["attempts"];
    assert_eq!(attempts[0]["reason"], "hung", "{status}");
    assert_eq!(attempts[0]["exit_code"], 124, "{status}");
    assert!(
        status["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("hung: no progress (output or heartbeat) for 4s"),
        "{status}"
    );
    let stacks = stdout(&env.run(&["log", "--stacks", &quiet]));
    assert!(
        stacks.starts_with("--- trainer/0 attempt 0 ---\n=== trainer/0 pid "),
        "{stacks}"
    );
    assert!(stacks.contains("sleep 300"), "{stacks}");
    let (out, _) = run("prints", "for i in 1 2 3 4; do echo $i; sleep 2; done");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The recovery contract on Batch, run by the emulator's Docker mode: the registered
/// `retryStrategy.evaluateOnExit` comes back as sent; the requeue code retries, other failures
/// end the job when `max_retries` is 0, and the container's own timer sends the checkpoint
/// signal before the limit; `status --json` shows each attempt and why it ended.
#[test]
fn recovery_evaluate_on_exit_round_trips_and_decides_retries() {
    if !emulator_up("aws_batch recovery") || !aws_emulator_runs_containers("aws_batch recovery") {
        return;
    }
    let env = Env::new();
    // TORCHX_CHECKPOINT_DIR on a bind mount (a host volume of the job definition).
    let ckpt = env.cwd.join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let mount = format!("type=bind,src={},dst=/ckpt", ckpt.display());
    let run = |extra: &[&str], script: &str| -> String {
        let mut args = vec![
            "run",
            "--workspace",
            "",
            "-s",
            "aws_batch",
            "-cfg",
            "queue=torchx",
            "--max_retries",
            "0",
            "--checkpoint_dir",
            "/ckpt",
        ];
        args.extend_from_slice(extra);
        args.extend(["utils.sh", "--image", "busybox:local", "--mounts", &mount]);
        args.extend(["sh", "-c", script]);
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let asks_twice = run(
        &["--max_requeues", "3"],
        "echo $TORCHX_ATTEMPT >> $TORCHX_CHECKPOINT_DIR/seen; [ \"$TORCHX_ATTEMPT\" -ge 2 ] || exit 75",
    );
    let fails = run(&["--max_requeues", "3"], "exit 3");
    let signalled = run(
        &["--time_limit", "60s", "--checkpoint_signal", "USR1@56"],
        "trap 'echo saved; exit 75' USR1; [ \"$TORCHX_ATTEMPT\" -ge 1 ] && { echo resumed; exit 0; }; \
         while :; do sleep 1; done",
    );
    let reasons = |handle: &str, want: &str| -> Vec<String> {
        let status = env.wait_state(handle, want, Duration::from_secs(120));
        status["roles"][0]["replicas"][0]["attempts"]
            .as_array()
            .unwrap_or_else(|| panic!("no attempts: {status}"))
            .iter()
            .map(|a| a["reason"].as_str().unwrap_or("running").to_string())
            .collect()
    };
    assert_eq!(
        reasons(&asks_twice, "SUCCEEDED"),
        ["requeued", "requeued", "succeeded"]
    );
    assert_eq!(reasons(&fails, "FAILED"), ["failed"]);
    assert_eq!(reasons(&signalled, "SUCCEEDED"), ["requeued", "succeeded"]);
    // `log` follows the node across its attempts' streams.
    let log = stdout(&env.run(&["log", &signalled]));
    assert!(log.contains("saved") && log.contains("resumed"), "{log}");
    // Every attempt saw the same checkpoint directory, and its own attempt number.
    let seen = std::fs::read_to_string(ckpt.join("seen")).unwrap();
    assert_eq!(seen, "0\n1\n2\n");
    // What was registered is what the dry run shows.
    let dry = env.run(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=torchx",
        "--dryrun",
        "--json",
        "--max_retries",
        "0",
        "--max_requeues",
        "3",
        "--checkpoint_dir",
        "/ckpt",
        "utils.sh",
        "--image",
        "busybox:local",
        "--mounts",
        &mount,
        "true",
    ]);
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    let dry: serde_json::Value = serde_json::from_str(&stdout(&dry)).unwrap();
    let shown = &dry["request"]["jobDef"]["retryStrategy"];
    let name = fails.rsplit(':').next().unwrap().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registered = rt.block_on(async {
        let (batch, _) = clients().await;
        let defs = batch
            .describe_job_definitions()
            .job_definition_name(&name)
            .send()
            .await
            .unwrap();
        let retry = defs.job_definitions()[0].retry_strategy().unwrap().clone();
        let rules: Vec<serde_json::Value> = retry
            .evaluate_on_exit()
            .iter()
            .map(|e| {
                let mut rule = serde_json::Map::new();
                if let Some(c) = e.on_exit_code() {
                    rule.insert("onExitCode".into(), c.into());
                }
                if let Some(r) = e.on_status_reason() {
                    rule.insert("onStatusReason".into(), r.into());
                }
                // Batch's actions are case-insensitive (TorchX sends EXIT; the SDK says exit).
                let action = e.action().unwrap().as_str().to_uppercase();
                rule.insert("action".into(), action.into());
                serde_json::Value::Object(rule)
            })
            .collect();
        serde_json::json!({"attempts": retry.attempts(), "evaluateOnExit": rules})
    });
    assert_eq!(&registered, shown);
}

/// A workspace on aws_batch: built on top of the role's image, pushed to `image_repo` in a real
/// registry (open and authenticated), and the job definition registered with the emulator runs
/// the pushed image.
#[test]
#[cfg(feature = "docker")] // the image is built on the local Docker engine
fn workspace_image_is_pushed_and_run_by_the_job_definition() {
    if !emulator_up("aws_batch workspace image") {
        return;
    }
    let Some(reg) = support::registries_up("aws_batch workspace image") else {
        return;
    };
    let env = Env::new();
    let runs = support::workspace_push_roundtrip(
        &env,
        &reg,
        "aws_batch",
        "queue=torchx",
        &[],
        &["utils.sh", "--image", "busybox:local", "cat", "data.txt"],
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (handle, image) in [runs.open, runs.auth] {
        let name = handle.rsplit(':').next().unwrap().to_string();
        let registered = rt.block_on(async {
            let (batch, _) = clients().await;
            let defs = batch
                .describe_job_definitions()
                .job_definition_name(&name)
                .send()
                .await
                .unwrap();
            let def = &defs.job_definitions()[0];
            let nodes = def.node_properties().unwrap().node_range_properties();
            nodes[0].container().unwrap().image().unwrap().to_string()
        });
        assert_eq!(registered, image, "{handle}");
    }
}

/// A stand-in Batch endpoint that records every request body (REST-JSON: `POST /v1/<op>`) and
/// answers RegisterJobDefinition and SubmitJob as Batch does (everything else: `{}`).
/// Requests a stand-in endpoint received: (path, JSON body).
type Recorded = std::sync::Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>>;

fn recording_batch_endpoint() -> (std::net::SocketAddr, Recorded) {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let seen: Recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = std::sync::Arc::clone(&seen);
    let addr = support::serve_http(move |req: hyper::Request<hyper::body::Incoming>| {
        let recorded = std::sync::Arc::clone(&recorded);
        async move {
            let path = req.uri().path().to_string();
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => Bytes::new(),
            };
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let answer = match path.as_str() {
                "/v1/registerjobdefinition" => serde_json::json!({
                    "jobDefinitionName": body["jobDefinitionName"],
                    "jobDefinitionArn": "arn:aws:batch:us-east-1:123456789012:job-definition/x:1",
                    "revision": 1
                }),
                "/v1/submitjob" => serde_json::json!({
                    "jobName": body["jobName"],
                    "jobId": "00000000-0000-0000-0000-000000000000",
                    "jobArn": "arn:aws:batch:us-east-1:123456789012:job/0"
                }),
                _ => serde_json::json!({}),
            };
            recorded.lock().unwrap().push((path, body));
            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(
                answer.to_string(),
            ))))
        }
    });
    (addr, seen)
}

/// What `--dryrun` shows is what is sent: the job definition the AWS SDK serialises (from
/// builders filled by hand from our request) equals the dry run's, field for field, for an app
/// with two roles, env, mounts, devices, retries and a share id. Hermetic: no emulator.
#[test]
fn the_dry_run_is_what_is_sent() {
    let (addr, seen) = recording_batch_endpoint();
    let env = Env::new();
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: sent\nroles:\n- name: trainer\n  image: img:1\n  entrypoint: python\n  \
         args: [train.py, --rank, '${replica_id}']\n  num_replicas: 2\n  max_retries: 3\n  \
         resource: {cpu: 2, gpu: 1, memMB: 2048, devices: {vpc.amazonaws.com/efa: 1}}\n  \
         env: {B: x, A: $(B)/y}\n  mounts:\n  - {type: bind, src_path: /data, dst_path: /data, read_only: true}\n  \
         - {type: volume, src: fs-123, dst_path: /efs}\n  - {type: device, src_path: /dev/fuse, dst_path: /dev/fuse}\n\
         - name: reader\n  image: img:2\n  entrypoint: reader\n  resource: {cpu: 1, gpu: 0, memMB: 1024}\n",
    )
    .unwrap();
    let torchx = |args: &[&str]| {
        env.cmd(args)
            .env("AWS_ENDPOINT_URL", format!("http://{addr}"))
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("TORCHX_INTERNAL_SESSION_ID", "fixedsession")
            .output()
            .unwrap()
    };
    let cfg = "queue=q,share_id=team,priority=7,privileged=True";
    let base = ["run", "--workspace", "", "-s", "aws_batch", "-cfg", cfg];
    let mut dry = base.to_vec();
    dry.extend(["--dryrun", "--json", "./app.yaml"]);
    let out = torchx(&dry);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dry: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut run = base.to_vec();
    run.push("./app.yaml");
    let out = torchx(&run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let name = stdout(&out).trim().rsplit(':').next().unwrap().to_string();
    // Only the generated app id differs between the two.
    let shown = dry["request"]["jobDef"].to_string();
    let dry_name = dry["request"]["name"].as_str().unwrap();
    let shown: serde_json::Value = serde_json::from_str(&shown.replace(dry_name, &name)).unwrap();
    let seen = seen.lock().unwrap();
    let sent = &seen
        .iter()
        .find(|(path, _)| path == "/v1/registerjobdefinition")
        .unwrap_or_else(|| panic!("no RegisterJobDefinition in {seen:?}"))
        .1;
    assert_eq!(sent, &shown);
    let submitted = &seen.iter().find(|(p, _)| p == "/v1/submitjob").unwrap().1;
    assert_eq!(submitted["jobDefinition"], sent["jobDefinitionName"]);
    assert_eq!(submitted["shareIdentifier"], "team");
}

/// A group as one Batch array job, run by the emulator's Docker mode: its children run the
/// tasks by `AWS_BATCH_JOB_ARRAY_INDEX`, each with its own command and variables; status, logs
/// and cancel work per task and for the group; a capped group goes one job per task.
#[test]
fn an_array_is_one_array_job_whose_children_run_the_tasks() {
    if !emulator_up("aws_batch array") || !aws_emulator_runs_containers("aws_batch array") {
        return;
    }
    let env = Env::new();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--workspace",
            "",
            "-s",
            "aws_batch",
            "-cfg",
            "queue=torchx",
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let out = run(&[
        "--wait",
        "--sweep",
        "x=a,b,c",
        "utils.sh",
        "--image",
        "busybox:local",
        "sh",
        "-c",
        "echo x=${sweep.x} index=$TORCHX_ARRAY_INDEX child=$AWS_BATCH_JOB_ARRAY_INDEX; \
         [ ${sweep.x} != b ]",
    ]);
    assert_eq!(out.status.code(), Some(1), "b fails: {}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    let array = status["native_array"]
        .as_str()
        .expect("one array job")
        .to_string();
    assert_eq!(status["counts"]["SUCCEEDED"], 2, "{status}");
    assert_eq!(status["counts"]["FAILED"], 1, "{status}");
    let tasks = status["tasks"].as_array().unwrap();
    for (i, t) in tasks.iter().enumerate() {
        assert_eq!(t["handle"], format!("{array}:{i}"), "{t}");
        let log = stdout(&env.run(&["log", t["handle"].as_str().unwrap()]));
        let x = t["params"]["x"].as_str().unwrap();
        assert_eq!(log.trim(), format!("sh/0 x={x} index={i} child={i}"), "{t}");
    }
    let listed = stdout(&env.run(&["list", "-s", "aws_batch", "--json"]));
    assert!(listed.contains(&handle), "the group is one row: {listed}");
    assert!(
        !listed.contains(&format!("{}:0", array.rsplit('/').next().unwrap())),
        "{listed}"
    );
    // Cancelling the group ends every child.
    let out = run(&[
        "--array",
        "2",
        "utils.sh",
        "--image",
        "busybox:local",
        "sleep",
        "60",
    ]);
    let handle = stdout(&out).trim().to_string();
    assert_eq!(env.run(&["cancel", &handle]).status.code(), Some(0));
    let status = env.wait_state_terminal(&handle, Duration::from_secs(60));
    assert_eq!(
        status["counts"]["FAILED"].as_i64().unwrap_or(0)
            + status["counts"]["CANCELLED"].as_i64().unwrap_or(0),
        2,
        "{status}"
    );
    // Batch arrays have no cap: %K goes one job per task, said in the dry run.
    let out = run(&["--dryrun", "--array", "0-3%2", "utils.sh", "true"]);
    assert!(
        stdout(&out).contains("cannot cap how many children run at once"),
        "{}",
        stdout(&out)
    );
}

/// `--after` on Batch is Batch's own `dependsOn` (shown by the dry run as the dependency's
/// `<queue>:<name>`, sent as its job id): the emulator starts the dependent only after its
/// dependency succeeded; a condition dependsOn cannot express (`:any`) is held by the
/// detached process instead.
#[test]
fn after_is_batchs_own_depends_on() {
    if !emulator_up("aws_batch --after") || !aws_emulator_runs_containers("aws_batch --after") {
        return;
    }
    let env = Env::new();
    let run = |args: &[&str]| {
        let mut full = vec![
            "run",
            "--workspace",
            "",
            "-s",
            "aws_batch",
            "-cfg",
            "queue=torchx",
        ];
        full.extend_from_slice(args);
        env.run(&full)
    };
    let image = ["--image", "busybox:local"];
    let first = run(&[
        &["utils.sh"][..],
        &image,
        &["sh", "-c", "sleep 2; date +%s"],
    ]
    .concat());
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let first = stdout(&first).trim().to_string();
    let dry = run(&["--dryrun", "--json", "--after", &first, "utils.echo"]);
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    let request: serde_json::Value = serde_json::from_str(&stdout(&dry)).unwrap();
    let app_id = first.rsplit('/').next().unwrap();
    assert_eq!(request["request"]["dependsOn"], serde_json::json!([app_id]));
    let second = run(&[
        &["--after", &first, "utils.sh"][..],
        &image,
        &["sh", "-c", "date +%s"],
    ]
    .concat());
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let second = stdout(&second).trim().to_string();
    let done = env.wait_state_terminal(&second, Duration::from_secs(180));
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    assert_eq!(env.status(&first)["state"], "SUCCEEDED");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (first_id, depends) = rt.block_on(async {
        let (batch, _) = clients().await;
        let first_id = job_id(&batch, &first).await;
        let id = job_id(&batch, &second).await;
        let job = batch.describe_jobs().jobs(id).send().await.unwrap();
        let depends: Vec<String> = job.jobs()[0]
            .depends_on()
            .iter()
            .filter_map(|d| d.job_id().map(String::from))
            .collect();
        (first_id, depends)
    });
    assert_eq!(depends, [first_id], "sent as the dependency's job id");
    // `:any` is beyond dependsOn: the detached process holds it, then submits it to Batch.
    let held = run(&["--after", &format!("{first}:any"), "utils.echo"]);
    assert_eq!(held.status.code(), Some(0), "{}", stderr(&held));
    assert!(
        stderr(&held).contains("detached torchx process"),
        "{}",
        stderr(&held)
    );
    let pipeline = stdout(&held).trim().to_string();
    assert!(pipeline.starts_with("pipeline://"), "{pipeline}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = env.status(&pipeline);
        if let Some(h) = s["steps"][0]["handle"].as_str() {
            assert!(h.starts_with("aws_batch://"), "{h}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `torchx plan` asks Batch (the emulator) for the job queue: one it does not have fails the
/// plan, naming the option to change; the test queue passes.
#[test]
fn plan_checks_the_job_queue() {
    if !emulator_up("aws_batch plan") {
        return;
    }
    let env = Env::new();
    let plan = |queue: &str| {
        let out = env.run(&[
            "plan",
            "--json",
            "--workspace",
            "",
            "-s",
            "aws_batch",
            "-cfg",
            &format!("queue={queue}"),
            "utils.echo",
        ]);
        let rows: serde_json::Value =
            serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (out.status.code(), rows[0].clone())
    };
    let (code, row) = plan("no-such-queue");
    assert_eq!(code, Some(1), "{row}");
    let check = row["checks"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(check["check"], "job queue no-such-queue", "{row}");
    assert_eq!(check["outcome"], "fails", "{row}");
    assert!(check["fix"].as_str().unwrap().contains("queue="), "{row}");
    let (code, row) = plan(QUEUE);
    assert_eq!(code, Some(0), "{row}");
}

/// `describe_native` reads the job back from Batch in the dry run's shape: the same job
/// definition (nodes, image, command, retries) and queue; `None` for a job Batch does not know.
#[tokio::test]
async fn describe_native_reads_the_job_and_its_definition_back() {
    if !emulator_up("aws_batch describe_native") {
        return;
    }
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut role = torchx::specs::Role::new("trainer", "busybox:local");
    role.entrypoint = "echo".into();
    role.args = vec!["read back".into()];
    // One node: the emulator runs it as a container beside the other tests' jobs.
    role.num_replicas = 1;
    role.max_retries = 1;
    role.resource = torchx::specs::Resource::new(1, 0, 512);
    let app = torchx::specs::AppDef::new("native", vec![role]);
    let args = torchx::runner::RunArgs::default();
    let info = runner
        .dryrun(app, "aws_batch", &cfg(), &args)
        .await
        .unwrap();
    let sent = info.request.to_json();
    let handle = runner.schedule(&info).await.unwrap();
    let native = runner
        .describe_native(&handle)
        .await
        .unwrap()
        .expect("read back");
    assert_eq!(native["name"], sent["name"], "{native}");
    // Batch names the queue by its ARN.
    let queue = native["queue"].as_str().unwrap();
    assert!(queue.ends_with(&format!("job-queue/{QUEUE}")), "{queue}");
    let (got, want) = (&native["jobDef"], &sent["jobDef"]);
    for key in ["jobDefinitionName", "type", "nodeProperties"] {
        assert_eq!(got[key], want[key], "jobDef.{key}: {got}");
    }
    // Batch's retry actions are case-insensitive (the emulator gives them back in lower case).
    let retries = |v: &serde_json::Value| v["retryStrategy"].to_string().to_uppercase();
    assert_eq!(retries(got), retries(want), "{got}");
    let unknown = handle.replace("native", "no-such-job-anywhere");
    assert_eq!(runner.describe_native(&unknown).await.unwrap(), None);
    runner.cancel(&handle).await.unwrap();
}
