//! README.md's examples, run as written: the component file and the quick tour (with the
//! tour's placeholder handle replaced by a real one).

mod support;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{stderr, stdout, Env};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap()
}

/// The body of the first fenced block of `lang` after `heading`.
fn block_after(text: &str, heading: &str, lang: &str) -> String {
    let rest = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("no `{heading}`"))..];
    let start = rest.find(&format!("```{lang}\n")).unwrap() + lang.len() + 4;
    let body = &rest[start..];
    body[..body.find("```").unwrap()].to_string()
}

/// `sh -c line` in the test's isolated environment, with this build's `torchx` first on PATH.
fn shell(env: &Env, line: &str) -> Command {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_torchx"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut c = env.cmd_of("sh".as_ref(), &["-c", line]);
    c.env("PATH", path);
    c
}

fn run_line(env: &Env, line: &str) -> Output {
    shell(env, line).output().unwrap()
}

#[test]
fn component_file_example_runs_as_written() {
    let env = Env::new();
    let text = readme();
    std::fs::write(
        env.cwd.join("components.toml"),
        block_after(&text, "### Component files", "toml"),
    )
    .unwrap();
    // The component runs `python train.py --lr {{lr}}`: a train.py that shows what it got.
    std::fs::write(
        env.cwd.join("train.py"),
        "import sys\nprint('train got', sys.argv[1:])\n",
    )
    .unwrap();
    let line = "torchx run ./components.toml:train --lr 0.1";
    assert!(text.contains(line), "README no longer shows `{line}`");
    // Python 3 is part of the set-up the README requires: its absence is a failure.
    let python = Command::new("python3").arg("--version").output();
    assert!(python.is_ok(), "python3 is not on PATH: {python:?}");
    // `python` may be missing where only `python3` exists: give the job one.
    let shim = env.cwd.join("bin");
    std::fs::create_dir_all(&shim).unwrap();
    std::os::unix::fs::symlink(which("python3"), shim.join("python")).unwrap();
    let out = shell(&env, &format!("PATH={}:$PATH {line}", shim.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("trainer/0 train got ['--lr', '0.1']"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn quick_tour_runs_as_written() {
    let env = Env::new();
    let tour = block_after(&readme(), "## A quick tour", "sh");
    std::fs::write(
        env.cwd.join("app.yaml"),
        "name: hello\nroles:\n- {name: hello, image: x, entrypoint: echo, args: [hi]}\n",
    )
    .unwrap();
    std::fs::write(
        env.cwd.join("components.toml"),
        block_after(&readme(), "### Component files", "toml").replace("python", "echo"),
    )
    .unwrap();
    let mut handle: Option<String> = None;
    let mut tailing: Option<(String, Child)> = None;
    let mut ran = 0;
    for line in tour.lines() {
        let cmd = line.split(" #").next().unwrap().trim().to_string();
        if cmd.is_empty() {
            continue;
        }
        // The tour's placeholder handle names the job the tour detached.
        let cmd = match &handle {
            Some(h) => cmd.replace("local_cwd://torchx/sh-xxxx", h.as_str()),
            None => cmd,
        };
        // Shell completions go to a scratch file rather than /etc.
        let cmd = cmd.replace("/etc/bash_completion.d/torchx", "completions.bash");
        if cmd.contains("--tail") {
            // Follows until the job ends: keep it running until the tour cancels the job.
            let child = shell(&env, &cmd)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            tailing = Some((cmd, child));
            continue;
        }
        let out = run_line(&env, &cmd);
        assert_eq!(out.status.code(), Some(0), "`{cmd}`: {}", stderr(&out));
        ran += 1;
        if cmd.contains("--detach") {
            handle = Some(stdout(&out).trim().to_string());
        }
        if cmd.starts_with("torchx cancel") {
            let (tail_cmd, child) = tailing.take().expect("the tour tails before it cancels");
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut child = child;
            while child.try_wait().unwrap().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "`{tail_cmd}` kept following a cancelled job"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "`{tail_cmd}`: {}", stderr(&out));
        }
    }
    assert!(ran >= 15, "only {ran} tour lines ran");
    assert!(std::fs::metadata(env.cwd.join("completions.bash")).is_ok_and(|m| m.len() > 0));
}

fn which(program: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap()
}

/// The recovery section's runnable example, as written: the counter reaches 25 over several
/// attempts and `status` shows them.
#[test]
fn recovery_example_runs_as_written() {
    let env = Env::new();
    let text = readme();
    let section = &text[text
        .find("### Time limits, preemption and requeues")
        .unwrap()..];
    let example = block_after(section, "A runnable example", "sh");
    let out = run_line(&env, &example);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.contains("reached 25 in attempt"), "{all}");
    assert!(all.contains("attempt 0: requeued (exit code 75)"), "{all}");
}

/// The arrays-and-sweeps example, as written: four tasks, all SUCCEEDED, each with its point.
#[test]
fn sweep_example_runs_as_written() {
    let env = Env::new();
    let example = block_after(&readme(), "### Arrays and sweeps", "sh");
    let out = run_line(&env, &example);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("State: SUCCEEDED"), "{text}");
    assert!(text.contains("Tasks: 4 (SUCCEEDED 4)"), "{text}");
    assert!(text.contains("bs=64 lr=0.01"), "{text}");
}

/// The dependencies example, as written: each job starts after the one before it ended, and
/// the data the first wrote reaches the second.
#[test]
fn dependencies_example_runs_as_written() {
    let env = Env::new();
    let example = block_after(&readme(), "### Dependencies (`--after`)", "sh");
    let out = run_line(&env, &example);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("train is over"), "{}", stderr(&out));
    assert!(!env.cwd.join("data.txt").exists());
    let log = stdout(&env.run(&["log", env.list()[1]["app_handle"].as_str().unwrap()]));
    assert!(log.contains("prepared"), "{log}");
}

/// The pipeline example, as written: the value passes through the steps, the `notok` step is
/// skipped, and the dry run shows the DAG.
#[test]
fn pipeline_example_runs_as_written() {
    let env = Env::new();
    let text = readme();
    let file = block_after(&text, "### Pipelines", "yaml");
    std::fs::write(env.cwd.join("pipe.yaml"), file).unwrap();
    let commands = block_after(&text, "### Pipelines", "sh");
    let out = run_line(&env, &commands);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("=== PIPELINE demo: 4 steps ==="),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains(": SUCCEEDED after"),
        "{}",
        stderr(&out)
    );
    let handle = stdout(&out).lines().last().unwrap().trim().to_string();
    let log = stdout(&env.run(&["log", &handle]));
    assert!(
        log.contains("evaluate:sh/0 value: 42, after local_cwd://"),
        "{log}"
    );
}

/// The rerun example, as written: task 3 fails once, the rerun runs it alone, as the first run
/// did (`task 3 of 5`), and succeeds.
#[test]
fn rerun_example_runs_as_written() {
    let env = Env::new();
    let example = block_after(&readme(), "rerun the failed tasks of the group", "sh");
    let out = run_line(&env, &example);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let groups: Vec<String> = env
        .list()
        .iter()
        .filter_map(|row| row["app_handle"].as_str())
        .filter(|h| h.contains("/~sh-"))
        .map(str::to_string)
        .collect();
    assert_eq!(groups.len(), 2, "the first run and the rerun: {groups:?}");
    let status = env.status(&groups[0]);
    assert_eq!(status["state"], "SUCCEEDED", "{status}");
    let log = stdout(&env.run(&["log", &groups[0]]));
    assert!(log.contains("task 3 of 5"), "{log}");
    assert!(
        !log.contains("task 0 of"),
        "only the failed task ran again: {log}"
    );
}

/// The hang example, as written: the job is stopped as hung and its stacks show the sleep.
#[test]
fn hang_example_runs_as_written() {
    let env = Env::new();
    let example = block_after(&readme(), "### Hangs (`--hang_timeout`)", "sh");
    let out = run_line(&env, &example);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("trainer/0 hung: no progress (output or heartbeat) for 3s"),
        "{}",
        stderr(&out)
    );
    let stacks = stdout(&out);
    assert!(stacks.contains("--- trainer/0 attempt 0 ---"), "{stacks}");
    assert!(stacks.contains("sleep 600"), "{stacks}");
}
