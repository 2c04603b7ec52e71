//! Shared helpers of the end-to-end tests: an isolated HOME, state directory and working
//! directory per test, and a /proc scan for the processes of an app.
#![allow(dead_code)]

pub mod kube_fake;

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
    let promised = std::env::var("TORCHX_TEST_ENGINES")
        .unwrap_or_default()
        .split(',')
        .any(|e| e.trim() == engine);
    assert!(
        !promised,
        "{test}: the {engine} engine was started for this run (TORCHX_TEST_ENGINES) but is \
         missing: {why}"
    );
    skip(test, why);
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
