//! LSF: script snapshots, the script run under bash with stand-in `bsub` and `docker` (argument
//! integrity property-tested on hostile strings, `EOF` lines inside args), bhosts choice.

use std::collections::BTreeMap;

use super::*;
use crate::components::test_app as component;
use crate::opts::TypedOpts;
use crate::scheduler::{Facts, NativeRequest};
use crate::schedulers::hostile::Hostile;
use crate::specs::{Mount, Resource, Role};

fn ctx() -> DryRunContext {
    DryRunContext::new("torchx", "fzfjxlmln9", "/work").with_facts(Facts::new(LsfFacts {
        bhosts: Ok("node1 1000 1000\n".into()),
    }))
}

/// The pure render, with the facts the test's context carries.
fn render(app: &AppDef, opts: &LsfOpts, ctx: &DryRunContext) -> Result<LsfBsub> {
    super::render::render(app, opts, ctx, ctx.facts.get::<LsfFacts>())
}

fn opts(v: serde_json::Value) -> LsfOpts {
    let schema = LsfOpts::schema();
    let cfg = schema.resolve(&schema.parse_json(&v).unwrap()).unwrap();
    LsfOpts::from_cfg(&cfg).unwrap()
}

#[test]
fn scripts_snapshot() {
    let single = component("utils.echo", &["--msg", "hi $USER `x`"]);
    insta::assert_snapshot!(
        "lsf_single",
        render(&single, &opts(serde_json::json!({})), &ctx())
            .unwrap()
            .render()
    );
    let ddp = component("dist.ddp", &["-j", "2x2", "--script", "train.py"]);
    let o = opts(
        serde_json::json!({"jobdir": "/shared/jobs", "lsf_queue": "gpu",
        "container_workdir": "/work", "shm_size": "1g"}),
    );
    insta::assert_snapshot!(
        "lsf_ddp_2x2_jobdir_queue",
        render(&ddp, &o, &ctx()).unwrap().render()
    );
    let mut a = Role::new("trainer", "img:1")
        .with_entrypoint("python")
        .with_args(["t.py", "--rank", "${replica_id}"]);
    a.num_replicas = 2;
    a.resource = Resource::new(4, 2, 8192);
    a.port_map = BTreeMap::from([("c10d".to_string(), 29500)]);
    a.mounts = vec![
        Mount::Bind {
            src_path: "/data".into(),
            dst_path: "/data".into(),
            read_only: true,
        },
        Mount::Volume {
            src: "vol".into(),
            dst_path: "/vol".into(),
            read_only: false,
        },
        Mount::Device {
            src_path: "/dev/fuse".into(),
            dst_path: "/dev/fuse".into(),
            permissions: "rwm".into(),
        },
    ];
    let b = Role::new("reader", "img:1").with_entrypoint("reader");
    let multi = AppDef::new("multi", vec![a, b]);
    insta::assert_snapshot!(
        "lsf_multi_role_host_network",
        render(
            &multi,
            &opts(serde_json::json!({"host_network": true})),
            &ctx()
        )
        .unwrap()
        .render()
    );
    insta::assert_snapshot!(
        "lsf_multi_role_ports",
        render(&multi, &opts(serde_json::json!({})), &ctx())
            .unwrap()
            .render()
    );
}

/// Runs the submit script with a stand-in `bsub` that executes its job script (stdin) and a
/// stand-in `docker` that prints each argument NUL-terminated; returns docker's words.
fn docker_words(script: &str) -> Vec<Vec<String>> {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let out = tmp.path().join("out");
    let write = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::os::unix::fs::PermissionsExt::set_mode(
            &mut std::fs::metadata(&p).unwrap().permissions(),
            0o755,
        );
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    write("bsub", "#!/bin/bash\n/bin/sh -s\n");
    std::fs::create_dir(&out).unwrap();
    write(
        "docker",
        &format!(
            "#!/bin/bash\nprintf '%s\\0' \"$@\" > {}/$$\n",
            out.display()
        ),
    );
    let s = tmp.path().join("submit.sh");
    std::fs::write(&s, script).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // A stand-in just written can be "busy" for a moment: a thread of another test that forked
    // while its file was open holds it until that child execs. Try again then.
    for attempt in 0.. {
        let ran = std::process::Command::new("/bin/bash")
            .arg(&s)
            .env("PATH", &path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&ran.stderr);
        if ran.status.success() {
            break;
        }
        assert!(
            attempt < 5 && err.contains("Text file busy"),
            "the submit script failed: {err}"
        );
        for e in std::fs::read_dir(&out).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::read_dir(&out)
        .unwrap()
        .map(|e| {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            let text = text.strip_suffix('\0').unwrap_or(&text).to_string();
            text.split('\0').map(str::to_string).collect()
        })
        .collect()
}

#[test]
fn property_no_argument_or_env_value_can_escape_its_quoting() {
    let mut g = Hostile(0x9E3779B97F4A7C15);
    for round in 0..60 {
        let mut args: Vec<String> = (0..(g.next() % 5)).map(|_| g.string()).collect();
        if round % 7 == 0 {
            // A heredoc delimiter on a line of its own must not end the job script.
            args.push("x\nTORCHX_EOF\necho pwned".into());
        }
        let v = g.string();
        let mut r = Role::new("r", "img")
            .with_entrypoint("prog")
            .with_args(args.clone());
        r.env.insert("V".into(), v.clone());
        let app = AppDef::new("a", vec![r]);
        let job = render(&app, &opts(serde_json::json!({})), &ctx()).unwrap();
        let words = docker_words(&job.script);
        assert_eq!(words.len(), 1, "round {round}: {words:?}\n{}", job.script);
        let w = &words[0];
        let image = w.iter().position(|x| x == "img").unwrap();
        // What the args and env are after the macros (TorchX's `$$` → `$` included).
        let expected = crate::specs::MacroValues {
            img_root: String::new(),
            app_id: job.app_id.clone(),
            replica_id: "0".into(),
            rank0_env: "TORCHX_RANK0_HOST".into(),
        }
        .apply(&app.roles[0]);
        assert_eq!(
            &w[image + 1..],
            expected.args.as_slice(),
            "round {round}\n{}",
            job.script
        );
        assert!(
            w.contains(&format!("V={}", expected.env["V"])),
            "round {round}: {w:?}"
        );
    }
}

#[test]
fn rank0_host_needs_enough_cpus_and_gpus() {
    let out = "node1  4  0\nnode2 16   -\n  node3   64 8\n\nbad\n";
    assert_eq!(render::pick_rank0_host(out, 2, 0).unwrap(), "node1");
    assert_eq!(render::pick_rank0_host(out, 8, 0).unwrap(), "node2");
    assert_eq!(render::pick_rank0_host(out, 8, 2).unwrap(), "node3");
    let e = render::pick_rank0_host(out, 128, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot find a host with 128 CPUs"), "{e}");
    assert!(render::pick_rank0_host("", 1, 0).is_err());
}

#[test]
fn names_are_clean() {
    assert_eq!(render::cleanup_str("-My_App.1"), "my_app1");
}

#[test]
fn shm_size_must_be_a_size() {
    let app = component("utils.echo", &[]);
    for ok in ["64m", "1g", "1073741824", "512MB", "2.5g", ""] {
        let o = opts(serde_json::json!({ "shm_size": ok }));
        assert!(render(&app, &o, &ctx()).is_ok(), "{ok}");
    }
    for bad in ["64m\nrm -rf /", "lots", "-1g", "1 g", "1g;"] {
        let o = opts(serde_json::json!({ "shm_size": bad }));
        let err = render(&app, &o, &ctx()).unwrap_err().to_string();
        assert!(
            err.contains("shm_size") && err.contains("not a size"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn recovery_maps_to_run_limit_warning_requeue_and_rerun() {
    let mut r = Role::new("trainer", "img:1").with_entrypoint("python");
    r.time_limit = Some(90 * 60);
    r.checkpoint_signal = Some("USR1@90".parse().unwrap());
    r.mounts = vec![Mount::Bind {
        src_path: "/shared/ckpt".into(),
        dst_path: "/ckpt".into(),
        read_only: false,
    }];
    r.checkpoint_dir = Some("/ckpt".into());
    let app = AppDef::new("rec", vec![r.clone()]);
    let script = render(&app, &opts(serde_json::json!({})), &ctx())
        .unwrap()
        .render();
    insta::assert_snapshot!("lsf_recovery", script);
    assert!(script.contains("-W 90 -wa USR1 -wt 2 -Q 75 -r"), "{script}");
    r.max_requeues = Some(5);
    let err = render(
        &AppDef::new("rec", vec![r]),
        &opts(serde_json::json!({})),
        &ctx(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Unsupported);
    assert!(err.to_string().contains("MAX_JOB_REQUEUE"), "{err}");
}

#[test]
fn after_waits_natively_for_lsf_apps_only() {
    let app = component("utils.echo", &["--msg", "hi"]);
    let after = |deps: &[&str]| ctx().with_after(deps.iter().map(|d| d.parse().unwrap()).collect());
    let script = render(
        &app,
        &opts(serde_json::json!({})),
        &after(&[
            "lsf://torchx/prep-abc",
            "lsf://torchx/train-x1:notok",
            "lsf://t/e-2:any",
        ]),
    )
    .unwrap()
    .render();
    assert!(
        script.contains(
            "bsub -w 'done(\"prep-abc-*\") && exit(\"train-x1-*\") && ended(\"e-2-*\")' -ti -P "
        ),
        "{script}"
    );
    for other in ["slurm://torchx/12", "lsf://torchx/grp_3"] {
        let err = render(&app, &opts(serde_json::json!({})), &after(&[other])).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Unsupported, "{other}");
        assert!(
            err.to_string().contains("waits natively only for LSF apps"),
            "{err}"
        );
    }
}
