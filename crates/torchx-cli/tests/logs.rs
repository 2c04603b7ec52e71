//! Logs of any size stream with bounded memory: `torchx log` and `torchx log --tail` of a
//! 50 MB log hold a few chunks, never the file (they once read the whole rest of the file and
//! drained it line by line: quadratic time, the whole log in memory).

mod support;

use std::io::Read;
use std::process::{Command, Stdio};

use support::{stderr, Env};

/// Runs `cmd` to its end, reading its stdout slowly enough that it blocks on the pipe, and
/// samples its anonymous memory (heap) after every read. Returns the bytes printed, the exit
/// code and the largest `RssAnon` seen, in KiB. (Not `ru_maxrss`: a child spawned with vfork
/// inherits its parent's high-water mark at exec.)
fn run_sampled(mut cmd: Command) -> (u64, Option<i32>, u64) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut out = child.stdout.take().unwrap();
    let (mut bytes, mut peak) = (0u64, 0u64);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        bytes += n as u64;
        let anon = std::fs::read_to_string(&status_path)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        peak = peak.max(anon);
    }
    (bytes, child.wait().unwrap().code(), peak)
}

#[test]
fn a_50_mb_log_streams_with_bounded_memory() {
    let env = Env::new();
    // 50 lines of 1 MiB each, plus an unterminated last line.
    let script = "i=0; while [ $i -lt 50 ]; do head -c 1048576 /dev/zero | tr '\\0' x; echo; \
                  i=$((i+1)); done; printf end";
    let out = env.run(&["run", "utils.sh", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let handle = support::stdout(&out).trim().to_string();
    // Each line is printed as `sh/0 <line>\n`.
    let expected = 50 * (1_048_576 + 6) + ("sh/0 end\n".len() as u64);
    for args in [
        vec!["log", handle.as_str(), "--streams", "stdout"],
        vec!["log", handle.as_str(), "--tail"],
    ] {
        let mut cmd = env.cmd(&args);
        cmd.env_remove("RUST_BACKTRACE");
        let (bytes, code, anon_kib) = run_sampled(cmd);
        assert_eq!(code, Some(0), "{args:?}");
        assert_eq!(bytes, expected, "{args:?} printed {bytes} bytes");
        eprintln!("{args:?}: peak heap {anon_kib} KiB");
        assert!(
            anon_kib < 16 * 1024,
            "{args:?} held {anon_kib} KiB of heap for a 50 MB log: it is read whole, not streamed"
        );
    }
}
