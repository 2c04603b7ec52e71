//! Nothing private is readable by others: jobs carrying a secret in their environment (`--env`)
//! run as a user would run them (one job, a detached job, a group, a pipeline, the dashboard's
//! token; on Slurm and local_docker when they are up), then every file the project wrote (the
//! state directory, HOME, the working directory, the temporary directory) is walked: one that
//! holds the secret (or the dashboard's token) must be its owner's alone, and so must the
//! directory it is in.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use support::{docker_up, slurm_up, stderr, stdout, Env};

const SECRET: &str = "s3cr3t-token-7f0c2a";

/// Every file under `root` holding `needle`, with the modes of it and its directory.
fn files_holding(root: &Path, needle: &[u8]) -> Vec<(PathBuf, u32, u32)> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let dir_mode = std::fs::metadata(&dir).map_or(0, |m| m.permissions().mode() & 0o777);
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let holds = std::fs::read(&path)
                    .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle));
                if holds {
                    found.push((path, meta.permissions().mode() & 0o777, dir_mode));
                }
            }
        }
    }
    found
}

/// Fails on any file under the roots that holds `needle` and that others can read, or that
/// sits in a directory of ours others can list and enter (a root paired with `false` is the
/// user's own directory, the job's working directory: only its files' modes are ours).
fn assert_private(roots: &[(&Path, bool)], needle: &str) -> usize {
    let mut seen = 0;
    let mut open: Vec<String> = Vec::new();
    for (root, ours) in roots {
        for (path, mode, dir_mode) in files_holding(root, needle.as_bytes()) {
            seen += 1;
            let in_ours = *ours || path.parent() != Some(*root);
            if mode & 0o077 != 0 || (in_ours && dir_mode & 0o077 != 0) {
                open.push(format!(
                    "{} (file {mode:o}, directory {dir_mode:o})",
                    path.display()
                ));
            }
        }
    }
    assert!(open.is_empty(), "readable by others:\n{}", open.join("\n"));
    seen
}

#[test]
fn files_that_carry_a_jobs_environment_or_a_token_are_private() {
    let env = Env::new();
    let tmp = env.cwd.parent().unwrap().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let secret_env = format!("API_TOKEN={SECRET}");
    let run = |args: &[&str]| {
        let out = env.cmd(args).env("TMPDIR", &tmp).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    // One job, waited for; one detached; a group; a pipeline.
    run(&["run", "utils.sh", "--env", &secret_env, "true"]);
    let job = run(&[
        "run",
        "--detach",
        "utils.sh",
        "--env",
        &secret_env,
        "sleep",
        "0.2",
    ]);
    run(&[
        "run",
        "--array",
        "2",
        "utils.sh",
        "--env",
        &secret_env,
        "true",
    ]);
    // The user's own file, outside what is walked.
    let inputs = env.cwd.parent().unwrap().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    let pipe = inputs.join("pipe.yaml");
    std::fs::write(
        &pipe,
        format!(
            "name: p\nsteps:\n  - name: a\n    component: utils.sh\n    \
             args: [--env, 'API_TOKEN={SECRET}', 'true']\n"
        ),
    )
    .unwrap();
    let pipeline = run(&["run", pipe.to_str().unwrap()]);
    env.wait_state_terminal(&job, Duration::from_secs(30));
    assert!(pipeline.starts_with("pipeline://"), "{pipeline}");

    if slurm_up("private files on slurm") {
        let job = run(&[
            "run",
            "-s",
            "slurm",
            "utils.sh",
            "--env",
            &secret_env,
            "true",
        ]);
        env.wait_state_terminal(&job, Duration::from_secs(120));
    }
    if docker_up("private files on local_docker") {
        let job = run(&[
            "run",
            "-s",
            "local_docker",
            "utils.sh",
            "--image",
            "busybox:local",
            "--env",
            &secret_env,
            "true",
        ]);
        env.wait_state_terminal(&job, Duration::from_secs(120));
    }

    // The dashboard's token, with `--open` (a stub browser).
    let bin = env.cwd.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut ui = env
        .cmd(&["ui", "--port", "0", "--open"])
        .env("PATH", &path)
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let token = line.trim().rsplit("token=").next().unwrap().to_string();
    assert!(token.len() >= 16, "{line}");
    std::thread::sleep(Duration::from_millis(500));

    let roots = [
        (env.state.as_path(), true),
        (env.home.as_path(), true),
        (env.cwd.as_path(), false),
        (tmp.as_path(), true),
    ];
    let holding_secret = assert_private(&roots, SECRET);
    let holding_token = assert_private(&roots, &token);
    let _ = ui.kill();
    let _ = ui.wait();
    assert!(
        holding_secret > 0,
        "no file holds the job's environment: nothing was checked"
    );
    assert!(
        holding_token > 0,
        "no file holds the dashboard's token: nothing was checked"
    );
}
