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
