//! Extension points through the stock binary: executable `torchx-<cmd>` plugins on PATH.

mod support;

use std::os::unix::fs::PermissionsExt;

use support::{stderr, stdout, Env};

fn plugin_dir(plugins: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in plugins {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

#[test]
fn executable_plugins_become_commands_without_shadowing_builtins() {
    let dir = plugin_dir(&[
        (
            "torchx-hello",
            "#!/bin/sh\nprintf '%s|' \"$@\"; echo \"bin=$TORCHX_BIN\"; exit 7\n",
        ),
        ("torchx-run", "#!/bin/sh\necho hijacked\n"),
        ("torchx-scheduler-x", "#!/bin/sh\nexit 0\n"),
    ]);
    let env = Env::new();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    let run = |args: &[&str]| env.cmd(args).env("PATH", &path).output().unwrap();
    let out = run(&["hello", "a", "b c", "--flag"]);
    assert_eq!(out.status.code(), Some(7), "the plugin's exit code is ours");
    assert!(
        stdout(&out).starts_with("a|b c|--flag|bin=/"),
        "{}",
        stdout(&out)
    );
    let out = run(&["--help"]);
    assert!(stdout(&out).contains("Plugin commands"), "{}", stdout(&out));
    assert!(stdout(&out).contains("hello"));
    assert!(
        !stdout(&out).contains("scheduler-x"),
        "scheduler plugins are not commands"
    );
    let out = run(&["run", "--dryrun", "utils.echo"]);
    assert!(
        !stdout(&out).contains("hijacked"),
        "a plugin cannot shadow a builtin"
    );
    let out = run(&["nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unrecognized subcommand `nope`"),
        "{}",
        stderr(&out)
    );
    let out = run(&["stauts"]);
    assert!(
        stderr(&out).contains("Did you mean `status`?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn named_resources_from_config_next_to_the_builtins() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        "[resource:mybox]\ncpu = 3\ngpu = 1\nmemMB = 2048\n\
         capabilities = node.kubernetes.io/instance-type=m5.xlarge\ndevices = vpc.amazonaws.com/efa=2\n",
    )
    .unwrap();
    let dryrun = |h: &str| {
        env.run(&[
            "run",
            "--dryrun",
            "--json",
            "-s",
            "local_cwd",
            "dist.ddp",
            "-j",
            "1x1",
            "-h",
            h,
            "--script",
            "x.py",
        ])
    };
    let out = dryrun("mybox");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let r = &v["app"]["roles"][0]["resource"];
    assert_eq!(
        (r["cpu"].as_i64(), r["gpu"].as_i64(), r["memMB"].as_i64()),
        (Some(3), Some(1), Some(2048))
    );
    assert_eq!(
        r["capabilities"]["node.kubernetes.io/instance-type"],
        "m5.xlarge"
    );
    assert_eq!(r["devices"]["vpc.amazonaws.com/efa"], 2);
    // The builtins are still there.
    let out = dryrun("aws_p4d.24xlarge");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = dryrun("nosuch");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("mybox"),
        "the error lists config resources: {}",
        stderr(&out)
    );
    // A config may not replace a builtin, and bad keys name themselves.
    for (cfg, want) in [
        (
            "[resource:aws_p4d.24xlarge]\ncpu = 1\nmemMB = 1\n",
            "is a builtin named resource",
        ),
        (
            "[resource:x]\ncpu = 1\nmemMB = 1\ncolour = red\n",
            "unknown key `colour`",
        ),
        (
            "[resource:x]\ncpu = lots\nmemMB = 1\n",
            "`cpu` must be a whole number >= 0, got `lots`",
        ),
        (
            "[resource:x]\ncpu = 2\nmemMB = -1\n",
            "`memMB` must be a whole number >= 0, got `-1`",
        ),
        ("[resource:x]\ngpu = 1\n", "`cpu` is required"),
    ] {
        std::fs::write(env.cwd.join(".torchxconfig"), cfg).unwrap();
        let out = dryrun("x");
        assert_eq!(out.status.code(), Some(3), "{cfg}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{cfg}: {}", stderr(&out));
    }
}

#[test]
fn component_search_path_from_config() {
    let env = Env::new();
    let comps = env.cwd.join("comps");
    std::fs::create_dir_all(&comps).unwrap();
    std::fs::write(
        comps.join("mylib.yaml"),
        "hi:\n  description: Says hello\n  params:\n    who: {type: str, default: world}\n  app:\n    \
         name: hi\n    roles: [{name: r, image: i, entrypoint: echo, args: ['hello {{who}}']}]\n\
         sized:\n  params:\n    h: {type: str, default: tiny}\n  app:\n    \
         name: sized\n    roles: [{name: r, image: i, entrypoint: 'true', resource: '{{h}}'}]\n",
    )
    .unwrap();
    std::fs::write(
        env.cwd.join(".torchxconfig"),
        format!(
            "[torchx:components]\ndirs = {}\n\n[resource:tiny]\ncpu = 1\nmemMB = 64\n",
            comps.display()
        ),
    )
    .unwrap();
    // A component file's `resource` may name a resource: from config, or a builtin.
    for (args, cpu) in [(vec![], 1), (vec!["--h", "aws_t3.medium"], 2)] {
        let mut full = vec!["run", "--dryrun", "--json", "mylib.sized"];
        full.extend(args);
        let out = env.run(&full);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["app"]["roles"][0]["resource"]["cpu"], cpu, "{v}");
    }
    let out = env.run(&["run", "--dryrun", "mylib.sized", "--h", "nosuch"]);
    assert!(
        stderr(&out).contains("nosuch") && stderr(&out).contains("tiny"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["builtins"]);
    assert!(stdout(&out).contains("mylib.hi"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("mylib.yaml"),
        "the origin is shown: {}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("utils.echo"), "the builtins stay");
    let out = env.run(&["run", "mylib.hi", "--who", "you"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("hello you"), "{}", stderr(&out));
    // A directory component may not shadow a builtin.
    std::fs::write(
        comps.join("utils.yaml"),
        "echo:\n  app: {name: x, roles: [{name: r, image: i, entrypoint: 'true'}]}\n",
    )
    .unwrap();
    let out = env.run(&["run", "utils.echo"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("clashes"), "{}", stderr(&out));
}
