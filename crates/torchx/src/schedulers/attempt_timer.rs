//! The recovery contract's attempt timer for container schedulers whose engine sends no
//! signal before its own limit (AWS Batch, Kubernetes, MCAD): `sh` in the container runs the
//! role's command, sends the checkpoint signal that long before the limit, SIGTERM at it and
//! SIGKILL a grace later, passes on the engine's SIGTERM, and exits with the command's status.
//! The engine's own limit is set [`BACKSTOP`] later, for a container whose timer could not
//! act. The image needs `sh`.

// The timer serves the container schedulers (features `aws`, `kubernetes`); LSF, always built,
// uses only the attempt count.
#![cfg_attr(
    not(any(feature = "aws", feature = "kubernetes", feature = "docker")),
    allow(dead_code)
)]

use crate::specs::Recovery;

/// Seconds between SIGTERM at the limit and SIGKILL.
pub(crate) const KILL_GRACE: u64 = 10;
/// How much later than the attempt's limit the engine's own limit is set.
pub(crate) const BACKSTOP: u64 = KILL_GRACE + 30;

/// `$1` limit (0: none), `$2` signal, `$3` its seconds before the limit, `$4` grace, `$5`
/// max_retries, `$6` the requeue exit code; then the command. A first line may export
/// `TORCHX_ATTEMPT` from the engine.
///
/// Every process the command starts carries `TORCHX_ATTEMPT_MARK` in its environment, in
/// whatever session it moves to (torchrun's workers): signals (the checkpoint signal, SIGTERM
/// at the limit or from the engine, which it is also passed to this shell, SIGKILL after the
/// grace) reach all of them, not only a wrapper (`sh -c`, torchrun) that may die of one. After
/// a signal the attempt ends when the last of them has, so a trainer whose wrapper died still
/// saves. Any of them that creates `TORCHX_REQUEUE_FILE` (by default in the container's own
/// temporary directory: it does not outlive the attempt) asks for a requeue: the exit status
/// is then the requeue code, whatever the command's.
const TIMER: &str = r#"limit=$1 sig=$2 before=$3 grace=$4 requeue_code=$6; export TORCHX_MAX_RETRIES=$5; shift 6
# Not from the environment: a variable of the same name there must not steer this shell.
child= early= sent= reaped= signalled= to_command= timer=
export TORCHX_REQUEUE_FILE="${TORCHX_REQUEUE_FILE:-${TMPDIR:-/tmp}/torchx-requeue-$$}"
rm -f "$TORCHX_REQUEUE_FILE"
mark="torchx-$$-$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date +%s)-"
forward() {
    signalled=1
    [ -n "${child:-}" ] || early=$1
    sent=
    for p in $(ours); do
        kill -s "$1" "$p" 2>/dev/null
        [ "$p" != "${child:-}" ] || sent=1
    done
    # Forked but not yet the command (its environment has no mark yet): signalled by its pid.
    [ -n "$sent" ] || [ -z "${child:-}" ] || [ -n "${reaped:-}" ] || kill -s "$1" "$child" 2>/dev/null
}
# The checkpoint signal goes to the command alone when it passes it on itself (torchrun told
# through PET_SIGNALS_TO_HANDLE), so each worker gets it once; to every process otherwise.
checkpoint() {
    case ",${PET_SIGNALS_TO_HANDLE:-}," in
        *",SIG$sig,"*) signalled=1; to_command=1; kill -s "$sig" "$child" 2>/dev/null ;;
        *) forward "$sig" ;;
    esac
}
# Trapped before the command starts: a signal that comes early (a slow container start) must
# not end this shell, and is passed on once the command is there.
trap 'forward TERM' TERM
[ "$sig" = TERM ] || trap checkpoint "$sig"
TORCHX_ATTEMPT_MARK=$mark "$@" &
child=$!
[ -z "${early:-}" ] || forward "$early"
if [ "$limit" -gt 0 ]; then
    (sleep $((limit - before)); kill -s "$sig" $$; sleep "$before"; kill -s TERM $$; sleep "$grace"; forward KILL) 2>/dev/null &
    timer=$!
fi
while :; do
    wait "$child"
    code=$?
    kill -0 "$child" 2>/dev/null || break
done
# A wait a trapped signal woke (128 + its number) while the shell reaped the command in the
# trap (a command substitution's wait reaps any child; busybox's sh often does so under load):
# its status is still to be had (127 once it was given).
if [ "$code" -gt 128 ]; then
    wait "$child"
    last=$?
    [ "$last" = 127 ] || code=$last
fi
reaped=1
# It died of the signal instead of passing it on (a torch without --signals-to-handle).
if [ -n "${to_command:-}" ] && [ "$code" -gt 128 ] && [ "$(kill -l "$code" 2>/dev/null)" = "$sig" ]; then
    forward "$sig"
fi
# The rest may still be saving: they have the checkpoint lead and the grace, then are killed
# (and given 5 s more to go).
if [ -n "${signalled:-}" ]; then
    polls=0 bound=$(((before + grace) * 5))
    while [ -n "$(ours)" ]; do
        polls=$((polls + 1))
        [ "$polls" -lt "$bound" ] || forward KILL
        [ "$polls" -lt $((bound + 25)) ] || break
        sleep 0.2
    done
fi
[ -n "${timer:-}" ] && kill "$timer" 2>/dev/null
if [ -e "$TORCHX_REQUEUE_FILE" ]; then
    echo "torchx: a process asked for a requeue (TORCHX_REQUEUE_FILE); exit code $code" >&2
    exit "$requeue_code"
fi
exit "$code""#;

/// `ours`: the pids whose environment holds exactly `TORCHX_ATTEMPT_MARK=$mark`, one entry of
/// the NUL-separated `/proc/PID/environ` matched whole (`grep -zx`) where grep can; an older
/// grep matches a substring, which the mark's trailing `-` keeps from matching a longer mark.
/// The hang watch's own processes (`hang_watch.rs`: its command lines name `torchx-watch`) are
/// not the command's: the watch passes signals on to its command itself, and its pumps must
/// outlive the command's last line.
const OURS: &str = r#"exact=
if printf 'a\0' | grep -qzxF a 2>/dev/null; then exact=-zx; fi
ours() {
    for f in $(grep -lsF $exact "TORCHX_ATTEMPT_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null); do
        f=${f#/proc/}
        f=${f%/environ}
        case $(tr '\0' ' ' 2>/dev/null <"/proc/$f/cmdline") in
            *torchx-watch*) ;;
            *) echo "$f" ;;
        esac
    done
}"#;

/// Where the engine does not tell a container its attempt, the timer counts them in the
/// checkpoint directory (on a mount that outlives the container), one file per replica, named
/// by `TORCHX_ATTEMPT_KEY` or else its hostname (stable across restarts on Kubernetes, MCAD and
/// SageMaker).
const COUNT_ATTEMPTS: &str = r#"if [ -n "${TORCHX_CHECKPOINT_DIR:-}" ]; then
    key=${TORCHX_ATTEMPT_KEY:-$(hostname 2>/dev/null || cat /etc/hostname)}
    count="$TORCHX_CHECKPOINT_DIR/.torchx-attempts-$key"
    TORCHX_ATTEMPT=$(cat "$count" 2>/dev/null || echo 0)
    echo $((TORCHX_ATTEMPT + 1)) >"$count"
    export TORCHX_ATTEMPT
fi"#;

/// `entrypoint args…` under the timer. `attempt` is a shell line that exports
/// `TORCHX_ATTEMPT` from what the engine tells the container, where it tells one; without it
/// the attempts are counted in `TORCHX_CHECKPOINT_DIR`.
pub(crate) fn timed_command(
    r: &Recovery,
    max_retries: u32,
    attempt: Option<&str>,
    entrypoint: &str,
    args: &[String],
) -> Vec<String> {
    let (sig, before) = r
        .checkpoint_signal
        .map_or(("TERM", 0), |s| (s.signal.name(), s.seconds));
    let script = format!("{}\n{OURS}\n{TIMER}", attempt.unwrap_or(COUNT_ATTEMPTS));
    let mut cmd: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        script,
        "torchx-attempt".into(),
        r.time_limit.unwrap_or(0).to_string(),
        sig.into(),
        before.to_string(),
        KILL_GRACE.to_string(),
        max_retries.to_string(),
        r.requeue_exit_code.to_string(),
        entrypoint.into(),
    ];
    cmd.extend(args.iter().cloned());
    cmd
}

/// `entrypoint args…` after counting its attempt (`TORCHX_ATTEMPT`) in the checkpoint
/// directory, for an engine that limits and signals the attempt itself (LSF) but does not
/// number it.
pub(crate) fn counted_command(entrypoint: &str, args: &[String]) -> Vec<String> {
    let mut cmd: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        format!("{COUNT_ATTEMPTS}\nexec \"$@\""),
        "torchx-attempt".into(),
        entrypoint.into(),
    ];
    cmd.extend(args.iter().cloned());
    cmd
}

/// The engine's own limit for an attempt of `r`, if it has one.
pub(crate) fn backstop(r: &Recovery) -> Option<u64> {
    r.time_limit.map(|limit| limit + BACKSTOP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::CheckpointSignal;

    /// Attempts of `limit` seconds, USR1 `before` seconds before the end, requeue code 75.
    fn usr1(limit: u64, before: u64) -> Recovery {
        Recovery {
            time_limit: Some(limit),
            checkpoint_signal: Some(CheckpointSignal {
                signal: crate::specs::Signal::Usr1,
                seconds: before,
            }),
            requeue_exit_code: 75,
            max_requeues: 1,
        }
    }

    /// No limit and no checkpoint signal: the shell only passes signals on and turns a requeue
    /// request into code 75.
    fn untimed() -> Recovery {
        Recovery {
            time_limit: None,
            checkpoint_signal: None,
            requeue_exit_code: 75,
            max_requeues: 0,
        }
    }

    /// The process of `cmd` (a `timed_command`: the program, then its arguments).
    fn process(cmd: &[String]) -> std::process::Command {
        let mut c = std::process::Command::new(&cmd[0]);
        c.args(&cmd[1..]);
        c
    }

    /// `child`'s exit status once it ends, `None` if it has not within `bound`.
    fn ended_within(
        child: &mut std::process::Child,
        bound: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + bound;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The timer under a real `sh`: the signal comes before the limit and the command's exit
    /// status (75 from its trap) is the container's; without a limit it just runs.
    #[test]
    fn the_timer_signals_before_the_limit_and_keeps_the_exit_status() {
        // The signal comes 3 s in: a `sh -c` that has not yet set its trap (a loaded machine)
        // would die of it.
        let r = usr1(5, 2);
        let script = "trap 'echo saved $TORCHX_ATTEMPT $TORCHX_MAX_RETRIES; exit 75' USR1; \
                      while :; do sleep 0.1; done";
        let cmd = timed_command(
            &r,
            3,
            Some("export TORCHX_ATTEMPT=7"),
            "sh",
            &["-c".into(), script.into()],
        );
        let started = std::time::Instant::now();
        let out = process(&cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(75));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "saved 7 3\n");
        let took = started.elapsed();
        assert!(took >= std::time::Duration::from_millis(2900), "{took:?}");
        let quick = Recovery {
            time_limit: None,
            ..r
        };
        let cmd = timed_command(&quick, 0, None, "sh", &["-c".into(), "exit 4".into()]);
        let out = process(&cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(4));
    }

    /// Under a wrapper that dies of the checkpoint signal (`sh -c`, as TorchX's `utils.sh`) and
    /// with a trainer in a session of its own (as torchrun's workers), the signal reaches the
    /// trainer, the attempt waits for it to save, and its request makes the exit the requeue
    /// code.
    #[test]
    fn the_signal_reaches_processes_under_a_wrapper_and_the_attempt_waits_for_them() {
        let r = usr1(4, 1); // the signal 3 s in: the traps are set by then, even on a loaded machine
        let tmp = tempfile::tempdir().unwrap();
        let saved = tmp.path().join("saved");
        let trainer = format!(
            "trap 'sleep 0.5; echo ok > {}; touch \"$TORCHX_REQUEUE_FILE\"; exit 0' USR1; \
             while :; do sleep 0.1; done",
            saved.display()
        );
        let inner = format!("setsid bash -c \"{trainer}\" & wait");
        let cmd = timed_command(&r, 0, Some(":"), "sh", &["-c".into(), inner]);
        let out = process(&cmd).env("TMPDIR", tmp.path()).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(75),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), "ok\n");
    }

    /// A signal that wakes the shell's `wait` while the command ends during the trap (the
    /// trap's command substitution reaps it) loses nothing: the exit status is the command's,
    /// not the signal's 128 + 10.
    #[test]
    fn a_command_that_ends_while_the_trap_runs_keeps_its_status() {
        // The command ignores USR1, signals the shell itself and ends 20 ms later, while the
        // trap is listing the attempt's processes (slowed by forty more of them).
        let r = Recovery {
            time_limit: None,
            ..usr1(60, 1)
        };
        let script = "trap '' USR1; i=0; while [ $i -lt 40 ]; do sleep 1 & i=$((i+1)); done; \
                      kill -s USR1 $PPID; sleep 0.02; exit 3";
        let cmd = timed_command(&r, 0, Some(":"), "sh", &["-c".into(), script.into()]);
        let out = process(&cmd).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `ours` lists the processes whose environment holds the mark exactly: not one whose mark
    /// the mark prefixes, nor one that holds it inside another variable.
    #[test]
    fn ours_matches_the_mark_exactly() {
        let spawn = |env: &[(&str, &str)]| {
            std::process::Command::new("sleep")
                .arg("30")
                .envs(env.iter().copied())
                .spawn()
                .unwrap()
        };
        let mut exact = spawn(&[("TORCHX_ATTEMPT_MARK", "torchx-1-2-")]);
        let mut longer = spawn(&[("TORCHX_ATTEMPT_MARK", "torchx-1-2-3-")]);
        let mut inside = spawn(&[("OTHER", "xTORCHX_ATTEMPT_MARK=torchx-1-2-")]);
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("{OURS}\nmark=torchx-1-2-; ours")])
            .output()
            .unwrap();
        let pids: Vec<u32> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        for c in [&mut exact, &mut longer, &mut inside] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert_eq!(
            pids,
            [exact.id()],
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A process that ignores the engine's SIGTERM does not hold the container for ever: after
    /// the grace the timer kills it and ends.
    #[test]
    fn the_wait_for_the_rest_is_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let pid_file = tmp.path().join("daemon");
        // A daemon in its own session that ignores TERM, under a wrapper that does not.
        let inner = format!(
            "setsid sh -c \"echo \\$\\$ > {}; trap '' TERM; while :; do sleep 0.1; done\" & wait",
            pid_file.display()
        );
        let mut cmd = timed_command(&untimed(), 0, Some(":"), "sh", &["-c".into(), inner]);
        cmd[7] = "1".into(); // the grace ($4), 1 s for the test
        let mut child = process(&cmd)
            .env("TMPDIR", tmp.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let daemon: u32 = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        // The engine stops the container.
        crate::sys::signal_pid(child.id(), crate::sys::SIGTERM);
        let ended = ended_within(&mut child, std::time::Duration::from_secs(15));
        let daemon_alive = crate::sys::pid_alive(daemon, None);
        crate::sys::signal_pid(daemon, crate::sys::SIGKILL);
        let _ = child.kill();
        assert!(ended.is_some(), "the timer waited for ever");
        assert!(!daemon_alive, "the daemon was left running");
    }

    /// With `PET_SIGNALS_TO_HANDLE` naming the checkpoint signal, the command (torchrun) gets
    /// it alone and its worker gets it once, from the command; a command that dies of it
    /// instead (an older torch) has its worker get it once, from the timer.
    #[test]
    fn a_command_that_forwards_the_signal_gets_it_alone() {
        let r = usr1(4, 1); // the signal 3 s in: the traps are set by then, even on a loaded machine
        for forwards in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let got = tmp.path().join("got");
            let worker = format!(
                "trap 'echo usr1 >> {}; sleep 0.3; touch \"$TORCHX_REQUEUE_FILE\"; exit 0' USR1; \
                 while :; do sleep 0.1; done",
                got.display()
            );
            let command = if forwards {
                format!(
                    "setsid bash -c \"{worker}\" & w=$!; trap 'kill -USR1 $w' USR1; \
                     wait $w; wait $w"
                )
            } else {
                format!("setsid bash -c \"{worker}\" & wait")
            };
            let cmd = timed_command(&r, 0, Some(":"), "bash", &["-c".into(), command]);
            let out = process(&cmd)
                .env("TMPDIR", tmp.path())
                .env(
                    crate::specs::TORCHRUN_SIGNALS_ENV,
                    "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
                )
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(75), "forwards={forwards}: {stderr}");
            let got = std::fs::read_to_string(&got).unwrap();
            assert_eq!(got, "usr1\n", "forwards={forwards}");
        }
    }

    /// The engine's SIGTERM at any moment of the start (before the shell traps it, before the
    /// command is forked, between its fork and its exec) ends the attempt with it: a signal
    /// the trap took before the command was there is passed on, not swallowed. The command is
    /// found only at the end of a long PATH, so its forked shell looks for it for tens of
    /// milliseconds before it is the command (as on a loaded machine or a slow container start).
    #[test]
    fn a_sigterm_early_in_the_start_ends_the_attempt() {
        let tmp = tempfile::tempdir().unwrap();
        let late = tmp.path().join("late");
        std::fs::create_dir(&late).unwrap();
        let sleep = ["/usr/bin/sleep", "/bin/sleep"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap();
        std::os::unix::fs::symlink(sleep, late.join("torchx-late-sleep")).unwrap();
        let misses: Vec<String> = (0..12_000).map(|i| format!("/n/{i}")).collect();
        let path = format!(
            "{}:{}:{}",
            std::env::var("PATH").unwrap_or_default(),
            misses.join(":"),
            late.display()
        );
        let cmd = timed_command(
            &untimed(),
            0,
            Some(":"),
            "torchx-late-sleep",
            &["30".into()],
        );
        for delay_ms in 0..60 {
            let mut child = process(&cmd)
                .env("TMPDIR", tmp.path())
                .env("PATH", &path)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            crate::sys::signal_pid(child.id(), crate::sys::SIGTERM);
            let ended = ended_within(&mut child, std::time::Duration::from_secs(10));
            let _ = child.kill();
            let _ = child.wait();
            assert!(
                ended.is_some(),
                "a SIGTERM {delay_ms} ms into the start was swallowed"
            );
        }
    }

    /// Variables with the shell's own names in the job's environment do not steer it: a
    /// `timer` pid is not killed, an `early` signal is not sent.
    #[test]
    fn the_shells_variables_are_not_taken_from_the_environment() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let cmd = timed_command(
            &untimed(),
            0,
            Some(":"),
            "sh",
            &["-c".into(), "sleep 0.3; exit 7".into()],
        );
        let out = process(&cmd)
            .env("TMPDIR", tmp.path())
            .env("timer", bystander.id().to_string())
            .env("early", "KILL")
            .env("signalled", "1")
            .output()
            .unwrap();
        let bystander_alive = bystander.try_wait().unwrap().is_none();
        let _ = bystander.kill();
        let _ = bystander.wait();
        assert_eq!(
            out.status.code(),
            Some(7),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(bystander_alive, "the process named by $timer was killed");
    }

    /// A requeue asked through TORCHX_REQUEUE_FILE by a process under a wrapper, whatever the
    /// command's status (0 or a failure), is the requeue code; the request does not outlive
    /// the attempt.
    #[test]
    fn a_requeue_file_asks_for_a_requeue_whatever_the_exit() {
        let r = Recovery {
            time_limit: None,
            checkpoint_signal: None,
            requeue_exit_code: 75,
            max_requeues: 1,
        };
        let tmp = tempfile::tempdir().unwrap();
        let run = |script: &str| {
            let inner = format!("sh -c '{script}'");
            let cmd = timed_command(&r, 0, Some(":"), "sh", &["-c".into(), inner]);
            process(&cmd)
                .env("TMPDIR", tmp.path())
                .output()
                .unwrap()
                .status
                .code()
        };
        assert_eq!(run("touch \"$TORCHX_REQUEUE_FILE\"; exit 0"), Some(75));
        assert_eq!(run("touch \"$TORCHX_REQUEUE_FILE\"; exit 3"), Some(75));
        assert_eq!(run("exit 3"), Some(3));
        assert_eq!(run("exit 0"), Some(0));
    }
}
