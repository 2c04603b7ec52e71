//! `lsf` through the CLI with stand-in `bsub`, `bjobs`, `bhosts`, `bkill` and `docker` programs
//! (`tests/fixtures/lsf/`) first on PATH; they keep job state in a temp dir and really run each
//! replica's command, so logs are real. No LSF can run here: what this does not prove is that
//! real LSF accepts every option (`-R` strings, `-gpu`) or prints exactly these columns.

mod support;

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use support::{stderr, stdout, Env};
use torchx::config::TorchxConfig;
use torchx::opts::{Cfg, CfgValue};
use torchx::scheduler::Registry;
use torchx::testing::{conformance, Conformance};
use torchx::Runner;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lsf")
}

fn path_with_fakes() -> String {
    format!(
        "{}:{}",
        fixtures().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

struct Lsf {
    env: Env,
    fake: tempfile::TempDir,
}

impl Lsf {
    fn new() -> Lsf {
        Lsf {
            env: Env::new(),
            fake: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.env
            .cmd(args)
            .env("PATH", path_with_fakes())
            .env("LSF_FAKE_DIR", self.fake.path())
            .output()
            .unwrap()
    }

    fn jobdir(&self) -> String {
        format!("jobdir={}", self.fake.path().join("jobdir").display())
    }

    fn wait_for(&self, handle: &str, state: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = stdout(&self.run(&["status", handle]));
            if s.contains(state) {
                return;
            }
            assert!(Instant::now() < deadline, "{handle} never {state}: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn submit_pending_running_done_with_logs_and_list() {
    let lsf = Lsf::new();
    std::fs::write(
        lsf.env.cwd.join("app.yaml"),
        "name: hello\nroles:\n- name: main\n  image: img\n  entrypoint: sh\n  \
         args: ['-c', 'sleep 1; echo \"hi $0 `x`\"', '$USER']\n",
    )
    .unwrap();
    let out = lsf.run(&["run", "-s", "lsf", "-cfg", &lsf.jobdir(), "./app.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(handle.starts_with("lsf://torchx/hello-"), "{handle}");
    let first = stdout(&lsf.run(&["status", &handle]));
    assert!(
        first.contains("PENDING") || first.contains("RUNNING"),
        "{first}"
    );
    // Follow the log until the job ends.
    let out = lsf.run(&["log", "--tail", &handle]);
    assert!(
        stdout(&out).contains("hi $USER"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    lsf.wait_for(&handle, "SUCCEEDED");
    let out = lsf.run(&["log", "--regex", "USER", &handle]);
    assert!(
        stdout(&out).contains("hi $USER"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let out = lsf.run(&["list", "-s", "lsf"]);
    assert!(
        stdout(&out).contains(handle.rsplit('/').next().unwrap()),
        "{}",
        stdout(&out)
    );
}

#[test]
fn two_roles_fail_and_cancel() {
    let lsf = Lsf::new();
    std::fs::write(
        lsf.env.cwd.join("app.yaml"),
        "name: pair\nroles:\n- name: a\n  image: img\n  entrypoint: sh\n  args: ['-c', 'exit 3']\n\
         - name: b\n  image: img\n  entrypoint: sh\n  args: ['-c', 'echo $TORCHX_RANK0_HOST']\n",
    )
    .unwrap();
    let out = lsf.run(&[
        "run",
        "-s",
        "lsf",
        "-cfg",
        &lsf.jobdir(),
        "--wait",
        "./app.yaml",
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stderr(&out).contains("FAILED"), "{}", stderr(&out));
    let handle = stdout(&out).lines().next().unwrap().to_string();
    let out = lsf.run(&["log", &format!("{handle}/b/0")]);
    assert!(
        stdout(&out).contains("hostA"),
        "rank 0 runs on the first host that fits: {}",
        stdout(&out)
    );
    let out = lsf.run(&["status", "--json", &handle]);
    assert!(stdout(&out).contains("\"FAILED\""), "{}", stdout(&out));
    // Cancel → EXIT 130 → CANCELLED.
    let out = lsf.run(&["run", "-s", "lsf", "utils.sh", "sleep", "600"]);
    let long = stdout(&out).trim().to_string();
    lsf.wait_for(&long, "RUNNING");
    assert_eq!(lsf.run(&["cancel", &long]).status.code(), Some(0));
    lsf.wait_for(&long, "CANCELLED");
    // Delete hides it.
    assert_eq!(lsf.run(&["delete", &long]).status.code(), Some(0));
    assert_ne!(lsf.run(&["status", &long]).status.code(), Some(0));
}

#[test]
fn clear_errors() {
    let lsf = Lsf::new();
    // No jobdir: LSF kept no logs.
    let out = lsf.run(&["run", "-s", "lsf", "--wait", "utils.echo"]);
    let handle = stdout(&out).lines().next().unwrap().to_string();
    let out = lsf.run(&["log", &handle]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("without a jobdir"),
        "{}",
        stderr(&out)
    );
    // No host fits.
    std::fs::write(
        lsf.env.cwd.join("big.yaml"),
        "name: big\nroles:\n- name: a\n  image: img\n  entrypoint: x\n  resource: {cpu: 999, gpu: 0, memMB: 1}\n",
    )
    .unwrap();
    let out = lsf.run(&["run", "-s", "lsf", "./big.yaml"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("cannot find a host with 999 CPUs"),
        "{}",
        stderr(&out)
    );
    // No LSF on PATH: the dry run shows a placeholder host; submitting says what is missing.
    let out = lsf
        .env
        .cmd(&["run", "-s", "lsf", "utils.echo"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("`bhosts` is not installed"),
        "{}",
        stderr(&out)
    );
    let out = lsf
        .env
        .cmd(&["status", "lsf://torchx/x-1"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("`bjobs` is not installed"),
        "{}",
        stderr(&out)
    );
    let out = lsf
        .env
        .cmd(&["run", "--dryrun", "-s", "lsf", "utils.echo"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("<RANK0_HOST>"));
}

#[tokio::test]
async fn lsf_conforms() {
    let fake = tempfile::tempdir().unwrap();
    std::env::set_var("PATH", path_with_fakes());
    std::env::set_var("LSF_FAKE_DIR", fake.path());
    let cfg: Cfg = [(
        "jobdir".to_string(),
        CfgValue::Str(fake.path().join("jobdir").display().to_string()),
    )]
    .into();
    let runner = Runner::new(Registry::builtin(), TorchxConfig::default());
    let mut opts = Conformance::default();
    opts.cfg = cfg;
    opts.timeout = Duration::from_secs(30);
    opts.poll = Duration::from_millis(100);
    conformance(&runner, "lsf", &opts).await;

    // `describe_native` (here, where the fakes are this process's): LSF's jobs and the submit
    // script that made them, read back; `None` for a project bjobs does not know.
    let mut role = torchx::specs::Role::new("trainer", "img");
    role.entrypoint = "echo".into();
    role.args = vec!["read back".into()];
    role.num_replicas = 2;
    let app = torchx::specs::AppDef::new("native", vec![role]);
    let args = torchx::runner::RunArgs::default();
    let info = runner.dryrun(app, "lsf", &opts.cfg, &args).await.unwrap();
    let sent = info.request.to_json();
    let handle = runner.schedule(&info).await.unwrap();
    let native = runner
        .describe_native(&handle)
        .await
        .unwrap()
        .expect("read back");
    assert_eq!(native["script"], sent["script"], "{native}");
    assert_eq!(native["jobdir"], sent["jobdir"], "{native}");
    let names: Vec<&str> = native["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{native}");
    assert!(names.iter().all(|n| n.starts_with("native-")), "{native}");
    let unknown = handle.replace("native", "no-such-project");
    assert_eq!(runner.describe_native(&unknown).await.unwrap(), None);
}

/// Dry runs do not ask `bhosts` every time: its answer is cached in the state dir, keyed by the
/// cluster's files (`$LSF_ENVDIR`), so a cluster that changed is asked again.
#[test]
fn bhosts_is_asked_again_only_when_the_cluster_changed() {
    let lsf = Lsf::new();
    let envdir = lsf.fake.path().join("conf");
    std::fs::create_dir(&envdir).unwrap();
    std::fs::write(envdir.join("lsf.conf"), "LSF_SERVERDIR=/x\n").unwrap();
    let dry_run = || {
        let out = lsf
            .env
            .cmd(&["run", "--dryrun", "-s", "lsf", "utils.echo"])
            .env("PATH", path_with_fakes())
            .env("LSF_FAKE_DIR", lsf.fake.path())
            .env("LSF_ENVDIR", &envdir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("hostA"), "{}", stdout(&out));
    };
    let calls = || {
        std::fs::read_to_string(lsf.fake.path().join("bhosts.calls"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    dry_run();
    dry_run();
    assert_eq!(calls(), 1, "the second dry run asked bhosts again");
    std::fs::write(envdir.join("lsf.cluster.torchx"), "Begin Host\nEnd Host\n").unwrap();
    dry_run();
    assert_eq!(calls(), 2, "a new cluster file was not noticed");
}

#[test]
fn an_array_is_one_bsub_whose_elements_run_their_tasks_under_the_cap() {
    let lsf = Lsf::new();
    let runs = lsf.env.cwd.join("runs");
    std::fs::create_dir(&runs).unwrap();
    // Each task notes how many tasks run beside it, then fails for index 2.
    let script = format!(
        "d={}; touch $d/run.${{array_index}}; ls $d | grep -c '^run' > $d/seen.${{array_index}}; \
         sleep 0.5; rm $d/run.${{array_index}}; echo task ${{array_index}} is $TORCHX_ARRAY_INDEX; \
         [ ${{array_index}} != 2 ]",
        runs.display()
    );
    let out = lsf.run(&[
        "run",
        "-s",
        "lsf",
        "-cfg",
        &lsf.jobdir(),
        "--array",
        "0-3%2",
        "utils.sh",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    // One bsub: one job id for every element.
    let jobs = std::fs::read_dir(lsf.fake.path().join("jobs"))
        .unwrap()
        .count();
    assert_eq!(jobs, 4);
    lsf.wait_for(&handle, "FAILED");
    let out = lsf.run(&["status", "--json", &handle]);
    let status: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(status["counts"]["SUCCEEDED"], 3, "{status}");
    assert_eq!(status["counts"]["FAILED"], 1, "{status}");
    let array = status["native_array"].as_str().unwrap().to_string();
    assert_eq!(status["tasks"][2]["handle"], format!("{array}_2"));
    assert_eq!(status["tasks"][2]["state"], "FAILED");
    for i in 0..4 {
        let seen: u32 = std::fs::read_to_string(runs.join(format!("seen.{i}")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(seen <= 2, "task {i} saw {seen} running under %2");
    }
    let log = stdout(&lsf.run(&["log", &format!("{array}_3")]));
    assert_eq!(log.trim(), "sh/0 task 3 is 3", "{log}");
    let log = stdout(&lsf.run(&["log", &handle]));
    assert!(log.contains("1:sh/0 task 1 is 1"), "{log}");
    // Cancel one running element of another array: only it ends.
    let out = lsf.run(&[
        "run",
        "-s",
        "lsf",
        "-cfg",
        &lsf.jobdir(),
        "--array",
        "2",
        "utils.sh",
        "sleep",
        "30",
    ]);
    let handle = stdout(&out).trim().to_string();
    lsf.wait_for(&handle, "RUNNING");
    let status: serde_json::Value =
        serde_json::from_str(&stdout(&lsf.run(&["status", "--json", &handle]))).unwrap();
    let first = status["tasks"][0]["handle"].as_str().unwrap().to_string();
    assert_eq!(lsf.run(&["cancel", &first]).status.code(), Some(0));
    lsf.wait_for(&first, "CANCELLED");
    let second = status["tasks"][1]["handle"].as_str().unwrap();
    assert!(stdout(&lsf.run(&["status", second])).contains("RUNNING"));
    assert_eq!(lsf.run(&["cancel", &handle]).status.code(), Some(0));
    lsf.wait_for(&handle, "CANCELLED");
}

/// `--after` on LSF is LSF's own `-w 'done("<app>-*")'` (with `-ti`): the stand-in `bsub`
/// holds the job until the condition is met; a dependent of a failed job never runs.
#[test]
fn after_is_lsfs_own_dependency_condition() {
    let lsf = Lsf::new();
    let jobdir = lsf.jobdir();
    let run = |args: &[&str]| {
        let mut full = vec!["run", "-s", "lsf", "-cfg", &jobdir];
        full.extend_from_slice(args);
        let out = lsf.run(&full);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let first = run(&["utils.sh", "sh", "-c", "sleep 1; date +%s.%N"]);
    let dry = lsf.run(&[
        "run",
        "--dryrun",
        "-s",
        "lsf",
        "-cfg",
        &jobdir,
        "--after",
        &first,
        "utils.echo",
    ]);
    let app = first.rsplit('/').next().unwrap();
    assert!(
        stdout(&dry).contains(&format!("bsub -w 'done(\"{app}-*\")' -ti ")),
        "{}",
        stdout(&dry)
    );
    let second = run(&["--after", &first, "utils.sh", "sh", "-c", "date +%s.%N"]);
    lsf.wait_for(&second, "SUCCEEDED");
    let time = |h: &str| -> f64 {
        let out = lsf.run(&["log", &format!("{h}/sh/0")]);
        stdout(&out)
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        time(&second) > time(&first),
        "the dependent ran after its dependency"
    );
    let failing = run(&["utils.sh", "sh", "-c", "exit 3"]);
    let never = run(&["--after", &failing, "utils.sh", "sh", "-c", "echo ran"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = stdout(&lsf.run(&["status", &never]));
        if s.contains("FAILED") || s.contains("CANCELLED") {
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = stdout(&lsf.run(&["log", &format!("{never}/sh/0")]));
    assert!(!log.contains("ran"), "it never ran: {log}");
}
