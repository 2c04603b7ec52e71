//! Shared helpers of the end-to-end tests: an isolated HOME, state directory and working
//! directory per test, and a /proc scan for the processes of an app.
#![allow(dead_code)]

pub mod k8s;
pub mod kube_fake;
pub mod ui_server;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Env {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub state: PathBuf,
    pub cwd: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let (home, state, cwd) = (
            tmp.path().join("home"),
            tmp.path().join("state"),
            tmp.path().join("cwd"),
        );
        for d in [&home, &cwd] {
            std::fs::create_dir_all(d).unwrap();
        }
        Env {
            _tmp: tmp,
            home,
            state,
            cwd,
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_of(env!("CARGO_BIN_EXE_torchx").as_ref(), args)
    }

    /// `program args` (a torchx binary) isolated like [`Env::cmd`].
    pub fn cmd_of(&self, program: &std::path::Path, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("TORCHX_STATE_DIR", &self.state)
            .env_remove("TORCHXCONFIG")
            .env_remove("LOGLEVEL")
            .env_remove("TORCHX_PARENT_RUN_ID")
            .env_remove("TORCHX_SUPERVISOR");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// `torchx run --detach ...`, returning the handle.
    pub fn detach(&self, args: &[&str]) -> String {
        let mut full = vec!["run", "--detach"];
        full.extend_from_slice(args);
        let out = self.run(&full);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    }

    /// Starts a foreground `torchx run ...` and returns it with the handle it printed.
    pub fn spawn_run(&self, args: &[&str]) -> (Child, String) {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        let mut child = self
            .cmd(&full)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut handle = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut handle)
            .unwrap();
        (child, handle.trim().to_string())
    }

    /// `torchx list --json`, parsed.
    pub fn list(&self) -> Vec<serde_json::Value> {
        let out = self.run(&["list", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    pub fn apps(&self) -> usize {
        self.list().len()
    }

    /// `torchx status --json`, parsed.
    pub fn status(&self, handle: &str) -> serde_json::Value {
        let out = self.run(&["status", handle, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }

    /// Polls `status` until the app is in `state` (or fails the test after `within`).
    pub fn wait_state(&self, handle: &str, state: &str, within: Duration) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let s = self.status(handle);
            if s["state"] == state {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{handle} did not reach {state}: {s}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `status` until the app is terminal (or fails the test after `within`).
    pub fn wait_state_terminal(&self, handle: &str, within: Duration) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let s = self.status(handle);
            if ["SUCCEEDED", "FAILED", "CANCELLED"].contains(&s["state"].as_str().unwrap_or("")) {
                return s;
            }
            assert!(Instant::now() < deadline, "{handle} did not end: {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `describe --json` metadata value.
    pub fn metadata(&self, handle: &str, key: &str) -> String {
        let out = self.run(&["describe", handle, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        v["metadata"][key].as_str().unwrap_or_default().to_string()
    }
}

/// An AppDef file running `script` (written next to it) with bash, as role `trainer`, with
/// `extra_env` (YAML mapping entries, `K: 'v'`); returns its `./name.yaml`.
pub fn bash_app(env: &Env, name: &str, script: &str, extra_env: &str) -> String {
    std::fs::write(env.cwd.join(format!("{name}.sh")), script).unwrap();
    let file = format!("{name}.yaml");
    std::fs::write(
        env.cwd.join(&file),
        format!(
            "name: {name}\nroles:\n- name: trainer\n  image: .\n  entrypoint: bash\n  \
             args: [{name}.sh]\n  env: {{{extra_env}}}\n"
        ),
    )
    .unwrap();
    format!("./{file}")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The app id of a handle (`local_cwd://session/app_id`).
pub fn app_id(handle: &str) -> &str {
    handle.rsplit('/').next().unwrap()
}

/// Pids of every process (any depth of the tree) whose environment carries the app's
/// TORCHX_JOB_ID, i.e. the app's replicas and everything they started.
pub fn processes_of(handle: &str) -> Vec<u32> {
    let needle = format!("TORCHX_JOB_ID={handle}\0");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&env).contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

/// Waits until at least `n` processes of the app exist.
pub fn wait_processes(handle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_of(handle).len() < n {
        assert!(
            Instant::now() < deadline,
            "{handle} never had {n} processes"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts that no process of the app is left (allowing the kernel a moment to tear down
/// processes that were sent SIGKILL).
pub fn assert_no_processes(handle: &str) {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let left = processes_of(handle);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes of {handle} left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reports a skipped test on the real stderr (the test harness captures only `eprintln!`).
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {test}: {why} ***\n");
}

/// Skips a test whose engine (`slurm`, `docker`, `aws`) is missing, loudly; but where the run
/// promised that engine (`.ci/run` lists the engines it started in `$TORCHX_TEST_ENGINES`), a
/// missing engine is a failure: a skip must never pass for a test in CI.
pub fn skip_engine(engine: &str, test: &str, why: &str) {
    assert!(
        !promised(engine),
        "{test}: the {engine} engine was started for this run (TORCHX_TEST_ENGINES) but is \
         missing: {why}"
    );
    skip(test, why);
}

/// Whether the Slurm cluster of `scripts/slurm/up.sh` answers; says loudly that `test` is
/// skipped when it does not (a failure where the run promised Slurm).
pub fn slurm_up(test: &str) -> bool {
    let ok = Command::new("sinfo")
        .arg("--noheader")
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    if !ok {
        skip_engine(
            "slurm",
            test,
            "no Slurm cluster (run scripts/slurm/up.sh --nodes 4 as root)",
        );
    }
    ok
}

/// Whether the Docker engine of `scripts/docker/up.sh` answers with its `busybox:local`; says
/// loudly that `test` is skipped when it does not (a failure where the run promised Docker).
pub fn docker_up(test: &str) -> bool {
    let ok = Command::new("docker")
        .args(["image", "inspect", "busybox:local"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip_engine(
            "docker",
            test,
            "no Docker engine with busybox:local (run scripts/docker/up.sh as root and export DOCKER_HOST)",
        );
    }
    ok
}

/// Whether this run promised `engine` (`.ci/run` lists the engines it started in
/// `$TORCHX_TEST_ENGINES`).
pub fn promised(engine: &str) -> bool {
    std::env::var("TORCHX_TEST_ENGINES")
        .unwrap_or_default()
        .split(',')
        .any(|e| e.trim() == engine)
}

/// Whether the AWS emulator of `scripts/aws/up.sh` answers at `$AWS_ENDPOINT_URL`; says loudly
/// that `test` is skipped when it does not.
pub fn aws_emulator_up(test: &str) -> bool {
    let up = std::env::var("AWS_ENDPOINT_URL").is_ok_and(|url| {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        std::net::TcpStream::connect(addr).is_ok()
    });
    if !up {
        skip_engine(
            "aws",
            test,
            "no AWS emulator (run `bash scripts/aws/up.sh && . .aws-emu/moto.env`)",
        );
    }
    up
}

/// Whether the emulator runs jobs as containers on the Docker engine (`scripts/aws/up.sh`'s
/// docker mode, `AWS_EMU_BATCH_MODE=docker` in its env file: Batch jobs, and SageMaker training
/// jobs tagged `aws-emulator: docker`) rather than only moving them through their states
/// (lifecycle mode). Says which ran; where the run promised a Docker engine, the
/// lifecycle mode is a failure.
pub fn aws_emulator_runs_containers(test: &str) -> bool {
    use std::io::Write;
    let docker = std::env::var("AWS_EMU_BATCH_MODE").is_ok_and(|m| m == "docker");
    assert!(
        docker || !promised("docker"),
        "{test}: this run started a Docker engine, but the AWS emulator's Batch is in lifecycle \
         mode (start the engine before scripts/aws/up.sh)"
    );
    let mode = if docker { "docker" } else { "lifecycle" };
    let _ = writeln!(
        std::io::stderr(),
        "{test}: AWS emulator Batch in {mode} mode"
    );
    docker
}

/// The registries of `scripts/registry/up.sh` (`.ci/run` exports their addresses), next to the
/// Docker engine of `scripts/docker/up.sh` that builds and pushes workspace images.
pub struct Registries {
    /// An open registry, `127.0.0.1:<port>`.
    pub open: String,
    /// A registry behind htpasswd basic auth.
    pub auth: String,
    pub user: String,
    pub password: String,
}

/// The registries and the Docker engine, or a loud skip (a failure when `.ci/run` started them).
pub fn registries_up(test: &str) -> Option<Registries> {
    let docker = Command::new("docker")
        .args(["image", "inspect", "busybox:local"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !docker {
        skip_engine(
            "docker",
            test,
            "no Docker engine with busybox:local (run scripts/docker/up.sh as root and export DOCKER_HOST)",
        );
        return None;
    }
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let found = (|| {
        let r = Registries {
            open: var("TORCHX_TEST_REGISTRY")?,
            auth: var("TORCHX_TEST_AUTH_REGISTRY")?,
            user: var("TORCHX_TEST_REGISTRY_USER")?,
            password: var("TORCHX_TEST_REGISTRY_PASSWORD")?,
        };
        let up = |a: &str| std::net::TcpStream::connect(a).is_ok();
        (up(&r.open) && up(&r.auth)).then_some(r)
    })();
    if found.is_none() {
        skip_engine(
            "registry",
            test,
            "no registries (run `. \"$(bash scripts/registry/up.sh | tail -1)\"`)",
        );
    }
    found
}

/// A Docker client config directory holding `user:password` for `registry`.
pub fn docker_config(dir: &std::path::Path, registry: &str, user: &str, password: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let auth = base64_encode(format!("{user}:{password}").as_bytes());
    let config = serde_json::json!({"auths": {registry: {"auth": auth}}});
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

fn base64_encode(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Runs `docker args` (with the client config in `config`, if any); its output.
pub fn docker(config: Option<&std::path::Path>, args: &[&str]) -> Output {
    let mut c = Command::new("docker");
    if let Some(dir) = config {
        c.arg("--config").arg(dir);
    }
    c.args(args).output().unwrap()
}

/// Proves a pushed image holds the workspace: drops the local copy, pulls it back from its
/// registry and runs `cat <file>` in it.
pub fn pull_and_cat(config: Option<&std::path::Path>, image: &str, file: &str) -> String {
    docker(None, &["rmi", "-f", image]);
    let pull = docker(config, &["pull", image]);
    assert!(
        pull.status.success(),
        "docker pull {image}: {}",
        stderr(&pull)
    );
    let run = docker(None, &["run", "--rm", image, "cat", file]);
    assert!(run.status.success(), "docker run {image}: {}", stderr(&run));
    docker(None, &["rmi", "-f", image]);
    stdout(&run)
}

/// A dry run's planned workspace images (`torchx run --dryrun --json`'s `images`).
pub fn planned_images(out: &Output) -> Vec<serde_json::Value> {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let v: serde_json::Value = serde_json::from_str(&stdout(out)).unwrap();
    v["images"].as_array().cloned().unwrap_or_default()
}

/// What [`workspace_push_roundtrip`] ran: the handles and images of its two real submissions,
/// to the open registry and to the authenticated one.
pub struct PushedRuns {
    pub open: (String, String),
    pub auth: (String, String),
}

/// TorchX's workspace loop on a scheduler that pushes images, against the real registries:
/// the dry run plans one image `<image_repo>:<hash>` and builds and pushes nothing; the run
/// builds it, pushes it and submits; the image pulled back from the registry holds the
/// workspace; a second run of the unchanged workspace neither builds nor pushes; the
/// authenticated registry refuses a push without credentials and takes one with them.
/// `app` is the component and its arguments; `extra_env` reaches every `torchx` call.
pub fn workspace_push_roundtrip(
    env: &Env,
    reg: &Registries,
    scheduler: &str,
    cfg: &str,
    extra_env: &[(&str, &str)],
    app: &[&str],
) -> PushedRuns {
    let ws = env.cwd.join("proj");
    std::fs::create_dir_all(&ws).unwrap();
    let content = format!(
        "{scheduler} workspace {} {:?}",
        std::process::id(),
        std::time::SystemTime::now()
    );
    std::fs::write(ws.join("data.txt"), &content).unwrap();
    let no_creds = env.home.join("docker-empty");
    let creds = env.home.join("docker-creds");
    std::fs::create_dir_all(&no_creds).unwrap();
    docker_config(&creds, &reg.auth, &reg.user, &reg.password);
    let sep = if cfg.is_empty() { "" } else { "," };
    let torchx = |registry: &str, dry: bool, docker_config: &std::path::Path| {
        let cfg = format!("{cfg}{sep}image_repo={registry}/torchx-test/{scheduler}");
        let mut args = vec!["run"];
        if dry {
            args.extend(["--dryrun", "--json"]);
        }
        args.extend([
            "-s",
            scheduler,
            "-cfg",
            &cfg,
            "--workspace",
            ws.to_str().unwrap(),
        ]);
        args.extend(app);
        let mut c = env.cmd(&args);
        c.env("LOGLEVEL", "info")
            .env("DOCKER_CONFIG", docker_config);
        for (k, v) in extra_env {
            c.env(k, v);
        }
        c.output().unwrap()
    };

    let planned = planned_images(&torchx(&reg.open, true, &no_creds));
    assert_eq!(planned.len(), 1, "{planned:?}");
    let image = planned[0]["image"].as_str().unwrap().to_string();
    assert!(
        image.starts_with(&format!("{}/torchx-test/{scheduler}:", reg.open)),
        "{image}"
    );
    assert_eq!(planned[0]["push"], true);
    assert!(
        !docker(None, &["image", "inspect", &image]).status.success(),
        "the dry run built {image}"
    );
    assert!(
        !docker(Some(&no_creds), &["pull", &image]).status.success(),
        "the dry run pushed {image}"
    );

    let out = torchx(&reg.open, false, &no_creds);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = stderr(&out);
    assert!(
        log.contains(&format!("building workspace image {image}")),
        "{log}"
    );
    assert!(log.contains(&format!("pushing image {image}")), "{log}");
    let open_handle = stdout(&out).lines().next().unwrap().to_string();
    assert_eq!(pull_and_cat(Some(&no_creds), &image, "data.txt"), content);

    let again = torchx(&reg.open, false, &no_creds);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let log = stderr(&again);
    assert!(log.contains("is already in its registry"), "{log}");
    assert!(
        !log.contains("building workspace image") && !log.contains("pushing image"),
        "{log}"
    );

    let refused = torchx(&reg.auth, false, &no_creds);
    assert_eq!(refused.status.code(), Some(5), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("no credentials for {}", reg.auth)),
        "{}",
        stderr(&refused)
    );
    let out = torchx(&reg.auth, false, &creds);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let auth_image = image.replacen(&reg.open, &reg.auth, 1);
    assert!(
        stderr(&out).contains(&format!("pushing image {auth_image}")),
        "{}",
        stderr(&out)
    );
    let auth_handle = stdout(&out).lines().next().unwrap().to_string();
    assert!(
        !docker(Some(&no_creds), &["pull", &auth_image])
            .status
            .success(),
        "the authenticated registry served {auth_image} without credentials"
    );
    assert_eq!(pull_and_cat(Some(&creds), &auth_image, "data.txt"), content);
    // pull_and_cat dropped both local copies; nothing of this test stays on the engine.
    PushedRuns {
        open: (open_handle, image),
        auth: (auth_handle, auth_image),
    }
}

/// Serves HTTP/1 on a loopback port from a thread of its own (its own runtime, so any test
/// can use it), answering every request with `handler`; returns the address.
pub fn serve_http<H, F, B>(handler: H) -> std::net::SocketAddr
where
    H: Fn(hyper::Request<hyper::body::Incoming>) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = Result<hyper::Response<B>, std::convert::Infallible>>
        + Send
        + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    continue;
                };
                let service = hyper::service::service_fn(handler.clone());
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(conn), service)
                        .await;
                });
            }
        });
    });
    addr
}

/// (reason, exit code) of every attempt `status --json` shows for the first replica of the
/// first role (`running` for one that has not ended).
pub fn attempts(status: &serde_json::Value) -> Vec<(String, Option<i64>)> {
    status["roles"][0]["replicas"][0]["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempts in {status}"))
        .iter()
        .map(|a| {
            let reason = a["reason"].as_str().unwrap_or("running").to_string();
            (reason, a["exit_code"].as_i64())
        })
        .collect()
}

/// Asserts that the app of `status` SUCCEEDED in its last attempt after one or more that were
/// requeued (the recovery contract at work).
pub fn assert_requeued_then_succeeded(status: &serde_json::Value) {
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let seen = attempts(status);
    let (last, earlier) = seen.split_last().expect("at least one attempt");
    assert_eq!(last.0, "succeeded", "{seen:?}");
    assert!(!earlier.is_empty(), "one attempt was enough: {seen:?}");
    assert!(earlier.iter().all(|a| a.0 == "requeued"), "{seen:?}");
}

/// PATH with the bin directory of `$TORCHX_DDP_PYTHON` (.ci/run: the test venv's, else
/// python3's) first, as a user's activated environment has it; `None` (said loudly, a failure
/// where the run promised PyTorch) when that Python has no torch.
pub fn torch_path(test: &str) -> Option<String> {
    let python = std::env::var("TORCHX_DDP_PYTHON").unwrap_or_else(|_| "python3".into());
    let torch = std::process::Command::new(&python)
        .args(["-c", "import torch"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !torch {
        skip_engine(
            "torch",
            test,
            &format!("`{python} -c 'import torch'` fails"),
        );
        return None;
    }
    let bin = std::process::Command::new(&python)
        .args([
            "-c",
            "import sys, os; print(os.path.dirname(sys.executable))",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Some(format!(
        "{bin}:{}",
        std::env::var("PATH").unwrap_or_default()
    ))
}
