//! Slurm: rendered scripts (snapshots), the script run under bash with stand-in `srun` and
//! `scontrol` (argument integrity, property-tested on hostile strings; requeue), and the
//! squeue/sacct parsers on fixtures from Slurm 22.05 (captured) to 25.05 (documented shapes).

use std::collections::BTreeMap;
use std::path::Path;

use super::render::SlurmFacts;
use super::*;
use crate::components::test_app as component;
use crate::opts::{Cfg, TypedOpts};
use crate::scheduler::DryRunContext;
use crate::scheduler::Facts;
use crate::scheduler::NativeRequest;
use crate::schedulers::hostile::Hostile;
use crate::specs::{AppDef, Resource, Role};

fn ctx(version: &str) -> DryRunContext {
    DryRunContext::new("torchx", "abc", "/work").with_facts(Facts::new(SlurmFacts {
        version: Some(format!("slurm {version}")),
        partition_mem_mb: None,
    }))
}

/// The pure render, with the facts the test's context carries.
fn render(app: &AppDef, opts: &SlurmOpts, ctx: &DryRunContext) -> Result<SbatchRequest> {
    super::render::render(app, opts, ctx, ctx.facts.get::<SlurmFacts>())
}

fn opts() -> SlurmOpts {
    SlurmOpts::from_cfg(&Cfg::new()).unwrap()
}

fn script(app: &AppDef, opts: &SlurmOpts, ctx: &DryRunContext) -> String {
    render(app, opts, ctx).unwrap().materialize()
}

#[test]
fn single_role_snapshot() {
    let app = component("utils.echo", &["--msg", "hello"]);
    let mut o = opts();
    o.partition = Some("debug".into());
    o.time = Some("1:00".into());
    o.comment = Some("my job".into());
    insta::assert_snapshot!(render(&app, &o, &ctx("22.05.8")).unwrap().render());
}

#[test]
fn ddp_2x2_snapshot() {
    let app = component(
        "dist.ddp",
        &["-j", "2x2", "--script", "train.py", "--", "--lr", "0.1"],
    );
    insta::assert_snapshot!(script(&app, &opts(), &ctx("23.11.4")));
}

/// `workspace_type=docker` (the nightly's): every replica's `srun` runs in its role's image
/// through the container plugin, and the image is no directory to run in; `dir` (the default)
/// renders exactly what no option does; another builder is refused by name.
#[test]
fn the_docker_workspace_builder_runs_each_replica_in_its_image() {
    let app = component(
        "dist.ddp",
        &[
            "-j",
            "2x1",
            "--image",
            "registry:5000/team/app:abc",
            "--script",
            "train.py",
        ],
    );
    let with = |t: Option<&str>| {
        let mut o = opts();
        o.workspace_type = t.map(str::to_string);
        render(&app, &o, &ctx("24.11")).map(|r| r.materialize())
    };
    let docker = with(Some("docker")).unwrap();
    assert_eq!(
        docker
            .matches("--container-image=registry:5000/team/app:abc")
            .count(),
        2,
        "each of the two replicas' srun: {docker}"
    );
    assert!(!docker.contains("img_root"));
    assert_eq!(with(Some("dir")).unwrap(), with(None).unwrap());
    assert!(!with(None).unwrap().contains("--container-image"));
    let err = with(Some("podman")).unwrap_err().to_string();
    assert!(
        err.contains("workspace_type: `podman` is not a workspace builder of slurm"),
        "{err}"
    );
}

#[test]
fn multi_role_resources_and_gpus_by_version() {
    let mut a = Role::new("trainer", "/img")
        .with_entrypoint("python")
        .with_args([
            "${img_root}/t.py",
            "--rank",
            "${replica_id}",
            "--master",
            "$${${rank0_env}:=localhost}",
        ]);
    a.num_replicas = 2;
    a.resource = Resource::new(2, 3, 10);
    a.max_retries = 2;
    let mut b = Role::new("reader", "/img").with_entrypoint("reader");
    b.resource = Resource::new(1, 0, 1024);
    b.max_retries = 3;
    let app = AppDef::new("mixed", vec![a, b]);
    let mut o = opts();
    o.qos = Some("high".into());
    o.account = Some("ml".into());
    o.exclusive = true;
    let old = script(&app, &o, &ctx("24.05.8"));
    assert!(old.contains("--gpus-per-task=3 --ntasks=1"), "{old}");
    assert!(old.contains("export TORCHX_MAX_RETRIES=2"));
    let new = script(&app, &o, &ctx("24.11.0"));
    assert!(new.contains("--gpus-per-node=3") && !new.contains("gpus-per-task"));
    insta::assert_snapshot!(old);
    // A pinned version wins over the probe.
    o.slurm_version = Some("25.05".into());
    assert!(script(&app, &o, &ctx("22.05.8")).contains("--gpus-per-node=3"));
    // Partitions with <= 1000 MB get no --mem.
    let small = ctx("22.05.8").with_facts(Facts::new(SlurmFacts {
        version: Some("slurm 22.05.8".into()),
        partition_mem_mb: Some(1000),
    }));
    assert!(!script(&app, &opts(), &small).contains("--mem="));
}

#[test]
fn special_characters_snapshot() {
    let mut r = Role::new("weird", "/img")
        .with_entrypoint("echo")
        .with_args([
            "$HOME",
            "it's \"quoted\"",
            "two words",
            "line1\nline2",
            "a;b",
            "`whoami`",
            "id=${app_id}!",
        ]);
    r.env.insert("COMMA".into(), "a,b".into());
    r.env.insert("SPACE".into(), "a b $HOME".into());
    insta::assert_snapshot!(script(
        &AppDef::new("weird", vec![r]),
        &opts(),
        &ctx("22.05.8")
    ));
}

#[test]
fn bad_options_and_names_are_rejected() {
    let app = component("utils.echo", &[]);
    let mut o = opts();
    o.comment = Some("x\nrm -rf ~".into());
    let e = render(&app, &o, &ctx("22.05")).unwrap_err();
    assert!(e.to_string().contains("slurm run option `comment`"), "{e}");
    let mut o = opts();
    o.partition = Some("a b".into());
    assert!(render(&app, &o, &ctx("22.05")).is_err());
    let mut o = opts();
    o.slurm_version = Some("new".into());
    let e = render(&app, &o, &ctx("22.05")).unwrap_err();
    assert!(e.to_string().contains("is not a version like 24.11"), "{e}");
    let bad_role = AppDef::new("x", vec![Role::new("a b", "i").with_entrypoint("e")]);
    let e = render(&bad_role, &opts(), &ctx("22.05")).unwrap_err();
    assert!(e.to_string().contains("role name `a b`"), "{e}");
    let mut bad_env = Role::new("a", "i").with_entrypoint("e");
    bad_env.env.insert("A-B".into(), "1".into());
    let e = render(&AppDef::new("x", vec![bad_env]), &opts(), &ctx("22.05")).unwrap_err();
    assert!(e.to_string().contains("env var name `A-B`"), "{e}");
}

#[test]
fn versions() {
    assert_eq!(parse_version("slurm 24.11.1"), Some((24, 11)));
    assert_eq!(parse_version("slurm-wlm 22.05.8"), Some((22, 5)));
    assert_eq!(parse_version("23.02"), Some((23, 2)));
    assert_eq!(parse_version("garbage"), None);
}

/// Runs the rendered script under bash with a stand-in `srun` that records its argv (one
/// NUL-terminated word each) and exits `srun_exit`, and a stand-in `scontrol`.
fn run_script(script: &str, srun_exit: i32, restart_count: u32) -> (Vec<String>, String, i32) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe(
        "srun",
        &format!("printf '%s\\0' \"$@\" > \"$OUT/srun.args\"\nexit {srun_exit}"),
    );
    exe("scontrol", "echo \"$@\" >> \"$OUT/scontrol.log\"");
    let path = tmp.path().join("job.sh");
    std::fs::write(&path, script).unwrap();
    let status = std::process::Command::new("bash")
        .arg(&path)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("OUT", tmp.path())
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_RESTART_COUNT", restart_count.to_string())
        .current_dir(tmp.path())
        .output()
        .unwrap()
        .status;
    let args = std::fs::read(tmp.path().join("srun.args")).unwrap_or_default();
    let args = String::from_utf8(args)
        .unwrap()
        .split_terminator('\0')
        .map(String::from)
        .collect();
    let scontrol = std::fs::read_to_string(tmp.path().join("scontrol.log")).unwrap_or_default();
    (args, scontrol, status.code().unwrap_or(-1))
}

fn srun_words(args: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
    let mut w: Vec<String> = [
        "--output=slurm-4242-r-0.out",
        "--error=slurm-4242-r-0.err",
        "--wait=60",
        "--kill-on-bad-exit=1",
    ]
    .map(String::from)
    .to_vec();
    let kvs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !kvs.is_empty() {
        w.push(format!("--export=ALL,{}", kvs.join(",")));
    }
    w.push("prog".into());
    w.extend(args.iter().map(|a| a.replace("${app_id}", "4242")));
    w
}

#[test]
fn script_under_bash_requeues_on_failure_while_retries_remain() {
    let mut r = Role::new("r", "i").with_entrypoint("prog").with_args(["x"]);
    r.max_retries = 2;
    let s = script(&AppDef::new("a", vec![r]), &opts(), &ctx("22.05"));
    let (args, scontrol, code) = run_script(&s, 0, 0);
    assert_eq!((scontrol.as_str(), code), ("", 0));
    assert_eq!(args, srun_words(&["x".into()], &BTreeMap::new()));
    let (_, scontrol, code) = run_script(&s, 3, 1);
    assert_eq!((scontrol.as_str(), code), ("requeue 4242\n", 3));
    let (_, scontrol, code) = run_script(&s, 3, 2);
    assert_eq!((scontrol.as_str(), code), ("", 3), "retries exhausted");
}

#[test]
fn property_no_argument_or_env_value_can_escape_its_quoting() {
    let mut g = Hostile(0x2545F4914F6CDD1D);
    for round in 0..60 {
        let args: Vec<String> = (0..(g.next() % 5)).map(|_| g.string()).collect();
        let mut env = crate::specs::Env::new();
        // --export values: no commas or newlines (those go through `env`, checked below).
        let v = g.string().replace([',', '\n'], "_");
        env.insert("V".to_string(), v);
        let mut r = Role::new("r", "i")
            .with_entrypoint("prog")
            .with_args(args.clone());
        r.env = env.clone();
        let s = script(&AppDef::new("a", vec![r]), &opts(), &ctx("22.05"));
        let (got, _, code) = run_script(&s, 0, 0);
        let env: BTreeMap<String, String> = env
            .into_iter()
            .map(|(k, v)| (k, v.replace("${app_id}", "4242")))
            .collect();
        assert_eq!(got, srun_words(&args, &env), "round {round}: {args:?}\n{s}");
        assert_eq!(code, 0);
    }
}

#[test]
fn env_values_with_commas_or_newlines_arrive_intact_through_env() {
    let mut r = Role::new("r", "i").with_entrypoint("prog");
    r.env.insert("A".into(), "1".into());
    r.env.insert("B".into(), "x,y\nz".into());
    let s = script(&AppDef::new("a", vec![r]), &opts(), &ctx("22.05"));
    let (got, _, _) = run_script(&s, 0, 0);
    assert_eq!(
        &got[4..],
        ["--export=ALL,A=1", "env", "B=x,y\nz", "prog"].map(String::from)
    );
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/schedulers/slurm/fixtures")
            .join(name),
    )
    .unwrap()
}

#[test]
fn squeue_22_05_captured_running_and_failed_hetjob() {
    // Captured from the local 22.05 cluster: a 2-component hetjob (job 1, components 1 and 2);
    // 22.05 ignores `-j`, so other jobs may be listed and must be filtered out.
    let c = parse_squeue(&fixture("squeue-22.05-running.json"), job(1)).unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].role.as_str(), c[0].replica, c[0].state),
        ("a", 0, AppState::Running)
    );
    assert_eq!((c[1].role.as_str(), c[1].hostname.as_str()), ("b", "n2"));
    // TorchX's describe reads a role's image and entrypoint from these.
    assert_eq!(
        (c[0].workdir.as_str(), c[0].command.as_str()),
        ("/tmp/sl", "/tmp/sl/hj.sh")
    );
    let c = parse_squeue(&fixture("squeue-22.05-failed.json"), job(1)).unwrap();
    assert_eq!(aggregate(c.iter().map(|c| c.state)), AppState::Failed);
    assert_eq!(c[1].exit_code, Some(3), "raw wait status 768 = exit 3");
    assert!(parse_squeue(&fixture("squeue-22.05-running.json"), job(7))
        .unwrap()
        .is_empty());
}

#[test]
fn sacct_22_05_captured() {
    let c = parse_sacct_parsable(&fixture("sacct-22.05.txt"), job(1));
    assert_eq!(c.len(), 2, "steps are skipped: {c:?}");
    assert_eq!(
        (
            c[0].slurm_state.as_str(),
            c[0].exit_code,
            c[0].hostname.as_str()
        ),
        ("FAILED", Some(3), "n1")
    );
    let c = parse_sacct_json(&fixture("sacct-22.05.json"), job(1)).unwrap();
    assert_eq!(
        c.iter().map(|c| c.state).collect::<Vec<_>>(),
        [AppState::Failed; 2]
    );
}

#[test]
fn squeue_23_11_24_11_25_05_shapes() {
    let c = parse_squeue(&fixture("squeue-23.11.json"), job(101)).unwrap();
    assert_eq!(c.len(), 2, "job 999 is not part of 101");
    assert_eq!(
        (c[1].hostname.as_str(), c[1].restarts, c[1].state),
        ("node-2", 1, AppState::Running)
    );
    let c = parse_squeue(&fixture("squeue-24.11.json"), job(201)).unwrap();
    assert_eq!(
        (c[0].state, c[0].hostname.as_str()),
        (AppState::Succeeded, "gpu-3")
    );
    assert_eq!(
        (c[1].role.as_str(), c[1].state, c[1].exit_code),
        ("reader", AppState::Failed, Some(3))
    );
    assert_eq!(aggregate(c.iter().map(|c| c.state)), AppState::Failed);
    let c = parse_squeue(&fixture("squeue-25.05.json"), job(301)).unwrap();
    assert_eq!(
        (c[0].state, c[0].signal, c[0].restarts),
        (AppState::Pending, Some(9), 2)
    );
    assert_eq!(c[0].hostname, "", "pending jobs have job_resources = null");
}

#[test]
fn sacct_23_11_shape_and_placeholders() {
    let c = parse_sacct_json(&fixture("sacct-23.11.json"), job(401)).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].state, c[0].signal, c[0].start),
        (AppState::Cancelled, Some(15), Some(1700000010.0))
    );
    // The "allocation" placeholder sacct shows before its record is final is not a replica.
    assert!(parse_sacct_json(&fixture("sacct-23.11.json"), job(400))
        .unwrap()
        .is_empty());
}

#[test]
fn list_groups_het_components() {
    let jobs = parse_list(&fixture("squeue-24.11.json"), "squeue").unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (
            jobs[0].job_id.as_str(),
            jobs[0].name.as_str(),
            jobs[0].state
        ),
        ("201", "trainer", AppState::Failed)
    );
    let jobs = parse_list(&fixture("sacct-22.05.json"), "sacct").unwrap();
    assert_eq!(jobs.len(), 1);
}

#[test]
fn sacct_list_parsable_captured() {
    let text = "JobID|JobName|State|Submit|End\n1+0|a-0|FAILED|1795272336|1795272339\n\
                1+1|b-0|FAILED|1795272336|1795272339\n3|echo-0|COMPLETED|1795272437|1795272437\n\
                5|sh-0|CANCELLED by 0|1795272446|1795272448\n8|x-0|RUNNING|1795272446|Unknown\n";
    let jobs = parse_list_parsable(text);
    let got: Vec<(&str, &str, AppState, Option<f64>)> = jobs
        .iter()
        .map(|j| (j.job_id.as_str(), j.name.as_str(), j.state, j.end))
        .collect();
    assert_eq!(
        got,
        [
            ("1", "a", AppState::Failed, Some(1795272339.0)),
            ("3", "echo", AppState::Succeeded, Some(1795272437.0)),
            ("5", "sh", AppState::Cancelled, Some(1795272448.0)),
            ("8", "x", AppState::Running, None),
        ]
    );
}

#[test]
fn state_mapping_is_torchx_s() {
    for (s, want) in [
        ("BOOT_FAIL", AppState::Failed),
        ("CANCELLED", AppState::Cancelled),
        ("COMPLETED", AppState::Succeeded),
        ("OUT_OF_MEMORY", AppState::Failed),
        ("PENDING", AppState::Pending),
        ("REQUEUED", AppState::Pending),
        ("RUNNING", AppState::Running),
        ("TIMEOUT", AppState::Failed),
        ("WEIRD", AppState::Unknown),
    ] {
        assert_eq!(app_state(s), want, "{s}");
    }
    // Every state TorchX's `SLURM_STATES` (Python) lists is mapped.
    for s in super::state::KNOWN_STATES {
        assert_ne!(app_state(s), AppState::Unknown, "{s}");
    }
}

fn recovery_role() -> Role {
    recovery_role_named("r")
}

fn recovery_role_named(name: &str) -> Role {
    let mut r = Role::new(name, "i")
        .with_entrypoint("prog")
        .with_args(["x"]);
    r.max_retries = 1;
    r.time_limit = Some(90);
    r.max_requeues = Some(2);
    r
}

#[test]
fn recovery_snapshot() {
    let app = AppDef::new("a", vec![recovery_role(), recovery_role_named("s")]);
    insta::assert_snapshot!(script(&app, &opts(), &ctx("22.05")));
}

#[test]
fn recovery_conflicts_are_refused() {
    let mut other = recovery_role_named("s");
    other.max_requeues = Some(7);
    let err = render(
        &AppDef::new("a", vec![recovery_role(), other]),
        &opts(),
        &ctx("22.05"),
    )
    .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("`r` and `s`"), "{err}");
    let mut o = opts();
    o.time = Some("10".into());
    let err = render(&AppDef::new("a", vec![recovery_role()]), &o, &ctx("22.05")).unwrap_err();
    assert!(err.to_string().contains("`time`"), "{err}");
}

/// The recovery script under bash with stand-in `srun` and `scontrol`: given the attempts
/// recorded so far and how srun exits, what it records, whether it requeues, how it exits.
#[test]
fn recovery_script_under_bash_keeps_failures_and_requeues_apart() {
    let s = script(
        &AppDef::new("a", vec![recovery_role()]),
        &opts(),
        &ctx("22.05"),
    );
    // `tasks`: how each task's command exits (`srun` runs its words once per task, through
    // the script's exit-recording wrapper); `srun_exit`: how srun itself exits; `state`: what
    // the controller says of the job (`scontrol show job`) once srun is back.
    let run_tasks = |before: &str, tasks: &[i32], srun_exit: i32, state: &str| {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(tmp.path().join("torchx-4242")).unwrap();
        std::fs::write(tmp.path().join("torchx-4242/attempts"), before).unwrap();
        std::fs::create_dir(&bin).unwrap();
        let tasks: Vec<String> = tasks.iter().map(i32::to_string).collect();
        for (name, body) in [
            (
                "srun",
                format!(
                    "echo \"$TORCHX_ATTEMPT $TORCHX_CHECKPOINT_DIR\" > \"$OUT/env\"\n\
                     while [ \"${{1#--}}\" != \"$1\" ]; do shift; done\n\
                     for code in {}; do PROG_EXIT=$code \"$@\"; done\n\
                     exit {srun_exit}",
                    tasks.join(" ")
                ),
            ),
            ("prog", "exit $PROG_EXIT".to_string()),
            (
                "scontrol",
                format!(
                    "if [ \"$1\" = show ]; then echo \"JobId=4242 JobName=r-0\"; \
                     echo \"   JobState={state} Reason=None\"; \
                     else echo \"$@\" >> \"$OUT/scontrol.log\"; fi"
                ),
            ),
        ] {
            let p = bin.join(name);
            std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(tmp.path().join("job.sh"), &s).unwrap();
        let restarts = before.lines().filter(|l| l.starts_with("start")).count();
        let out = std::process::Command::new("bash")
            .arg("job.sh")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("OUT", tmp.path())
            .env("SLURM_JOB_ID", "4242")
            .env("SLURM_RESTART_COUNT", restarts.to_string())
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let env = std::fs::read_to_string(tmp.path().join("env")).unwrap();
        let dir = tmp.path().join("torchx-4242/checkpoint");
        assert_eq!(env.trim(), format!("{restarts} {}", dir.display()));
        assert!(dir.is_dir());
        let after = std::fs::read_to_string(tmp.path().join("torchx-4242/attempts")).unwrap();
        let ends: Vec<String> = after
            .lines()
            .filter(|l| l.starts_with("end"))
            .map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                format!("{} {} {}", w[1], w[3], w[4])
            })
            .collect();
        let scontrol = std::fs::read_to_string(tmp.path().join("scontrol.log")).unwrap_or_default();
        (ends.join(","), scontrol, out.status.code().unwrap_or(-1))
    };
    let run_in = |before: &str, exit: i32, state: &str| run_tasks(before, &[exit], exit, state);
    let run = |before: &str, srun_exit: i32| run_in(before, srun_exit, "RUNNING");
    let requeue = "requeue 4242\n";
    // First attempt: success, a requeue request, a failure with one retry left.
    assert_eq!(run("", 0), ("0 0 succeeded".into(), "".into(), 0));
    assert_eq!(run("", 75), ("0 75 requeued".into(), requeue.into(), 75));
    assert_eq!(run("", 3), ("0 3 failed".into(), requeue.into(), 3));
    // One task asks for a requeue, srun stops the other and returns its signal: requeued.
    assert_eq!(
        run_tasks("", &[75, 143], 143, "RUNNING"),
        ("0 75 requeued".into(), requeue.into(), 75)
    );
    assert_eq!(
        run_tasks("", &[1, 143], 143, "RUNNING"),
        ("0 143 failed".into(), requeue.into(), 143)
    );
    // Requeues do not spend the retry budget; failures do.
    let two_requeues = "start 0 1\nend 0 2 75 requeued\nstart 1 3\nend 1 4 - preempted\n";
    assert_eq!(
        run(two_requeues, 3).1,
        requeue,
        "a failure after requeues still has its retry"
    );
    assert_eq!(run(two_requeues, 75).1, "", "max_requeues 2 spent");
    let one_failure = "start 0 1\nend 0 2 3 failed\n";
    assert_eq!(run(one_failure, 3).1, "", "max_retries 1 spent");
    assert_eq!(run(one_failure, 75).1, requeue);
    // An attempt stopped from outside before it could record its end was preempted.
    let (ends, _, _) = run("start 0 1\n", 0);
    assert!(ends.starts_with("0 - preempted,1 0 succeeded"), "{ends}");
    // One stopped from outside while it could: told by the job's state, not requeued by the
    // script (whoever stopped it decides), and no retry spent.
    for (state, reason) in [
        ("REQUEUED", "preempted"),
        ("PREEMPTED", "preempted"),
        ("COMPLETING", "preempted"),
        ("CANCELLED", "cancelled"),
        ("NODE_FAIL", "node_failure"),
    ] {
        assert_eq!(
            run_in("", 1, state),
            (format!("0 1 {reason}"), "".into(), 1),
            "{state}"
        );
    }
    // The time limit is a failure: requeued while retries remain.
    assert_eq!(
        run_in("", 143, "TIMEOUT"),
        ("0 143 timeout".into(), requeue.into(), 143)
    );
    assert_eq!(
        run_in(one_failure, 143, "TIMEOUT").1,
        "",
        "max_retries 1 spent"
    );
}

#[test]
fn attempts_file_parses_and_skips_what_it_does_not_understand() {
    let text = "start 0 10\nend 0 20 75 requeued\nstart 1 30\nend 1 40 - preempted\ngarbage\nstart 2 50\nend 2";
    let a = state::parse_attempts(text);
    assert_eq!(a.len(), 3);
    assert_eq!(
        (
            a[0].attempt,
            a[0].started,
            a[0].ended,
            a[0].exit_code,
            a[0].reason
        ),
        (
            0,
            Some(10.0),
            Some(20.0),
            Some(75),
            Some(crate::specs::EndReason::Requeued)
        )
    );
    assert_eq!(
        (a[1].exit_code, a[1].reason),
        (None, Some(crate::specs::EndReason::Preempted))
    );
    assert_eq!((a[2].ended, a[2].reason), (None, None), "still running");
}

fn job(id: i64) -> JobRef {
    JobRef {
        job: id,
        task: None,
    }
}

fn task(array: i64, task: u32) -> JobRef {
    JobRef {
        job: array,
        task: Some(task),
    }
}

#[test]
fn job_refs_and_task_lists() {
    assert_eq!("650_3".parse(), Ok(task(650, 3)));
    assert_eq!("650".parse(), Ok(job(650)));
    assert_eq!(task(650, 3).to_string(), "650_3");
    for bad in ["650_", "_3", "0", "a_1", "650_-1", "650_1_2", ""] {
        assert!(bad.parse::<JobRef>().is_err(), "{bad}");
    }
    for (list, t, want) in [
        ("1-3%1", 2, true),
        ("1-3%1", 4, false),
        ("1,3,5-9:2", 7, true),
        ("1,3,5-9:2", 6, false),
        ("4", 4, true),
        ("", 0, false),
    ] {
        assert_eq!(state::task_list_contains(list, t), want, "{list} {t}");
    }
}

#[test]
fn array_tasks_are_told_apart_in_squeue_and_sacct() {
    // Captured on 22.05: `--array=0-3%1`, task 0 running (its own job 651), 1-3 pending as the
    // array's entry (job 650, `1-3%1`).
    let squeue = fixture("squeue-22.05-array.json");
    let c = parse_squeue(&squeue, task(650, 0)).unwrap();
    assert_eq!(
        (c.len(), c[0].state, c[0].role.as_str()),
        (1, AppState::Running, "echo")
    );
    let c = parse_squeue(&squeue, task(650, 2)).unwrap();
    assert_eq!((c.len(), c[0].state), (1, AppState::Pending));
    assert!(parse_squeue(&squeue, task(650, 9)).unwrap().is_empty());
    assert!(parse_squeue(&squeue, task(651, 0)).unwrap().is_empty());
    // Accounting, a moment later: task 1 runs, but the pending entry still lists it.
    let sacct = fixture("sacct-22.05-array.txt");
    let states = |t| {
        parse_sacct_parsable(&sacct, task(650, t))
            .iter()
            .map(|c| c.state)
            .collect::<Vec<_>>()
    };
    assert_eq!(states(0), [AppState::Succeeded]);
    assert_eq!(states(1), [AppState::Running], "its own line wins");
    assert_eq!(states(3), [AppState::Pending]);
    assert_eq!(states(4), []);
}

fn array_of(apps: &[AppDef], cap: Option<u32>) -> ArrayRequest<SbatchRequest> {
    let tasks: Vec<ArrayTask<'_>> = apps
        .iter()
        .enumerate()
        .map(|(i, app)| ArrayTask {
            index: i as u32 * 2,
            app,
        })
        .collect();
    let s = SlurmScheduler::new("/state".into());
    let ctx = ctx("22.05");
    let facts = ctx.facts.get::<SlurmFacts>();
    Backend::render_array(&s, &tasks, cap, &opts(), &ctx, facts).unwrap()
}

#[test]
fn an_array_is_one_sbatch_whose_tasks_pick_their_command() {
    let apps: Vec<AppDef> = ["a b", "it's"]
        .iter()
        .map(|m| component("utils.echo", &["--msg", m]))
        .collect();
    let ArrayRequest::Native(req) = array_of(&apps, Some(2)) else {
        panic!("not native")
    };
    assert_eq!(req.cmd.last().unwrap(), "--array=0-2:2%2");
    insta::assert_snapshot!(req.materialize());
    // With the recovery contract: the attempts live in the task's own torchx directory.
    let mut apps = apps;
    for app in &mut apps {
        app.roles[0].time_limit = Some(90);
        app.roles[0].max_requeues = Some(2);
    }
    let ArrayRequest::Native(req) = array_of(&apps, None) else {
        panic!("not native")
    };
    let script = req.materialize();
    assert!(
        script.contains("torchx_dir=\"$PWD/torchx-$torchx_app_id\""),
        "{script}"
    );
    assert!(script.contains("srun \"${torchx_srun[@]}\" &"), "{script}");
    assert!(script.contains("--time=2"), "{script}");
}

#[test]
fn heterogeneous_or_unlike_tasks_go_one_sbatch_each() {
    let ddp = component("dist.ddp", &["-j", "2x1", "--script", "t.py"]);
    let ArrayRequest::PerTask(why) = array_of(&[ddp.clone(), ddp], None) else {
        panic!("native")
    };
    assert!(why.contains("heterogeneous job of 2 replicas"), "{why}");
    let small = component("utils.echo", &["--msg", "x"]);
    let mut big = small.clone();
    big.roles[0].resource.cpu = 8;
    let ArrayRequest::PerTask(why) = array_of(&[small, big], None) else {
        panic!("native")
    };
    assert!(why.contains("task 2's job differs"), "{why}");
}

#[test]
fn an_array_too_big_for_one_script_goes_one_sbatch_each() {
    let big = "x".repeat(3 * 1024 * 1024);
    let apps: Vec<AppDef> = (0..2)
        .map(|_| component("utils.echo", &["--msg", &big]))
        .collect();
    let ArrayRequest::PerTask(why) = array_of(&apps, None) else {
        panic!("native")
    };
    assert!(why.contains("max_script_size"), "{why}");
}

#[test]
fn test_only_says_when_a_job_would_start() {
    assert_eq!(
        state::test_only_start(
            "Job 47 to start at 2026-11-27T03:50:12 using 2 processors on nodes n1 in partition debug"
        )
        .as_deref(),
        Some("2026-11-27T03:50:12")
    );
    assert_eq!(
        state::test_only_start("Job 4 to start at 1795749167 using 1 processors").as_deref(),
        Some("2026-11-27 03:12:47Z")
    );
    assert_eq!(
        state::test_only_start("error: Invalid partition name specified"),
        None
    );
}
