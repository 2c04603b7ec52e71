//! End-to-end tests of the `torchx` binary with real processes on `local_cwd`. Each test gets its
//! own HOME, state directory and working directory, so no config file or job leaks in.

mod support;

use std::path::Path;

use support::{stderr, stdout, Env};

#[test]
fn run_echo_succeeds_and_is_visible_from_other_processes() {
    let env = Env::new();
    let out = env.run(&["run", "utils.echo", "--msg", "hello from torchx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = stdout(&out).trim().to_string();
    assert!(handle.starts_with("local_cwd://torchx/echo-"), "{handle}");
    assert!(
        stderr(&out).contains("echo/0 hello from torchx"),
        "{}",
        stderr(&out)
    );

    let status = env.run(&["status", &handle, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(v["state"], "SUCCEEDED");
    assert_eq!(v["roles"][0]["replicas"][0]["state"], 4);

    let text = env.run(&["status", &handle]);
    assert!(
        stdout(&text).contains(
            "    State: SUCCEEDED\n    Num Restarts: 0\n    Roles: \n *echo[0]:SUCCEEDED\n"
        ),
        "{}",
        stdout(&text)
    );

    let typo = env.run(&["status", &handle, "--roles", "nosuchrole"]);
    assert_eq!(typo.status.code(), Some(4), "{}", stderr(&typo));
    assert!(
        stderr(&typo).contains("role `nosuchrole` not found") && stderr(&typo).contains("echo"),
        "{}",
        stderr(&typo)
    );

    let log = env.run(&["log", &handle]);
    assert_eq!(stdout(&log), "echo/0 hello from torchx\n");
    let log = env.run(&[
        "log",
        &format!("{handle}/echo/0"),
        "--streams",
        "stdout",
        "--regex",
        "^hello",
    ]);
    assert_eq!(stdout(&log), "echo/0 hello from torchx\n");

    let list = env.run(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    assert_eq!(v[0]["app_handle"], handle.as_str());
    assert_eq!(v[0]["state"], "SUCCEEDED");

    let desc = env.run(&["describe", &handle]);
    assert!(
        stdout(&desc).contains("entrypoint: echo"),
        "{}",
        stdout(&desc)
    );

    assert_eq!(env.run(&["delete", &handle]).status.code(), Some(0));
    assert_eq!(env.apps(), 0);
    assert_eq!(env.run(&["status", &handle]).status.code(), Some(4));
}

#[test]
fn failing_job_exits_1_with_reason() {
    let env = Env::new();
    let out = env.run(&["run", "utils.sh", "--", "sh", "-c", "echo bad >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did not succeed: FAILED (sh/0 exited with code 3)"),
        "{}",
        stderr(&out)
    );
    let handle = stdout(&out).trim().to_string();
    let log = env.run(&["log", &handle, "--streams", "stderr"]);
    assert_eq!(stdout(&log), "sh/0 bad\n");
}

#[test]
fn cancel_from_another_process() {
    let env = Env::new();
    let mut child = env
        .cmd(&["run", "utils.sh", "--", "sleep", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut handle = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.take().unwrap());
        r.read_line(&mut handle).unwrap();
    }
    let handle = handle.trim().to_string();
    let out = env.run(&["cancel", &handle]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let s = env.run(&["status", &handle, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&s)).unwrap();
    assert_eq!(v["state"], "CANCELLED");
}

#[test]
fn dryrun_prints_native_request_for_every_scheduler() {
    let env = Env::new();
    let runopts = env.run(&["runopts", "--json"]);
    let schedulers: serde_json::Value = serde_json::from_str(&stdout(&runopts)).unwrap();
    for name in schedulers.as_object().unwrap().keys() {
        // The options each scheduler requires.
        let cfg = match name.as_str() {
            "aws_batch" => "queue=q",
            "aws_sagemaker" => "role=r,instance_type=ml.m5.xlarge,output_path=s3://b/o",
            _ => "",
        };
        let out = env.run(&["run", "--dryrun", "-s", name, "-cfg", cfg, "utils.echo"]);
        // The workspace defaults to the current directory, as TorchX's: schedulers that push
        // it as an image need image_repo.
        let pushes = [
            "kubernetes",
            "kubernetes_mcad",
            "aws_batch",
            "aws_sagemaker",
        ];
        if pushes.contains(&name.as_str()) {
            assert_eq!(out.status.code(), Some(3), "{name}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("set the run option image_repo"),
                "{}",
                stderr(&out)
            );
        } else {
            assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
            assert!(stdout(&out).contains("=== SCHEDULER REQUEST ==="));
        }
        let out = env.run(&[
            "run",
            "--dryrun",
            "--json",
            "--workspace",
            "",
            "-s",
            name,
            "-cfg",
            cfg,
            "utils.echo",
        ]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["scheduler"], name.as_str());
        assert_eq!(v["app"]["roles"][0]["entrypoint"], "echo");
        assert!(v["request"].is_object());
    }
    assert_eq!(env.apps(), 0, "a dry run submitted something");
}

/// Env keeps the user's order in every scheduler's request (Kubernetes expands `$(VAR)` only
/// from variables listed before), from AppDef files and from components alike.
#[test]
fn env_order_is_the_users_in_every_request() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: order\nroles:\n- name: r\n  image: img\n  entrypoint: sh\n  args: [-c, 'echo $A']\n  \
         resource: {cpu: 1, gpu: 0, memMB: 512}\n  env:\n    B: value-of-b\n    A: $(B)/y\n    Z: last-one\n",
    )
    .unwrap();
    let runopts = env.run(&["runopts", "--json"]);
    let schedulers: serde_json::Value = serde_json::from_str(&stdout(&runopts)).unwrap();
    for name in schedulers.as_object().unwrap().keys() {
        let cfg = match name.as_str() {
            "aws_batch" => "queue=q",
            "aws_sagemaker" => "role=r,instance_type=ml.m5.xlarge,output_path=s3://b/o",
            _ => "",
        };
        let component = [
            "utils.sh",
            "--env",
            "B=value-of-b,A=$(B)/y,Z=last-one",
            "true",
        ];
        for app in [&["./app.yaml"][..], &component[..]] {
            let mut args = vec![
                "run",
                "--dryrun",
                "--workspace",
                "",
                "-s",
                name,
                "-cfg",
                cfg,
            ];
            args.extend(app);
            let out = env.run(&args);
            assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
            let text = stdout(&out);
            let request = &text[text.find("=== SCHEDULER REQUEST ===").unwrap()..];
            let at = |v: &str| {
                request
                    .find(v)
                    .unwrap_or_else(|| panic!("{name}: no {v} in {request}"))
            };
            assert!(
                at("value-of-b") < at("$(B)/y") && at("$(B)/y") < at("last-one"),
                "{name}: env reordered in {request}"
            );
        }
    }
}

#[test]
fn config_files_apply_with_precedence() {
    let env = Env::new();
    std::fs::write(
        env.home.join(".torchxconfig"),
        "[local_cwd]\nlog_dir = /tmp/from-home\n[component:utils.echo]\nmsg = from home\n",
    )
    .unwrap();
    std::fs::write(env.cwd.join(".torchxconfig"), "[local_cwd]\nlog_dir = /tmp/from-cwd\nprepend_cwd = True\n[cli:run]\ncomponent = utils.echo\n").unwrap();
    let out = env.run(&["run", "--dryrun", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["cfg"]["log_dir"], "/tmp/from-home");
    assert_eq!(v["cfg"]["prepend_cwd"], true);
    assert_eq!(v["app"]["roles"][0]["args"][0], "from home");
    let out = env.run(&[
        "run",
        "--dryrun",
        "--json",
        "-cfg",
        "log_dir=/tmp/cli",
        "utils.echo",
        "--msg",
        "cli",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["cfg"]["log_dir"], "/tmp/cli");
    assert_eq!(v["app"]["roles"][0]["args"][0], "cli");
}

#[test]
fn informational_commands() {
    let env = Env::new();
    let out = env.run(&["builtins"]);
    assert!(
        stdout(&out).starts_with("Found 12 builtin components:\n  1. dist.ddp\n"),
        "{}",
        stdout(&out)
    );
    let out = env.run(&["runopts", "local_cwd"]);
    assert!(
        stdout(&out).starts_with(
            "local_cwd:\n    usage:\n        [log_dir=LOG_DIR],[prepend_cwd=PREPEND_CWD]"
        ),
        "{}",
        stdout(&out)
    );
    let out = env.run(&["run", "utils.echo", "--help"]);
    assert!(stdout(&out).contains("--msg MSG"), "{}", stdout(&out));
    let out = env.run(&["configure", "--print", "-a"]);
    assert!(
        stdout(&out).contains("[local_cwd]\n# dir to write"),
        "{}",
        stdout(&out)
    );
    assert_eq!(env.run(&["configure"]).status.code(), Some(0));
    assert!(env.cwd.join(".torchxconfig").exists());
    assert_eq!(env.run(&["completions", "bash"]).status.code(), Some(0));
    assert!(stdout(&env.run(&["--version"])).starts_with("torchx "));
}

#[test]
fn app_files_run() {
    let env = Env::new();
    std::fs::write(env.cwd.join("app.yaml"), "name: two\nroles:\n- {name: a, image: x, entrypoint: sh, args: ['-c', 'echo A$TORCHX_RANK0_HOST'], num_replicas: 2}\n- {name: b, image: x, entrypoint: echo, args: ['B ${app_id}']}\n").unwrap();
    let out = env.run(&["run", "./app.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("a/0 Alocalhost")
            && err.contains("a/1 Alocalhost")
            && err.contains("b/0 B two-"),
        "{err}"
    );
}

/// local_cwd runs in the current directory: that workspace (TorchX's default, `file://$PWD`)
/// is accepted, explicitly or from `[cli:run]`.
#[test]
fn local_cwd_accepts_its_own_directory_as_workspace() {
    let env = Env::new();
    let cwd = env.cwd.canonicalize().unwrap();
    let url = format!("file://{}", cwd.display());
    for ws in [".", cwd.to_str().unwrap(), url.as_str()] {
        let out = env.run(&["run", "--workspace", ws, "utils.sh", "cat", "data.txt"]);
        assert_eq!(out.status.code(), Some(1), "{ws}: {}", stderr(&out));
        std::fs::write(env.cwd.join("data.txt"), "here\n").unwrap();
        let out = env.run(&["run", "--workspace", ws, "utils.sh", "cat", "data.txt"]);
        assert_eq!(out.status.code(), Some(0), "{ws}: {}", stderr(&out));
        std::fs::remove_file(env.cwd.join("data.txt")).unwrap();
    }
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        format!("[cli:run]\nworkspace = {url}\n"),
    )
    .unwrap();
    let out = env.run(&["run", "--dryrun", "utils.echo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// As TorchX (its argparse): a `[cli:run] workspace` that slurm cannot use (no job_dir to copy
/// it into) is ignored with a warning, and the dry run prints the sbatch script; given
/// explicitly it is still refused (exit 3), and with job_dir it is used.
#[test]
fn slurm_ignores_a_config_workspace_without_job_dir() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[cli:run]
workspace = /
",
    )
    .unwrap();
    let dryrun = [
        "run",
        "--dryrun",
        "-s",
        "slurm",
        "-cfg",
        "slurm_version=24.11",
        "utils.echo",
    ];
    let out = env.run(&dryrun);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("#SBATCH"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("[cli:run] workspace `/` is ignored"),
        "{}",
        stderr(&out)
    );
    let mut explicit = dryrun.to_vec();
    explicit.splice(2..2, ["--workspace", "/"]);
    assert_eq!(env.run(&explicit).status.code(), Some(3));
}

/// As TorchX's argparse: an unambiguous prefix of a long option is that option.
#[test]
fn long_option_prefixes() {
    let env = Env::new();
    let out = env.run(&["run", "--dry", "--sched=local_cwd", "utils.echo"]);
    // `--sched` could be --scheduler or --scheduler_args: ambiguous, as in argparse.
    assert_ne!(out.status.code(), Some(0));
    let out = env.run(&[
        "run",
        "--dry",
        "--par",
        "p1",
        "-s",
        "local_cwd",
        "utils.echo",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("=== SCHEDULER REQUEST ==="),
        "{}",
        stdout(&out)
    );
    // Component arguments too (argparse parses them in TorchX); an ambiguous one is an error.
    let out = env.run(&["run", "--dryrun", "utils.echo", "--ms", "prefixed"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("prefixed"), "{}", stdout(&out));
    let out = env.run(&[
        "run", "--dryrun", "dist.ddp", "--rdzv", "x", "--script", "t.py",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "ambiguous option: --rdzv could match --rdzv_port, --rdzv_backend, --rdzv_conf"
        ),
        "{}",
        stderr(&out)
    );
    let out = env.run(&[
        "run", "--dryrun", "dist.ddp", "--mem", "2048", "--script", "t.py",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Bad input: exact message fragment and exit code, and nothing submitted.
#[test]
fn bad_input_table() {
    let env = Env::new();
    let dir = env.cwd.clone();
    std::fs::write(
        dir.join("bad.yaml"),
        "name: x\nroles:\n- {name: r, image: i, entrypiont: e}\n",
    )
    .unwrap();
    std::fs::write(dir.join("noroles.yaml"), "name: x\nroles: []\n").unwrap();
    std::fs::write(
        dir.join("ok.yaml"),
        "name: x\nroles:\n- {name: r, image: i, entrypoint: e}\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.toml"), "[t]\n[t.app]\nname = \"t\"\n").unwrap();
    let app =
        |role: &str| format!("name: x\nroles:\n- {{name: r, image: i, entrypoint: e, {role}}}\n");
    for (file, role) in [
        ("huge.yaml", "num_replicas: 1000000000"),
        ("negcpu.yaml", "resource: {cpu: -1, gpu: 0, memMB: 1024}"),
        ("negmem.yaml", "resource: {cpu: 1, gpu: 0, memMB: -5}"),
        ("eqenv.yaml", "env: {\"A=B\": x}"),
        ("emptyenv.yaml", "env: {\"\": x}"),
    ] {
        std::fs::write(dir.join(file), app(role)).unwrap();
    }
    std::fs::write(dir.join("broken.toml"), "[t\n").unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["run", "utils.nope"], 4, "component `utils.nope` not found."),
        (&["run", "utils.ech"], 4, "Did you mean `utils.echo`?"),
        (&["run", "-s", "slurmm", "utils.echo"], 4, "scheduler `slurmm` not found."),
        (&["run", "-cfg", "log_dri=/x", "utils.echo"], 3, "unknown run option `log_dri`. Valid options are: log_dir, prepend_cwd, auto_set_cuda_visible_devices. Did you mean `log_dir`?"),
        (&["run", "-cfg", "prepend_cwd=maybe", "utils.echo"], 3, "Run option: prepend_cwd, must be of type: bool (true or false), but was: `maybe`"),
        (&["run", "-cfg", "log_dir=/a,logDir=/b", "utils.echo"], 3, "run option `log_dir` is given twice with different values"),
        (&["run", "-cfg", "log_dir=", "utils.echo"], 3, "does not have at least one `key=value` pair"),
        (&["run", "-cfg", "a=1", "-cfg", "b=2", "utils.echo"], 3, "-cfg/--cfg was given more than once"),
        (&["run", "utils.echo", "--num_replicas", "x"], 2, "`--num_replicas` expects an integer, got `x`"),
        (&["run", "utils.echo", "--num_replicas", "0"], 2, "`--num_replicas` must be a positive integer, got 0"),
        (&["run", "utils.echo", "--mgs", "x"], 2, "unknown argument `--mgs`. Valid parameters:"),
        (&["run", "utils.echo", "--mgs", "x"], 2, "Did you mean `msg`?"),
        (&["run", "utils.echo", "--msg", "a", "--msg", "b"], 2, "parameter `--msg` is given more than once"),
        (&["run", "utils.touch"], 2, "missing required parameter `--file`"),
        (&["run", "utils.echo", "stray"], 2, "unexpected argument(s) `stray`"),
        (&["run", "dist.ddp", "-j", "2y2", "--script", "a.py"], 2, "Invalid format for -j, usage example: 1:2x4 or 1x4 or 4. Given: 2y2"),
        (&["run", "dist.ddp", "-j", "4:2x1", "--script", "a.py"], 2, "the minimum number of nodes (4) exceeds the maximum (2)"),
        (&["run", "dist.ddp", "-j", "2x2"], 2, "exactly one of --script and -m must be specified"),
        (&["run", "dist.ddp", "--script", "a.py", "-h", "gpu.smal"], 4, "Did you mean `gpu.small`?"),
        (&["run", "dist.ddp", "--script", "a.py", "--env", "NOVALUE"], 2, "`--env`: `NOVALUE` does not have at least one `key=value` pair"),
        (&["run", "utils.sh", "--mounts", "src=/a,type=bind", "true"], 2, "type must be specified first"),
        (&["run", "utils.sh", "--mounts", "type=nfs,src=a,dst=b", "true"], 2, "invalid mount type `nfs`, must be one of: bind, volume, device"),
        (&["run", "utils.sh", "--mounts", "type=bind,src=/a", "true"], 2, "mount of type=bind is missing `dst=`"),
        (&["run", "utils.sh", "--mounts", "type=device,src=/dev/x,perm=rwx", "true"], 2, "`x` is not a valid permission flag"),
        (&["run", "utils.sh", "--mounts", "type=bind,bogus=1", "true"], 2, "unknown mount option bogus,"),
        (&["run", "dist.ddp", "--script", "a.py", "--rdzv_port", "70000"], 2, "`--rdzv_port` must be a port number (0-65535), got 70000"),
        (&["run", "./bad.yaml"], 2, "unknown field `entrypiont`"),
        (&["run", "./noroles.yaml"], 2, "No roles for app: x. Did you forget to add roles to AppDef?"),
        (&["run", "./missing.yaml"], 4, "file `./missing.yaml` not found"),
        (&["run", "./c.toml:nope"], 4, "Function nope does not exist in file ./c.toml"),
        (&["run", "./broken.toml:t"], 2, "invalid TOML"),
        (&["run", "./c.py:main"], 4, "component file `./c.py` not found"),
        (&["run", "./c.txt:main"], 2, "must end in .py, .toml, .yaml, .yml or .json"),
        (&["run", "./ok.yaml", "--foo"], 2, "is an AppDef file and takes no arguments"),
        (&["run"], 2, "missing component name"),
        (&["run", "--workspace", "/", "utils.echo"], 2, "local_cwd runs jobs in the current directory ("),
        (&["run", "-s", "lsf", "--workspace", ".", "utils.echo"], 6, "scheduler `lsf` does not support workspaces (role `echo` has workspace `.`)"),
        (&["run", "--workspace", "s3://b/d", "utils.echo"], 2, "workspace `s3://b/d`: only local directories are supported"),
        (&["run", "-s", "slurm", "-cfg", "slurm_version=24.11", "--workspace", "/", "utils.echo"], 3, "workspace `/` is not the current directory"),
        (&["status", "not-a-handle"], 2, "not-a-handle is not of the form: <scheduler_backend>://<session_name>/<app_id>"),
        (&["status", "local_cwd://torchx/"], 2, "is not of the form"),
        (&["status", "local_cwd://torchx/nope-123"], 4, "does not exist or has been removed from local_cwd's data plane"),
        (&["status", "k8s://torchx/app"], 4, "scheduler `k8s` not found."),
        (&["cancel", "local_cwd://torchx/nope-123"], 4, "does not exist"),
        (&["delete", "local_cwd://torchx/nope-123"], 4, "does not exist"),
        (&["status", "local_cwd://torchx/..hidden"], 2, "invalid local_cwd app id `..hidden`"),
        (&["log", "local_cwd:/x"], 2, "is not of the form SCHEDULER://[SESSION_NAME]/APP_ID/[ROLE_NAME/[REPLICA_IDS,...]]"),
        (&["log", "local_cwd://torchx/app/role/x"], 2, "is not of the form"),
        (&["log", "local_cwd://torchx/app", "--streams", "both"], 2, "invalid stream `both`, must be one of: stdout, stderr, combined"),
        (&["log", "local_cwd://torchx/app", "--since", "yesterday"], 2, "--since `yesterday` is not a time"),
        (&["log", "local_cwd://torchx/app", "--regex", "("], 2, "--regex"),
        (&["list", "--state", "DONE"], 2, "invalid state `DONE`, must be one of"),
        (&["runopts", "nope"], 4, "scheduler `nope` not found."),
        (&["builtins", "--print", "utils.nope"], 4, "component `utils.nope` not found."),
        (&["configure", "-s", "nope"], 4, "scheduler `nope` not found."),
        (&["frobnicate"], 2, "unrecognized subcommand"),
        // Values that once panicked or aborted, after or before submitting.
        (&["run", "--timeout", "-5", "utils.echo"], 2, "`-5` is not a timeout"),
        (&["run", "--timeout", "nan", "utils.echo"], 2, "`nan` is not a timeout"),
        (&["run", "--timeout", "inf", "utils.echo"], 2, "`inf` is not a timeout"),
        (&["run", "--timeout", "1e300", "utils.echo"], 2, "`1e300` is not a timeout"),
        (&["log", "local_cwd://torchx/app", "--since", "100000000000000000000"], 2, "is not a time"),
        (&["log", "local_cwd://torchx/app", "--since", "1e300d"], 2, "is not a time"),
        (&["run", "./huge.yaml"], 2, "at most 100000 are allowed"),
        (&["run", "--dryrun", "./huge.yaml"], 2, "at most 100000 are allowed"),
        (&["run", "utils.sh", "--num_replicas", "1000000000", "true"], 2, "at most 100000 are allowed"),
        // Bad values once accepted silently or failing late.
        (&["run", "./negcpu.yaml"], 2, "resource cpu = -1 is negative"),
        (&["run", "./negmem.yaml"], 2, "resource memMB = -5 is negative"),
        (&["run", "./eqenv.yaml"], 2, "env name `A=B` is not allowed"),
        (&["run", "./emptyenv.yaml"], 2, "env name `` is not allowed"),
        (&["--log_level", "LOUD", "builtins"], 2, "log level `LOUD`"),
        (&["run", "-s", "slurm", "-cfg", "time=abc,slurm_version=24.11", "utils.echo"], 3, "`time` = `abc` is not a Slurm time limit"),
        (&["run", "-s", "slurm", "-cfg", "time=-5,slurm_version=24.11", "utils.echo"], 3, "`time` = `-5` is not a Slurm time limit"),
        (&["run", "-s", "slurm", "-cfg", "partition=a;b,slurm_version=24.11", "utils.echo"], 3, "`partition` = `a;b` is not a Slurm partition name"),
        (&["run", "-cfg", "log_dir=/etc/passwd/sub", "utils.echo"], 3, "cannot create the app's log directory"),
    ];
    let mut cases = cases.to_vec();
    if cfg!(feature = "kubernetes") {
        cases.push((
            &[
                "run",
                "-s",
                "kubernetes",
                "-cfg",
                "image_repo=Bad/Repo",
                "utils.echo",
            ],
            3,
            "image_repo `Bad/Repo` is not an image repository",
        ));
    }
    assert!(cases.len() >= 30);
    for (args, code, fragment) in &cases {
        let out = env.run(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(
            err.contains(fragment),
            "{args:?}: expected `{fragment}` in:\n{err}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert_eq!(
            err.lines()
                .filter(|l| l.starts_with("torchx: error:"))
                .count()
                .min(1),
            usize::from(!err.contains("Usage")),
            "{args:?}: one error line: {err}"
        );
        assert_eq!(env.apps(), 0, "{args:?} submitted an app");
    }

    // A non-UTF-8 argument is an error, not a panic.
    {
        use std::os::unix::ffi::OsStrExt;
        let out = env
            .cmd(&["run", "utils.echo", "--msg"])
            .arg(std::ffi::OsStr::from_bytes(b"caf\xe9"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("is not valid UTF-8"),
            "{}",
            stderr(&out)
        );
        assert_eq!(env.apps(), 0);
    }
    // An unknown tracker, TORCHXCONFIG naming no file, unreadable or non-UTF-8 config files.
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[torchx:tracker]\nfsspek =\n",
    )
    .unwrap();
    let out = env.run(&["run", "utils.echo"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("tracker `fsspek`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("Did you mean `fsspec`?"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.apps(), 0);
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        b"[local_cwd]\nlog_dir = caf\xe9\n",
    )
    .unwrap();
    let out = env.run(&["run", "--dryrun", "utils.echo"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("not UTF-8"), "{}", stderr(&out));
    std::fs::remove_file(env.cwd.join(".torchxconfig")).unwrap();
    for args in [&["list"][..], &["run", "--dryrun", "utils.echo"]] {
        let out = env
            .cmd(args)
            .env("TORCHXCONFIG", "/no/such/file")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("TORCHXCONFIG"), "{}", stderr(&out));
    }

    // Config-file problems.
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[local_cwd]\nlog_dir = 50%\n",
    )
    .unwrap();
    let out = env.run(&["run", "--dryrun", "utils.echo"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`%` must be followed by `%` or `(name)s`"),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[local_cwd]\nprepend_cwd = perhaps\n",
    )
    .unwrap();
    let out = env.run(&["run", "--dryrun", "utils.echo"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("Run option: prepend_cwd, must be of type: bool"),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[local_cwd]\nunknown_key = 1\n",
    )
    .unwrap();
    let out = env.run(&["run", "--dryrun", "utils.echo"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "unknown config keys only warn: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("unknown run option `unknown_key`"),
        "{}",
        stderr(&out)
    );
    let out = env
        .cmd(&["run", "--dryrun", "utils.echo"])
        .env("TORCHXCONFIG", Path::new("/nonexistent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("TORCHXCONFIG is set to `/nonexistent`, which is not a file"));
    assert_eq!(env.apps(), 0);
}

/// A dry run is the same in every process: nothing that varies between processes (hash-map
/// order, the time, the environment) reaches any builtin scheduler's request. Two processes
/// each dry-run the same app; their outputs differ only in the random app id. (Each scheduler's
/// snapshot tests pin the request against a file written by an earlier process, too.)
#[test]
fn dry_runs_are_the_same_in_every_process() {
    let env = Env::new();
    let unique =
        regex::Regex::new("t-[bcdfghjklmnpqrstvwxz][bcdfghjklmnpqrstvwxz0-9]{8,}").unwrap();
    let sagemaker = "role=arn:aws:iam::1:role/r,instance_type=ml.p3.2xlarge,output_path=s3://b/o";
    let schedulers = [
        ("local_cwd", "", true),
        ("local_docker", "", cfg!(feature = "docker")),
        ("slurm", "slurm_version=24.11", true),
        ("lsf", "", true),
        ("kubernetes", "queue=q", cfg!(feature = "kubernetes")),
        ("kubernetes_mcad", "", cfg!(feature = "kubernetes")),
        ("aws_batch", "queue=q", cfg!(feature = "aws")),
        ("aws_sagemaker", sagemaker, cfg!(feature = "aws")),
    ];
    // Those this build has (the slim build leaves some out).
    for (scheduler, cfg, _) in schedulers.into_iter().filter(|s| s.2) {
        let dry_run = |json: bool| {
            let mut args = vec!["run", "--dryrun", "--workspace", "", "-s", scheduler];
            if json {
                args.insert(2, "--json");
            }
            if !cfg.is_empty() {
                args.extend(["-cfg", cfg]);
            }
            args.extend(["dist.ddp", "-j", "2x2", "--script", "t.py"]);
            let out = env
                .cmd(&args)
                .env("TORCHX_INTERNAL_SESSION_ID", "fixed")
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{scheduler}: {}", stderr(&out));
            unique.replace_all(&stdout(&out), "t-UNIQUE").into_owned()
        };
        for json in [false, true] {
            assert_eq!(dry_run(json), dry_run(json), "{scheduler} (json: {json})");
        }
    }
}

/// A component file with no interpreter that has this project's package: the error names what
/// really installs it (the README's command), not a distribution that does not exist.
#[test]
fn a_component_file_without_a_usable_interpreter_says_what_to_install() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join("comp.py"),
        "import torchx.specs as specs\ndef hello() -> specs.AppDef:\n    return specs.AppDef(name='h')\n",
    )
    .unwrap();
    let out = env
        .cmd(&["run", "--dryrun", "./comp.py:hello"])
        // An interpreter without the package: Debian's own.
        .env("TORCHX_PYTHON", "/usr/bin/python3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("pip install ./crates/torchx-cli ."), "{err}");
    assert!(
        err.contains("$TORCHX_PYTHON=/usr/bin/python3: has no torchx package"),
        "{err}"
    );
    assert!(!err.contains("torchx-rs`"), "{err}");
}

/// A misspelt `[cli:run]` key is not silently ignored: `torchx run` warns, naming the nearest
/// key and those it takes, and runs with the rest (as a misspelt scheduler option warns).
#[test]
fn a_misspelt_cli_run_key_warns_with_the_nearest_key() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[cli:run]\nschedulr = slurm\ncomponent = utils.echo\n",
    )
    .unwrap();
    let out = env.run(&["run", "--dryrun"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("`schedulr` in .torchxconfig's [cli:run] is not a default `torchx run` takes; ignoring it (did you mean `scheduler`?)"),
        "{err}"
    );
    // The scheduler stays the default one, the component is the config's.
    assert!(stdout(&out).contains("echo"), "{}", stdout(&out));
}

/// An AWS scheduler with no region configured: one clear error, the configuration exit code
/// (3), and none of the SDK's own log lines (its IMDS lookup warns with internal structs).
#[cfg(feature = "aws")]
#[test]
fn no_aws_region_is_a_configuration_error_in_one_message() {
    let env = Env::new();
    let mut cmd = env.cmd(&[
        "run",
        "--workspace",
        "",
        "-s",
        "aws_batch",
        "-cfg",
        "queue=q",
        "utils.echo",
    ]);
    for var in [
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_ENDPOINT_URL",
    ] {
        cmd.env_remove(var);
    }
    // No instance metadata service here: do not wait for one.
    cmd.env("AWS_EC2_METADATA_DISABLED", "true");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("torchx: error: aws_batch: no AWS region configured"),
        "{err}"
    );
    assert!(!err.contains("WARN"), "{err}");
}
