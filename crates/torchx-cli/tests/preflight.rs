//! Pre-flight on `torchx run`: a job whose script is not where it runs would fail as it
//! starts; it is refused before anything is recorded or queued, naming the check and
//! `--skip_preflight`, and `--dryrun` shows the finding without refusing.

mod support;

use support::{stderr, stdout, Env};

#[test]
fn a_missing_script_is_refused_before_anything_is_recorded() {
    let env = Env::new();
    for args in [
        &["utils.python", "--script", "tain.py"][..],
        &["dist.ddp", "-j", "1x2", "--script", "tain.py"][..],
        &["utils.sh", "./tain.sh", "--lr", "1"][..],
        &["utils.sh", "bash", "tain.sh"][..],
    ] {
        let mut run = vec!["run"];
        run.extend_from_slice(args);
        let out = env.run(&run);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("pre-flight: role"), "{err}");
        assert!(
            err.contains("tain.") && err.contains("does not exist in"),
            "{err}"
        );
        assert!(err.contains("--skip_preflight"), "{err}");
        assert_eq!(env.apps(), 0, "{args:?}: nothing recorded");
        // The dry run shows it, and succeeds.
        let mut dry = vec!["run", "--dryrun"];
        dry.extend_from_slice(args);
        let out = env.run(&dry);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("=== PRE-FLIGHT"), "{}", stdout(&out));
    }
    // Once the file is there, or with --skip_preflight, it runs.
    std::fs::write(env.cwd.join("train.py"), "print('trained')\n").unwrap();
    let out = env.run(&["run", "utils.python", "--script", "train.py"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&[
        "run",
        "--skip_preflight",
        "utils.python",
        "--script",
        "tain.py",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "it ran and failed: {}",
        stderr(&out)
    );
    assert_eq!(env.apps(), 2);
}
