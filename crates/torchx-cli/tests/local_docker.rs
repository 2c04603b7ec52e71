//! Integration tests against a real Docker engine (`scripts/docker/up.sh`, started by .ci/run,
//! which also imports the `busybox:local` image). Without an engine every test says loudly that
//! it was skipped.

mod support;

use std::time::Duration;

use support::{attempts, docker_up, stderr, stdout, Env};

const IMAGE: &str = "busybox:local";

fn yaml_app(env: &Env, yaml: &str) -> std::process::Output {
    std::fs::write(env.cwd.join("app.yaml"), yaml).unwrap();
    env.run(&["run", "-s", "local_docker", "./app.yaml"])
}

#[test]
fn echo_succeeds_and_its_log_is_readable() {
    if !docker_up("local_docker echo") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "utils.echo",
        "--image",
        IMAGE,
        "--msg",
        "hi docker",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("echo/0 hi docker"),
        "{}",
        stderr(&out)
    );
    let handle = stdout(&out).trim().to_string();
    assert_eq!(env.status(&handle)["state"], "SUCCEEDED");
    assert_eq!(stdout(&env.run(&["log", &handle])), "echo/0 hi docker\n");
    let list = env.run(&["list", "-s", "local_docker", "--json"]);
    assert!(stdout(&list).contains(&handle));
    // Another state directory lists its own apps, as local_cwd does; `--all` every one.
    let elsewhere = Env::new();
    let theirs = elsewhere.run(&["list", "-s", "local_docker"]);
    assert!(!stdout(&theirs).contains(&handle), "{}", stdout(&theirs));
    assert!(
        stderr(&theirs).contains(
            "of other state directories on this local_docker engine not shown (`--all` shows them)"
        ),
        "{}",
        stderr(&theirs)
    );
    let all = elsewhere.run(&["list", "-s", "local_docker", "--all", "--json"]);
    assert!(stdout(&all).contains(&handle), "{}", stdout(&all));
    assert!(
        stdout(&all).contains("\"other_state_dir\": true"),
        "{}",
        stdout(&all)
    );
    // A finished app's end is its containers' (it does not grow with the clock).
    let ended = |list: &std::process::Output| {
        let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["app_handle"] == handle.as_str())
            .cloned()
            .unwrap();
        (
            row["start_time"].as_f64().unwrap(),
            row["end_time"].as_f64(),
        )
    };
    let (start, end) = ended(&list);
    let end = end.unwrap_or_else(|| panic!("no end_time: {}", stdout(&list)));
    assert!(end >= start && end - start < 30.0, "{start} {end}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let again = env.run(&["list", "-s", "local_docker", "--json"]);
    assert_eq!(ended(&again).1, Some(end));
    assert_eq!(env.run(&["delete", &handle]).status.code(), Some(0));
    assert_eq!(env.run(&["status", &handle]).status.code(), Some(4));
}

#[test]
fn failing_replica_fails_the_app() {
    if !docker_up("local_docker failure") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "utils.sh",
        "--image",
        IMAGE,
        "--",
        "sh",
        "-c",
        "echo bad >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert_eq!(env.status(&handle)["state"], "FAILED");
    let log = env.run(&["log", &handle, "--streams", "stderr"]);
    assert_eq!(stdout(&log), "sh/0 bad\n");
    env.run(&["delete", &handle]);
}

#[test]
fn two_roles_two_replicas_reach_each_other_by_name() {
    if !docker_up("local_docker network") {
        return;
    }
    let env = Env::new();
    // Every replica pings rank 0 and every peer by container name, on the torchx network, then
    // stays up long enough for slower peers to reach it (a stopped container has no name).
    let script = "sleep 1; for h in $TORCHX_RANK0_HOST ${app_id}-a-0 ${app_id}-a-1 ${app_id}-b-0 ${app_id}-b-1; do ping -c1 -W3 $h >/dev/null || exit 9; done; echo reached all from $(hostname); sleep 8";
    let role = |name: &str| {
        format!("- name: {name}\n  image: {IMAGE}\n  entrypoint: sh\n  num_replicas: 2\n  args: ['-c', '{script}']\n")
    };
    let out = yaml_app(
        &env,
        &format!("name: net\nroles:\n{}{}", role("a"), role("b")),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    for r in ["a/0", "a/1", "b/0", "b/1"] {
        let log = stdout(&env.run(&["log", &format!("{handle}/{r}")]));
        assert!(log.contains("reached all from"), "{r}: {log}");
    }
    env.run(&["delete", &handle]);
}

#[test]
fn cancel_stops_every_container() {
    if !docker_up("local_docker cancel") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--detach",
        "utils.sh",
        "--image",
        IMAGE,
        "--",
        "sleep",
        "300",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    env.wait_state(&handle, "RUNNING", Duration::from_secs(30));
    assert_eq!(env.run(&["cancel", &handle]).status.code(), Some(0));
    let s = env.wait_state(&handle, "CANCELLED", Duration::from_secs(30));
    assert_eq!(s["roles"][0]["replicas"][0]["state"], 6, "{s}");
    let running = std::process::Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!(
                "label=torchx.pytorch.org/app-id={}",
                support::app_id(&handle)
            ),
        ])
        .output()
        .unwrap();
    assert!(running.stdout.is_empty(), "containers still running");
    env.run(&["delete", &handle]);
}

#[test]
fn restart_policy_retries_a_failing_container() {
    if !docker_up("local_docker restarts") {
        return;
    }
    let env = Env::new();
    // The container's filesystem survives its restarts: count attempts in it.
    let out = yaml_app(
        &env,
        &format!(
            "name: flaky\nroles:\n- name: f\n  image: {IMAGE}\n  entrypoint: sh\n  max_retries: 2\n  \
             args: ['-c', 'n=$(cat /tmp/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/n; echo attempt $n; [ $n -ge 3 ]']\n"
        ),
    );
    let handle = stdout(&out).trim().to_string();
    let s = env.wait_state(&handle, "SUCCEEDED", Duration::from_secs(60));
    assert_eq!(s["num_restarts"], 2, "{s}");
    let log = stdout(&env.run(&["log", &handle]));
    assert!(log.contains("f/0 attempt 3"), "{log}");
    env.run(&["delete", &handle]);
}

#[test]
fn workspace_is_built_into_the_image_and_reused_when_unchanged() {
    if !docker_up("local_docker workspace") {
        return;
    }
    let env = Env::new();
    let ws = env.cwd.join("proj");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join(".dockerignore"), "*.log\n").unwrap();
    std::fs::write(ws.join("skip.log"), "x").unwrap();
    let run = |content: &str| {
        std::fs::write(ws.join("data.txt"), content).unwrap();
        let out = env.run(&[
            "run",
            "-s",
            "local_docker",
            "--workspace",
            ws.to_str().unwrap(),
            "utils.sh",
            "--image",
            IMAGE,
            "--",
            "sh",
            "-c",
            "cat data.txt; ls",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let handle = stdout(&out).trim().to_string();
        let log = stdout(&env.run(&["log", &handle]));
        let image = std::process::Command::new("docker")
            .args([
                "inspect",
                "-f",
                "{{.Image}}",
                &format!("{}-sh-0", support::app_id(&handle)),
            ])
            .output()
            .unwrap();
        env.run(&["delete", &handle]);
        (
            log,
            String::from_utf8_lossy(&image.stdout).trim().to_string(),
        )
    };
    let unique = format!("content {}", std::process::id());
    let (log1, image1) = run(&unique);
    assert!(log1.contains(&format!("sh/0 {unique}")), "{log1}");
    assert!(
        !log1.contains("skip.log"),
        ".dockerignore not honoured: {log1}"
    );
    let (_, image2) = run(&unique);
    assert_eq!(image1, image2, "an unchanged workspace reuses its image");
    let (log3, image3) = run(&format!("{unique} changed"));
    assert!(log3.contains("changed"), "{log3}");
    assert_ne!(image1, image3);
    // Its images hold this run's unique content: nobody else uses them.
    support::docker(None, &["rmi", "-f", &image1, &image3]);
}

#[tokio::test]
async fn local_docker_conforms() {
    if !docker_up("local_docker conformance") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::env::set_var("TORCHX_STATE_DIR", tmp.path());
    let runner = torchx::Runner::new(
        torchx::scheduler::Registry::builtin(),
        torchx::config::TorchxConfig::default(),
    );
    let mounted = tempfile::tempdir().unwrap();
    let mut opts = torchx::testing::Conformance::new(IMAGE);
    opts.poll = Duration::from_millis(100);
    opts.mount_dir = Some(mounted.path().to_path_buf());
    torchx::testing::conformance(&runner, "local_docker", &opts).await;
}

/// TorchX's quickstart as written: `torchx run --scheduler local_docker utils.python --script
/// my_app.py` ships the current directory (the default workspace) on top of TorchX's default
/// image (a local stand-in with Python, tagged by scripts/docker/up.sh: nothing can be pulled
/// here); a `Dockerfile.torchx` there is honoured; `--workspace ""` ships nothing.
#[test]
fn quickstart_ships_the_current_directory_by_default() {
    if !docker_up("local_docker quickstart") {
        return;
    }
    let default_image = "ghcr.io/pytorch/torchx:0.7.0";
    let present = support::docker(None, &["image", "inspect", default_image]);
    if !present.status.success() {
        support::skip_engine(
            "docker",
            "local_docker quickstart",
            "no local ghcr.io/pytorch/torchx:0.7.0 (scripts/docker/up.sh tags it)",
        );
        return;
    }
    let env = Env::new();
    let quickstart = [
        "run",
        "--scheduler",
        "local_docker",
        "utils.python",
        "--script",
        "my_app.py",
    ];
    std::fs::write(env.cwd.join("my_app.py"), "print('Hello, TorchX!')\n").unwrap();
    let out = env.run(&quickstart);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("python/0 Hello, TorchX!"),
        "{}",
        stderr(&out)
    );
    env.run(&["delete", stdout(&out).trim()]);

    std::fs::write(
        env.cwd.join("Dockerfile.torchx"),
        "ARG IMAGE\nFROM $IMAGE\nCOPY . .\nENV GREETING=from-dockerfile-torchx\n",
    )
    .unwrap();
    std::fs::write(
        env.cwd.join("my_app.py"),
        "import os\nprint(os.environ['GREETING'])\n",
    )
    .unwrap();
    let out = env.run(&quickstart);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("python/0 from-dockerfile-torchx"),
        "{}",
        stderr(&out)
    );
    env.run(&["delete", stdout(&out).trim()]);

    let out = env.run(&[
        "run",
        "--scheduler",
        "local_docker",
        "--workspace",
        "",
        "utils.python",
        "--script",
        "my_app.py",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("can't open file"), "{}", stderr(&out));
    env.run(&["delete", stdout(&out).trim()]);
}

/// A one-role app running `script` under `sh` in busybox.
fn sh_app(env: &Env, name: &str, script: &str) -> String {
    let file = format!("{name}.yaml");
    let yaml = serde_json::json!({"name": name, "roles": [{"name": "trainer", "image": IMAGE,
        "entrypoint": "sh", "args": ["-c", script]}]});
    std::fs::write(env.cwd.join(&file), yaml.to_string()).unwrap();
    format!("./{file}")
}

fn containers_of(handle: &str) -> String {
    let id = support::app_id(handle);
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("name={id}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The hang watch on local_docker (its supervised path): a quiet container is hung, its
/// processes' stacks are taken from the host, it is stopped and removed, and the attempt ends
/// `hung`; one that touches its heartbeat file (mounted at the same path) or prints runs on.
#[test]
fn a_quiet_container_is_hung_and_one_that_beats_or_prints_is_not() {
    if !docker_up("local_docker hang watch") {
        return;
    }
    let env = Env::new();
    let run = |name: &str, script: &str| {
        let file = sh_app(&env, name, script);
        env.run(&[
            "run",
            "-s",
            "local_docker",
            "--workspace",
            "",
            "--hang_timeout",
            "4s",
            &file,
        ])
    };
    let out = run("quiet", "echo started; sleep 300");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(attempts(&status)[0].0, "hung", "{status}");
    let stacks = stdout(&env.run(&["log", "--stacks", &handle]));
    assert!(
        stacks.starts_with("--- trainer/0 attempt 0 ---\n=== trainer/0 pid "),
        "{stacks}"
    );
    assert!(stacks.contains("sleep 300"), "{stacks}");
    assert_eq!(containers_of(&handle), "", "containers left behind");
    for (name, script) in [
        (
            "beats",
            "for i in 1 2 3 4; do touch $TORCHX_HEARTBEAT_FILE; sleep 2; done; echo done",
        ),
        ("prints", "for i in 1 2 3 4; do echo $i; sleep 2; done"),
    ] {
        let out = run(name, script);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
    }
}

/// The recovery contract on local_docker: a counter signalled before each 6 s limit saves to
/// TORCHX_CHECKPOINT_DIR (a host directory mounted into every attempt's container), asks for a
/// requeue and reaches its goal; `status --json` and `log` show the attempts.
#[test]
fn recovery_a_checkpointing_container_reaches_its_goal_over_attempts() {
    if !docker_up("local_docker recovery counter") {
        return;
    }
    let env = Env::new();
    let file = sh_app(
        &env,
        "count",
        "f=$TORCHX_CHECKPOINT_DIR/n; n=$(cat $f 2>/dev/null || echo 0); \
         trap 'echo $n > $f; echo attempt $TORCHX_ATTEMPT saved $n; exit 75' USR1; \
         while [ $n -lt 45 ]; do n=$((n+1)); sleep 0.1 & wait $!; done; \
         echo reached $n in attempt $TORCHX_ATTEMPT",
    );
    // Signalled 3 s into each attempt: a container slow to start (a loaded machine) still has
    // its traps by then.
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--workspace",
        "",
        "--time_limit",
        "6s",
        "--checkpoint_signal",
        "USR1@3",
        "--max_retries",
        "0",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = attempts(&status);
    let (last, earlier) = seen.split_last().unwrap();
    assert_eq!(last, &("succeeded".to_string(), Some(0)), "{seen:?}");
    assert!(!earlier.is_empty(), "{seen:?}");
    assert!(
        earlier.iter().all(|a| a.0 == "requeued" && a.1 == Some(75)),
        "{seen:?}"
    );
    let log = stdout(&env.run(&["log", &handle]));
    assert!(
        log.contains("attempt 0 saved") && log.contains("reached 45"),
        "{log}"
    );
    assert_eq!(containers_of(&handle), "", "containers left behind");
}

/// A trainer under a shell wrapper (`sh -c` runs it; the wrapper dies of the checkpoint
/// signal) saves, asks for a requeue through TORCHX_REQUEUE_FILE and exits 0: the attempt is a
/// requeue and the job reaches its goal.
#[test]
fn recovery_a_trainer_under_a_wrapper_requeues_through_the_requeue_file() {
    if !docker_up("local_docker recovery wrapper") {
        return;
    }
    let env = Env::new();
    let trainer = "f=$TORCHX_CHECKPOINT_DIR/n; n=$(cat $f 2>/dev/null || echo 0); \
         trap 'sleep 0.3; echo $n > $f; echo attempt $TORCHX_ATTEMPT saved $n; \
         touch $TORCHX_REQUEUE_FILE; exit 0' USR1; \
         while [ $n -lt 45 ]; do n=$((n+1)); sleep 0.1 & wait $!; done; \
         echo reached $n in attempt $TORCHX_ATTEMPT";
    // The trainer's text reaches the wrapper in its environment: the wrapper's shell expands
    // none of it.
    let yaml = serde_json::json!({"name": "wrapped", "roles": [{"name": "trainer",
        "image": IMAGE, "entrypoint": "sh",
        "args": ["-c", "sh -c \"$TRAINER\"; echo wrapper done"], "env": {"TRAINER": trainer}}]});
    std::fs::write(env.cwd.join("wrapped.yaml"), yaml.to_string()).unwrap();
    let file = "./wrapped.yaml".to_string();
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--workspace",
        "",
        "--time_limit",
        "6s",
        "--checkpoint_signal",
        "USR1@3",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("reached 45"), "{}", stderr(&out));
    support::assert_requeued_then_succeeded(&env.status(stdout(&out).trim()));
}

/// `utils.python` with a Python signal handler in a container: it saves when signalled, asks
/// for a requeue through TORCHX_REQUEUE_FILE and exits 0; the job reaches its goal over
/// attempts.
#[test]
fn recovery_utils_python_requeues_through_the_requeue_file() {
    if !docker_up("local_docker recovery utils.python") {
        return;
    }
    let env = Env::new();
    let trainer = "import os, pathlib, signal, sys, time\n\
        f = pathlib.Path(os.environ['TORCHX_CHECKPOINT_DIR']) / 'n'\n\
        n = int(f.read_text()) if f.exists() else 0\n\
        def save(*_):\n    f.write_text(str(n)); pathlib.Path(os.environ['TORCHX_REQUEUE_FILE']).touch(); sys.exit(0)\n\
        signal.signal(signal.SIGUSR1, save)\n\
        while n < 45:\n    n += 1; time.sleep(0.1)\n\
        print('reached', n, 'in attempt', os.environ['TORCHX_ATTEMPT'], flush=True)\n";
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--workspace",
        "",
        "--time_limit",
        "6s",
        "--checkpoint_signal",
        "USR1@3",
        "utils.python",
        "--image",
        "python:local",
        "-c",
        trainer,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("reached 45"), "{}", stderr(&out));
    support::assert_requeued_then_succeeded(&env.status(stdout(&out).trim()));
}

/// Without recovery options a container killed from outside fails the job, as under TorchX;
/// under them, a container the engine killed for using too much memory is `oom`, a failure
/// that spends max_retries (not a requeue).
#[test]
fn killed_and_out_of_memory_containers_are_failures() {
    if !docker_up("local_docker kill and oom") {
        return;
    }
    let env = Env::new();
    let base = ["run", "-s", "local_docker", "--workspace", ""];
    let plain = sh_app(&env, "plain", "sleep 300");
    let out = env.run(&[&base[..], &["--detach", &plain]].concat());
    let handle = stdout(&out).trim().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while containers_of(&handle).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no container");
        std::thread::sleep(Duration::from_millis(100));
    }
    let killed = std::process::Command::new("docker")
        .args(["kill", &containers_of(&handle)])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let status = env.wait_state_terminal(&handle, Duration::from_secs(30));
    assert_eq!(status["state"], "FAILED", "{status}");
    let file = "hog.yaml";
    let yaml = serde_json::json!({"name": "hog", "roles": [{"name": "trainer", "image": IMAGE,
        "entrypoint": "sh", "args": ["-c", "x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done"],
        "resource": {"cpu": 1, "gpu": 0, "memMB": 16}}]});
    std::fs::write(env.cwd.join(file), yaml.to_string()).unwrap();
    let out = env.run(
        &[
            &base[..],
            &["--max_requeues", "3", "--max_retries", "1", "./hog.yaml"],
        ]
        .concat(),
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = env.status(stdout(&out).trim());
    assert_eq!(status["state"], "FAILED", "{status}");
    let reasons: Vec<String> = attempts(&status).into_iter().map(|a| a.0).collect();
    assert_eq!(reasons, ["oom", "oom"], "{status}");
    assert!(
        status["msg"].as_str().unwrap().contains("out of memory"),
        "{status}"
    );
    assert_eq!(
        containers_of(stdout(&out).trim()),
        "",
        "containers left behind"
    );
    // Without recovery options Docker's restart policy spends a retry on it, and the status
    // says why it failed.
    let out = env.run(&[&base[..], &["--max_retries", "1", "./hog.yaml"]].concat());
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = env.status(stdout(&out).trim());
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(status["num_restarts"], 1, "{status}");
    assert!(status["msg"].as_str().unwrap().contains("oom"), "{status}");
}

/// `docker kill --signal TERM` of a running container is a preemption: it starts again
/// although its retry budget is 0. A command that always fails stops after --max_retries, one that always asks for
/// a requeue after --max_requeues; a cancel removes the container.
#[test]
fn recovery_preemption_budgets_and_cancel() {
    if !docker_up("local_docker recovery preemption") {
        return;
    }
    let env = Env::new();
    let run = |args: &[&str]| {
        let mut full = vec!["run", "-s", "local_docker", "--workspace", "", "--detach"];
        full.extend_from_slice(args);
        let out = env.run(&full);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let preempted = run(&[
        "--max_requeues",
        "3",
        &sh_app(
            &env,
            "pre",
            "[ $TORCHX_ATTEMPT -ge 1 ] && exit 0; sleep 300",
        ),
    ]);
    let fails = run(&[
        "--max_retries",
        "1",
        "--max_requeues",
        "5",
        &sh_app(&env, "fails", "exit 3"),
    ]);
    let asks = run(&["--max_requeues", "2", &sh_app(&env, "asks", "exit 75")]);
    let long = run(&["--max_requeues", "1", &sh_app(&env, "long", "sleep 300")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while containers_of(&preempted).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no container for {preempted}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let killed = std::process::Command::new("docker")
        .args(["kill", "--signal", "TERM", &containers_of(&preempted)])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let terminal = |h: &str| env.wait_state_terminal(h, Duration::from_secs(60));
    let status = terminal(&preempted);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = attempts(&status);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "preempted", "{seen:?}");
    let signal = &status["roles"][0]["replicas"][0]["attempts"][0]["signal"];
    assert_eq!(signal, 15, "{status}");
    let status = terminal(&fails);
    assert_eq!(status["state"], "FAILED", "{status}");
    let failed = ("failed".to_string(), Some(3));
    assert_eq!(attempts(&status), [failed.clone(), failed]);
    let status = terminal(&asks);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(attempts(&status).len(), 3, "{status}");
    assert!(
        attempts(&status).iter().all(|a| a.0 == "requeued"),
        "{status}"
    );
    while containers_of(&long).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no container for {long}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(env.run(&["cancel", &long]).status.code(), Some(0));
    assert_eq!(terminal(&long)["state"], "CANCELLED");
    for h in [&preempted, &fails, &asks, &long] {
        assert_eq!(containers_of(h), "", "containers of {h} left behind");
    }
}

/// A supervised app whose supervisor is killed: its guard settles it FAILED, saying why, and
/// removes its container (killing a `docker run` alone would leave the container running).
#[test]
fn recovery_a_killed_supervisor_leaves_no_container_behind() {
    if !docker_up("local_docker recovery supervisor killed") {
        return;
    }
    let env = Env::new();
    let file = sh_app(&env, "orphan", "sleep 300");
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--workspace",
        "",
        "--detach",
        "--max_requeues",
        "1",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while containers_of(&handle).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no container for {handle}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // This test's supervisor: `torchx __supervise` with this test's state directory.
    let state = env.state.join("local_docker").join("supervised");
    let supervisor = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|p| p.file_name().to_string_lossy().parse::<u32>().is_ok())
        .find(|p| {
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(p.path().join("environ")).unwrap_or_default();
            let wanted = format!("TORCHX_STATE_DIR={}", state.display());
            String::from_utf8_lossy(&cmdline).contains("__supervise")
                && environ.split(|b| *b == 0).any(|e| e == wanted.as_bytes())
        })
        .map(|p| p.file_name().to_string_lossy().into_owned())
        .unwrap_or_else(|| panic!("no supervisor of {handle} under {}", state.display()));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &supervisor])
        .status()
        .unwrap();
    assert!(killed.success());
    // Readers show FAILED at once; the guard then records why and removes the container.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = env.status(&handle);
        let recorded = status["msg"].as_str().unwrap_or_default().contains("died");
        if status["state"] == "FAILED" && recorded && containers_of(&handle).is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{status}; containers: {}",
            containers_of(&handle)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A sweep on local_docker: one container per task (at most the cap at once), one group handle
/// for status, log, list and delete; cancelling a group stops every task's container.
#[test]
fn a_sweep_is_one_group_of_containers() {
    if !docker_up("local_docker sweep") {
        return;
    }
    let env = Env::new();
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--wait",
        "--sweep",
        "x=a,b,c",
        "--max_concurrent",
        "2",
        "utils.sh",
        "--image",
        IMAGE,
        "sh",
        "-c",
        "echo x=${sweep.x} task=$TORCHX_ARRAY_INDEX; [ ${sweep.x} != b ]",
    ]);
    assert_eq!(out.status.code(), Some(1), "b fails: {}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.status(&handle);
    assert_eq!(status["state"], "FAILED", "{status}");
    assert_eq!(
        status["counts"],
        serde_json::json!({"FAILED": 1, "SUCCEEDED": 2}),
        "{status}"
    );
    let log = stdout(&env.run(&["log", &handle]));
    assert_eq!(
        log, "0:sh/0 x=a task=0\n1:sh/0 x=b task=1\n2:sh/0 x=c task=2\n",
        "{log}"
    );
    // The engine may hold other tests' containers: the group is one row, its tasks none.
    let list = stdout(&env.run(&["list", "-s", "local_docker", "--json"]));
    assert_eq!(list.matches(&handle).count(), 1, "{list}");
    for t in status["tasks"].as_array().unwrap() {
        let task = t["handle"].as_str().unwrap();
        assert!(!list.contains(&format!("\"{task}\"")), "{task} in {list}");
    }
    assert_eq!(env.run(&["delete", &handle]).status.code(), Some(0));
    assert_eq!(env.run(&["status", &handle]).status.code(), Some(4));
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--detach",
        "--array",
        "2",
        "utils.sh",
        "--image",
        IMAGE,
        "sleep",
        "60",
    ]);
    let handle = stdout(&out).trim().to_string();
    assert_eq!(env.run(&["cancel", &handle]).status.code(), Some(0));
    let status = env.wait_state_terminal(&handle, std::time::Duration::from_secs(30));
    assert_eq!(
        status["counts"],
        serde_json::json!({"CANCELLED": 2}),
        "{status}"
    );
    // Stopped, then removed with the group.
    let running = |t: &serde_json::Value| {
        let id = support::app_id(t["handle"].as_str().unwrap());
        let label = format!("label=torchx.pytorch.org/app-id={id}");
        let out = std::process::Command::new("docker")
            .args(["ps", "-q", "--filter", &label])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let tasks = status["tasks"].as_array().unwrap();
    for t in tasks {
        assert_eq!(running(t), "", "{t}");
    }
    assert_eq!(env.run(&["delete", &handle]).status.code(), Some(0));
    for t in tasks {
        assert_eq!(containers_of(t["handle"].as_str().unwrap()), "", "{t}");
    }
}

/// Two local_docker submissions at once on one current-thread runtime (as an embedder or the
/// Python extension does) both finish: waiting for the `torchx` network's file lock must not
/// block the thread the lock's holder needs to let go of it.
#[test]
fn concurrent_submissions_on_one_thread_do_not_deadlock() {
    if !docker_up("local_docker concurrent submissions") {
        return;
    }
    let env = Env::new();
    let (done, finished) = std::sync::mpsc::channel();
    let state = env.state.clone();
    std::thread::spawn(move || {
        std::env::set_var("TORCHX_STATE_DIR", &state);
        let runner = torchx::Extensions::builtin()
            .runner(torchx::config::TorchxConfig::default())
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handles: Vec<torchx::Result<torchx::specs::AppHandle>> = rt.block_on(async {
            let mut infos = Vec::new();
            for msg in ["one", "two"] {
                let app = torchx::specs::AppDef::new(
                    "conc",
                    vec![torchx::specs::Role::new("echo", IMAGE)
                        .with_entrypoint("echo")
                        .with_args([msg])],
                );
                let cfg = torchx::opts::Cfg::default();
                let args = torchx::runner::RunArgs::default();
                infos.push(
                    runner
                        .dryrun(app, "local_docker", &cfg, &args)
                        .await
                        .unwrap(),
                );
            }
            let (a, b) = tokio::join!(runner.schedule(&infos[0]), runner.schedule(&infos[1]));
            vec![a, b]
        });
        let _ = done.send(handles);
    });
    let handles = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("two concurrent submissions did not finish: deadlock");
    for h in handles {
        let h = h.unwrap();
        let status = env.wait_state_terminal(&h, Duration::from_secs(60));
        assert_eq!(status["state"], "SUCCEEDED", "{status}");
    }
}

/// `--after` on local_docker: the job runs under torchx's supervisor, which holds it until its
/// dependency (here a local_cwd job, another scheduler) ended as required, then starts the
/// container; a dependent of a failed job ends CANCELLED without a container.
#[test]
fn after_holds_a_container_until_its_dependency_ended() {
    if !docker_up("local_docker --after") {
        return;
    }
    let env = Env::new();
    let first = env.detach(&["utils.sh", "sh", "-c", "sleep 1; echo ready > flag"]);
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--workspace",
        "",
        "--after",
        &first,
        "utils.sh",
        "--image",
        IMAGE,
        "echo",
        "after the local job",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("after the local job"),
        "{}",
        stderr(&out)
    );
    assert!(env.cwd.join("flag").exists(), "the dependency ran first");
    let failing = env.detach(&["utils.sh", "sh", "-c", "exit 3"]);
    let out = env.run(&[
        "run",
        "-s",
        "local_docker",
        "--workspace",
        "",
        "--detach",
        "--after",
        &failing,
        "utils.sh",
        "--image",
        IMAGE,
        "echo",
        "never",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    let status = env.wait_state_terminal(&handle, Duration::from_secs(60));
    assert_eq!(status["state"], "CANCELLED", "{status}");
    assert!(
        status["msg"].as_str().unwrap().contains("not started"),
        "{status}"
    );
    assert_eq!(containers_of(&handle), "", "no container");
}
