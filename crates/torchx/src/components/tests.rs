use super::*;
use crate::specs::Resource;

fn build(name: &str, args: &[&str]) -> Result<AppDef> {
    let ComponentRef::Component(c) = find_component(name)? else {
        panic!("not a component")
    };
    let env = ComponentEnv {
        loglevel: None,
        home: Some("/home/u".into()),
        named_resources: BTreeMap::new(),
    };
    c.materialize(args, &BTreeMap::new(), &env)
        .map(|a| a.expect("not help"))
}

fn cmd(app: &AppDef) -> &str {
    &app.roles[0].args[1]
}

#[test]
fn twelve_builtins() {
    let names = builtin_names();
    assert_eq!(
        names,
        [
            "dist.ddp",
            "dist.spmd",
            "dist.torchrun",
            "metrics.tensorboard",
            "serve.torchserve",
            "utils.binary",
            "utils.booth",
            "utils.copy",
            "utils.echo",
            "utils.python",
            "utils.sh",
            "utils.touch"
        ]
    );
}

#[test]
fn ddp_2x2() {
    let app = build(
        "dist.ddp",
        &[
            "-j", "2x2", "--script", "main.py", "--gpu", "1", "--", "--lr", "0.1",
        ],
    )
    .unwrap();
    assert_eq!(cmd(&app), "torchrun --rdzv_backend c10d --rdzv_endpoint $${${rank0_env}:=localhost}:29500 --rdzv_id '${app_id}' --nnodes 2 --nproc_per_node 2 --tee 3 --role '' main.py --lr 0.1");
    let r = &app.roles[0];
    assert_eq!(
        (
            app.name.as_str(),
            r.name.as_str(),
            r.entrypoint.as_str(),
            r.num_replicas,
            r.min_replicas
        ),
        ("main", "main", "bash", 2, Some(2))
    );
    assert_eq!(r.resource, Resource::new(2, 1, 1024));
    assert_eq!(r.port_map["c10d"], 29500);
    assert_eq!(
        r.env["TORCHX_TRACKING_EXPERIMENT_NAME"],
        "default-experiment"
    );
    assert_eq!(r.env["LOGLEVEL"], "WARNING");
    insta::assert_yaml_snapshot!(app);
}

/// `--rdzv_conf` is checked before any node starts: key=value items, whole-number timeouts
/// (torchrun would fail on every node at its start); an unknown key only warns (torchrun
/// ignores it: not an error, but a misspelt timeout is lost).
#[test]
fn rdzv_conf_is_checked_before_any_node_starts() {
    let torchrun = |conf: &str| {
        build(
            "dist.torchrun",
            &["-j", "2x1", "--rdzv_conf", conf, "--script", "t.py"],
        )
    };
    let app = torchrun("join_timeout=600,close_timeout=60,is_host=false").unwrap();
    assert!(
        cmd(&app).contains("--rdzv_conf join_timeout=600,close_timeout=60,is_host=false"),
        "{}",
        cmd(&app)
    );
    assert!(
        torchrun("join_timout=600").is_ok(),
        "an unknown key warns only"
    );
    let err = torchrun("join_timeout=10m").unwrap_err().to_string();
    assert!(
        err.contains("join_timeout=10m: torchrun reads join_timeout as a whole number"),
        "{err}"
    );
    let err = torchrun("join_timeout=600,oops").unwrap_err().to_string();
    assert!(err.contains("`oops` is not key=value"), "{err}");
    assert!(torchrun("=5").is_err());
}

#[test]
fn ddp_1x4_static() {
    let app = build(
        "dist.ddp",
        &[
            "-j",
            "1x4",
            "--rdzv_backend",
            "static",
            "--rdzv_conf",
            "timeout=600",
            "-m",
            "foo.main",
            "--",
            "--x",
            "1",
        ],
    )
    .unwrap();
    assert_eq!(cmd(&app), "torchrun --rdzv_backend static --rdzv_conf timeout=600 --rdzv_endpoint localhost:0 --rdzv_id '${app_id}' --nnodes 1 --nproc_per_node 4 --tee 3 --role '' --node_rank '${replica_id}' -m foo.main --x 1");
    assert_eq!(app.roles[0].name, "main");
}

#[test]
fn ddp_elastic() {
    let app = build(
        "dist.ddp",
        &["-j", "2:4x8", "--script", "a/train.py", "--name", "exp/"],
    )
    .unwrap();
    assert!(
        cmd(&app).contains("--nnodes 2:4 --nproc_per_node 8"),
        "{}",
        cmd(&app)
    );
    assert_eq!(
        (app.roles[0].num_replicas, app.roles[0].min_replicas),
        (4, Some(2))
    );
    assert_eq!(app.name, "train");
    assert_eq!(app.roles[0].env["TORCHX_TRACKING_EXPERIMENT_NAME"], "exp");
}

#[test]
fn parse_j() {
    assert_eq!(
        parse_nnodes("1:2x3").unwrap(),
        Nnodes {
            min_nnodes: 1,
            max_nnodes: 2,
            nproc_per_node: 3,
            nnodes_rep: "1:2".into()
        }
    );
    assert_eq!(
        parse_nnodes("2x4").unwrap(),
        Nnodes {
            min_nnodes: 2,
            max_nnodes: 2,
            nproc_per_node: 4,
            nnodes_rep: "2".into()
        }
    );
    assert_eq!(
        parse_nnodes("2").unwrap(),
        Nnodes {
            min_nnodes: 1,
            max_nnodes: 1,
            nproc_per_node: 2,
            nnodes_rep: "1".into()
        }
    );
    for bad in [
        "", "x", "2x", "x2", "1:x2", "a", "2x2x2", "-1x2", "1:2:3x4", "3:2x1", "0x1",
    ] {
        assert!(parse_nnodes(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_nnodes("2y").unwrap_err().to_string(),
        "Invalid format for -j, usage example: 1:2x4 or 1x4 or 4. Given: 2y"
    );
}

#[test]
fn ddp_debug_env_mounts() {
    let app = build(
        "dist.ddp",
        &[
            "--script",
            "t.py",
            "--debug",
            "True",
            "--env",
            "A=1,B=2",
            "--mounts",
            "type=bind,src=~/d,dst=/d",
            "-h",
            "gpu.small",
        ],
    )
    .unwrap();
    let r = &app.roles[0];
    assert_eq!(r.env["A"], "1");
    assert_eq!(r.env["TORCH_DISTRIBUTED_DEBUG"], "DETAIL");
    assert_eq!(r.resource, Resource::new(8, 1, 32768));
    assert_eq!(r.mounts.len(), 1);
    assert!(
        matches!(&r.mounts[0], crate::specs::Mount::Bind { src_path, .. } if src_path == "/home/u/d")
    );
}

#[test]
fn spmd_infers_nproc() {
    let app = build(
        "dist.spmd",
        &["-j", "2", "-h", "aws_p4d.24xlarge", "--script", "t.py"],
    )
    .unwrap();
    assert!(cmd(&app).contains("--nnodes 2 --nproc_per_node 8"));
    let e = build(
        "dist.spmd",
        &["-j", "2", "-h", "aws_trn1.32xlarge", "--script", "t.py"],
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("nproc_per_node cannot be inferred from GPU count. `aws_trn1.32xlarge` is not a GPU instance."), "{e}");
}

#[test]
fn torchrun_is_ddp_with_spmds_bare_j_on_a_named_host() {
    let same = |args: &[&str]| {
        let torchrun = build("dist.torchrun", args).unwrap();
        assert_eq!(torchrun, build("dist.ddp", args).unwrap(), "{args:?}");
    };
    same(&["-j", "2x2", "--script", "t.py", "--", "--lr", "0.1"]);
    same(&["-j", "1:2x4", "-m", "a.b"]);
    // A bare -j without -h is a process count, as for dist.ddp.
    same(&["-j", "2", "--script", "t.py"]);
    same(&["-j", "2x4", "-h", "aws_p4d.24xlarge", "--script", "t.py"]);
    let app = build(
        "dist.torchrun",
        &["-j", "2", "-h", "aws_p4d.24xlarge", "--script", "t.py"],
    )
    .unwrap();
    assert!(
        cmd(&app).contains("--nnodes 2 --nproc_per_node 8"),
        "{}",
        cmd(&app)
    );
    assert_eq!(app.roles[0].num_replicas, 2);
    let e = build(
        "dist.torchrun",
        &["-j", "2", "-h", "aws_trn1.32xlarge", "--script", "t.py"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("nproc_per_node cannot be inferred from GPU count."),
        "{e}"
    );
    let e = build("dist.torchrun", &["-j", "1:2", "--script", "t.py"]).unwrap_err();
    assert!(e.to_string().starts_with("Invalid format for -j"), "{e}");
}

#[test]
fn utils_outputs() {
    let app = build("utils.echo", &[]).unwrap();
    insta::assert_yaml_snapshot!("echo", app);
    let app = build("utils.sh", &["echo", "hello world", "$x"]).unwrap();
    assert_eq!(app.roles[0].args, ["-c", "echo 'hello world' '$x'"]);
    let app = build("utils.sh", &["--entrypoint", "bash", "--", "-c", "true"]).unwrap();
    assert_eq!(
        (app.roles[0].entrypoint.as_str(), app.roles[0].args.clone()),
        ("bash", vec!["-c".to_string(), "true".into()])
    );
    let app = build("utils.python", &["-m", "foo.bar", "--", "--x", "1"]).unwrap();
    assert_eq!(app.roles[0].args, ["-m", "foo.bar", "--x", "1"]);
    assert_eq!(app.roles[0].env["HYDRA_MAIN_MODULE"], "foo.bar");
    let app = build("utils.booth", &["--x1", "1", "--x2", "2.5"]).unwrap();
    assert_eq!(app.roles[0].args[3], "1.0");
    let app = build("utils.binary", &["--entrypoint", "/bin/true", "a"]).unwrap();
    assert_eq!(
        (app.roles[0].image.as_str(), app.roles[0].args.clone()),
        ("<NONE>", vec!["a".to_string()])
    );
    let app = build(
        "serve.torchserve",
        &[
            "--model_path",
            "s3://m",
            "--management_api",
            "http://x",
            "--params",
            "a=1",
            "--dryrun",
        ],
    )
    .unwrap();
    assert_eq!(app.roles[0].args.last().unwrap(), "--dryrun");
    assert!(app.roles[0].args.contains(&"--a".to_string()));
    let app = build("metrics.tensorboard", &["--logdir", "/l"]).unwrap();
    assert_eq!(app.roles[0].port_map["http"], 6006);
    assert!(app.roles[0].resource.is_null());
    assert_eq!(
        build("utils.copy", &["--src", "a", "--dst", "b"])
            .unwrap()
            .name,
        "torchx-utils-copy"
    );
    assert_eq!(
        build("utils.touch", &["--file", "f"]).unwrap().roles[0].args,
        ["f"]
    );
}

#[test]
fn argument_errors_name_the_parameter() {
    let e = |n: &str, a: &[&str]| build(n, a).unwrap_err().to_string();
    assert_eq!(
        e("utils.touch", &[]),
        "component `utils.touch`: missing required parameter `--file` (file to create)"
    );
    assert_eq!(
        e("utils.echo", &["--num_replicas", "two"]),
        "component `utils.echo`: `--num_replicas` expects an integer, got `two`"
    );
    assert!(e("utils.echo", &["--mgs", "x"])
        .starts_with("component `utils.echo`: unknown argument `--mgs`. Valid parameters:"));
    let typo = build("utils.echo", &["--mgs", "x"]).unwrap_err();
    assert_eq!(typo.suggestion(), Some("msg"));
    assert_eq!(
        e("utils.echo", &["--msg", "a", "--msg", "b"]),
        "component `utils.echo`: parameter `--msg` is given more than once"
    );
    assert_eq!(
        e("utils.echo", &["--msg"]),
        "component `utils.echo`: `--msg` expects a value (str)"
    );
    assert_eq!(e("utils.echo", &["stray"]), "component `utils.echo`: unexpected argument(s) `stray`; it takes only --options (--msg, --image, --num_replicas)");
    assert_eq!(
        e("dist.ddp", &["-j", "2x2"]),
        "exactly one of --script and -m must be specified"
    );
    assert_eq!(e("dist.ddp", &["--script", "a", "--env", "A"]), "component `dist.ddp`: `--env`: `A` does not have at least one `key=value` pair (expected K1=V1,K2=V2)");
    assert_eq!(
        e("utils.echo", &["--num_replicas", "0"]),
        "`--num_replicas` must be a positive integer, got 0"
    );
    assert!(e("utils.nope", &[]).starts_with("component `utils.nope` not found."));
}

#[test]
fn help_and_defaults() {
    let ComponentRef::Component(c) = find_component("utils.echo").unwrap() else {
        unreachable!()
    };
    insta::assert_snapshot!(c.help(&BTreeMap::new()));
    assert!(matches!(
        c.parse_args(&["--help"], &BTreeMap::new()).unwrap(),
        ParseOutcome::Help
    ));
    let defaults: BTreeMap<String, String> =
        [("msg".to_string(), "from config".to_string())].into();
    let app = c
        .materialize::<&str>(&[], &defaults, &ComponentEnv::default())
        .unwrap()
        .unwrap();
    assert_eq!(app.roles[0].args, ["from config"]);
    let bad: BTreeMap<String, String> = [("mgs".to_string(), "x".to_string())].into();
    assert!(c
        .parse_args::<&str>(&[], &bad)
        .unwrap_err()
        .to_string()
        .contains("unknown parameter `mgs`"));
}

#[test]
fn file_components() {
    let dir = tempfile::tempdir().unwrap();
    let toml_path = dir.path().join("c.toml");
    std::fs::write(
        &toml_path,
        r#"
[train]
description = "Train"
[train.params.lr]
type = "float"
default = 0.1
help = "learning rate"
[train.params.nodes]
type = "int"
[train.params.args]
type = "args"
[train.app]
name = "train"
[[train.app.roles]]
name = "trainer"
image = "img"
entrypoint = "python"
num_replicas = "{{nodes}}"
args = ["t.py", "--lr={{lr}}", "{{*args}}"]
"#,
    )
    .unwrap();
    let name = format!("{}:train", toml_path.display());
    let app = build(&name, &["--nodes", "3", "--", "--x", "y"]).unwrap();
    assert_eq!(app.roles[0].num_replicas, 3);
    assert_eq!(app.roles[0].args, ["t.py", "--lr=0.1", "--x", "y"]);
    assert!(build(&name, &[])
        .unwrap_err()
        .to_string()
        .contains("missing required parameter `--nodes`"));
    let missing = format!("{}:nope", toml_path.display());
    assert!(build(&missing, &[])
        .unwrap_err()
        .to_string()
        .contains("Function nope does not exist"));

    let yaml_path = dir.path().join("c.yaml");
    std::fs::write(&yaml_path, "hi:\n  params:\n    who: {type: str, default: world}\n  app:\n    name: hi\n    roles: [{name: r, image: i, entrypoint: echo, args: ['hello {{who}}']}]\nbad:\n  app: {name: x, roles: [{name: r, image: i, entrypoint: '{{nope}}'}]}\n").unwrap();
    let app = build(&format!("{}:hi", yaml_path.display()), &["--who", "you"]).unwrap();
    assert_eq!(app.roles[0].args, ["hello you"]);
    let e = build(&format!("{}:bad", yaml_path.display()), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("uses `{{nope}}` but declares no parameter `nope`"),
        "{e}"
    );

    let app_path = dir.path().join("app.yaml");
    std::fs::write(
        &app_path,
        "name: a\nroles: [{name: r, image: i, entrypoint: echo}]\n",
    )
    .unwrap();
    let ComponentRef::AppFile(app) = find_component(&app_path.display().to_string()).unwrap()
    else {
        panic!()
    };
    assert_eq!(app.name, "a");
}

/// Builders read only parameters their component declares (ComponentArgs panics otherwise, so a
/// misspelled name cannot read as `""`/`0`/`false`): every builtin is built with its required
/// parameters, then with each optional one added, with and without a script; none may panic
/// (errors for combinations a component refuses are fine).
#[test]
fn every_builtin_reads_only_declared_parameters() {
    let value = |p: &Param| -> String {
        match p.name.as_str() {
            "j" => "2x2".into(),
            "h" => "gpu.small".into(),
            "mounts" => "type=bind,src=/a,dst=/b".into(),
            "script" => "a.py".into(),
            "m" => "pkg.main".into(),
            "c" => "print(1)".into(),
            _ => match p.ty {
                ParamType::Str => "v".into(),
                ParamType::Int => "1".into(),
                ParamType::Float => "1.5".into(),
                ParamType::Bool => "True".into(),
                ParamType::List => "a,b".into(),
                ParamType::Dict => "k=v".into(),
                ParamType::VarArgs => unreachable!("no flag"),
            },
        }
    };
    let env = ComponentEnv::default();
    for c in builtins::all() {
        let flag = |p: &Param| vec![format!("--{}", p.name), value(p)];
        let required: Vec<String> = c
            .params
            .iter()
            .filter(|p| p.default == ParamDefault::Required)
            .flat_map(flag)
            .collect();
        let optional: Vec<&Param> = c
            .params
            .iter()
            .filter(|p| p.default != ParamDefault::Required && p.ty != ParamType::VarArgs)
            .collect();
        let script: Vec<String> = optional
            .iter()
            .filter(|p| p.name == "script")
            .flat_map(|p| flag(p))
            .collect();
        let mut cases = vec![
            required.clone(),
            [required.clone(), script.clone()].concat(),
        ];
        for p in &optional {
            cases.push([required.clone(), flag(p)].concat());
            if p.name != "script" {
                cases.push([required.clone(), script.clone(), flag(p)].concat());
            }
        }
        for mut tokens in cases {
            if c.varargs().is_some() {
                tokens.extend(["--".into(), "true".into()]);
            }
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = c.materialize(&tokens, &BTreeMap::new(), &env);
            }));
            assert!(built.is_ok(), "{} {tokens:?} panicked", c.name);
        }
    }
}

#[test]
#[should_panic(expected = "component bug: it reads parameter `mgs`")]
fn reading_an_undeclared_parameter_is_a_bug_caught_at_once() {
    let c = Component::new(
        "t.echo",
        "test",
        vec![Param::new(
            "msg",
            ParamType::Str,
            ParamDefault::Value("hi".into()),
            "m",
        )],
        "tests",
        |a: &ComponentArgs, _: &ComponentEnv| {
            Ok(AppDef::new(
                "x",
                vec![crate::specs::Role::new("r", a.str("mgs"))],
            ))
        },
    );
    let _ = c.materialize(&[] as &[&str], &BTreeMap::new(), &ComponentEnv::default());
}
