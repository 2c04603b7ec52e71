//! The hang watch where no torchx process runs beside the job: Slurm's batch script runs each
//! watched replica under it, and in a container (Kubernetes, MCAD, AWS Batch, SageMaker) it is the command
//! of the recovery contract's shell (`attempt_timer.rs`). `sh` runs the replica's command with
//! its stdout and stderr pumped through two `cat`s, whose read counts (`/proc/PID/io`) are the
//! replica's output, and watches them and the mtime of `TORCHX_HEARTBEAT_FILE`. After
//! `timeout` seconds with neither, the replica is hung: the stacks of its processes (those
//! whose environment holds its `TORCHX_ATTEMPT_MARK`) are taken (`py-spy dump` where it is on
//! PATH and attaches, else command line, state and wchan, as local_cwd's watchdog does), then
//! the processes are stopped: the checkpoint signal first when the job recovers (a grace to
//! save), then SIGTERM, SIGKILL 10 s later.
//!
//! On Slurm the stacks and a `hung` marker go next to the attempts file, where the batch
//! script and `describe` read them; in a container the stacks go to its log (read back by
//! [`stacks_from_logs`]), the hang to Kubernetes' termination message and, when it is a
//! failure, to the exit code [`HUNG_EXIT_CODE`] (AWS Batch); a recovering job's hang asks the
//! timer for a requeue.
//!
//! The pumps ignore every signal the job's processes get (a trainer that prints while it
//! saves must not die of a broken pipe) and the watching shells survive them: on Slurm the
//! engine signals each process of the step itself; in a container the watch passes what the
//! timer sends it on to its command.

// The container mode serves the container schedulers (features `aws`, `kubernetes`); Slurm,
// always built, uses the directory mode only.
#![cfg_attr(not(any(feature = "aws", feature = "kubernetes")), allow(dead_code))]

use crate::scheduler::hang_stacks::{STACKS_BEGIN, STACKS_END};

/// `$1` directory of the stacks and markers, `$2` attempt, `$3` checkpoint signal (empty: none,
/// the hang is a failure), `$4` seconds to save after it, `$5` hang timeout (seconds), `$6`
/// the replica (`role/N`); then the command.
const WATCH: &str = r#"dir=$1 attempt=${2:-${TORCHX_ATTEMPT:-0}} sig=$3 grace=$4 timeout=$5 label=$6; shift 6
# `role/+START` (AWS Batch): the replica is the node's index less the role's first node.
# `role/@host` (SageMaker): the replica is the host's number (`algo-N`) less one, from the
# training toolkit's SM_CURRENT_HOST or the platform's resourceconfig.json.
case $label in
    */+*) label="${label%%/+*}/$((${AWS_BATCH_JOB_NODE_INDEX:-0} - ${label##*/+}))" ;;
    */@host)
        host=${SM_CURRENT_HOST:-$(sed -n 's/.*"current_host" *: *"\([^"]*\)".*/\1/p' /opt/ml/input/config/resourceconfig.json 2>/dev/null)}
        n=${host##*-}
        case $n in "" | *[!0-9]*) n=1 ;; esac
        label="${label%/@host}/$((n - 1))" ;;
esac
name=$(printf '%s' "$label" | tr / -)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torchx-watch.XXXXXX") || exec "$@"
export TORCHX_HEARTBEAT_FILE="${dir:-$tmp}/heartbeat.$attempt.$name"
: >"$TORCHX_HEARTBEAT_FILE"
mark=${TORCHX_ATTEMPT_MARK:-torchx-watch-$$-$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date +%s)-}
mkfifo "$tmp/o" "$tmp/e" || exec "$@"
(trap '' HUP INT TERM QUIT USR1 USR2; exec cat "$tmp/o") &
o=$!
(trap '' HUP INT TERM QUIT USR1 USR2; exec cat "$tmp/e" >&2) &
e=$!
trap : HUP INT TERM QUIT USR1 USR2
export PYTHONFAULTHANDLER="${PYTHONFAULTHANDLER-1}"
TORCHX_ATTEMPT_MARK=$mark "$@" >"$tmp/o" 2>"$tmp/e" &
child=$!
# In a container the watch is the timer's command: what the timer passes to its command is for
# the replica's. (On Slurm the engine signals every process of the step itself.)
if [ -z "$dir" ]; then
    for s in HUP INT TERM QUIT USR1 USR2; do trap "kill -s $s \$child 2>/dev/null" "$s"; done
fi
exact=
if printf 'a\0' | grep -qzxF a 2>/dev/null; then exact=-zx; fi
# A process's command line, empty once it is gone (errors first to /dev/null: it may go
# between the listing and the read).
cmdline() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline"; }
# The replica's live processes: marked, but not this watch (its shells and pumps name
# torchx-watch).
ours() {
    for f in $(grep -lsF $exact "TORCHX_ATTEMPT_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null); do
        f=${f#/proc/}
        p=${f%/environ}
        case $(cmdline "$p") in
            "" | *torchx-watch*) ;;
            *) echo "$p" ;;
        esac
    done
}
signal_ours() {
    for p in $(ours); do kill -s "$1" "$p" 2>/dev/null; done
}
gone_within() {  # SECONDS: true once no process of the replica is left
    n=0
    while [ -n "$(ours)" ]; do
        [ "$n" -lt $(($1 * 5)) ] || return 1
        n=$((n + 1))
        sleep 0.2
    done
}
pumped() {
    n=0
    for p in $o $e; do
        while read -r k v; do [ "$k" = rchar: ] && n=$((n + v)); done <"/proc/$p/io"
    done 2>/dev/null
}
beat() { stat -c %Y "$TORCHX_HEARTBEAT_FILE" 2>/dev/null || date -r "$TORCHX_HEARTBEAT_FILE" +%s 2>/dev/null; }
capture() {
    pids=$(ours)
    spy=$(command -v py-spy)
    dumps=
    if [ -n "$spy" ]; then
        for p in $pids; do
            (timeout 10 "$spy" dump --pid "$p" >"$tmp/stack.$p" 2>&1 || rm -f "$tmp/stack.$p") &
            dumps="$dumps $!"
        done
        [ -z "$dumps" ] || wait $dumps
    fi
    for p in $pids; do
        cmd=$(cmdline "$p" | head -c 240)
        [ -n "$cmd" ] || continue
        rank=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | sed -n 's/^RANK=//p' | head -n 1)
        if [ -s "$tmp/stack.$p" ]; then
            echo "=== $label${rank:+ rank $rank} pid $p (py-spy): $cmd"
            cat "$tmp/stack.$p"
            op=$(grep -m 1 -oE "^ +([A-Za-z0-9_<>]+\.)*($COLLECTIVES) \(" "$tmp/stack.$p" | sed -E 's/^ +//; s/ \($//; s/.*\.//')
            [ -z "$rank" ] || [ -z "$op" ] || echo "rank $rank in $op" >>"$tmp/summary"
        else
            echo "=== $label${rank:+ rank $rank} pid $p (proc): $cmd"
            grep -s '^State:' "/proc/$p/status"
            echo "waiting in: $(cat 2>/dev/null "/proc/$p/wchan")"
            case ${cmd%% *} in
                python* | */python*)
                    echo "$p" >>"$tmp/abort"
                    echo "$FAULTHANDLER_NOTE" ;;
                *) echo "$NO_PYTHON_STACK_NOTE" ;;
            esac
        fi
    done
}
watch() {
    # A subshell starts with default traps: the signals the engine sends the step's processes
    # (Slurm's checkpoint signal) must not end the watch; SIGTERM ends it quietly.
    trap '' HUP INT QUIT USR1 USR2
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    trap - CHLD
    step=$((timeout / 4))
    [ "$step" -ge 1 ] || step=1
    [ "$step" -le 5 ] || step=5
    pumped; seen=$n; beaten=$(beat); last=$(date +%s)
    while :; do
        sleep "$step" &
        s=$!
        wait "$s"
        pumped; b=$(beat); t=$(date +%s)
        if [ "$n" != "$seen" ] || [ "$b" != "$beaten" ]; then
            seen=$n beaten=$b last=$t
        elif [ $((t - last)) -ge "$timeout" ]; then
            break
        fi
    done
    trap '' TERM
    : >"$tmp/hung"
    echo "torchx: $label made no progress (output or heartbeat) for ${timeout}s: its stacks, then stopping it" >&2
    if [ -n "$dir" ]; then
        capture >"$dir/stacks.$attempt.$name.tmp" 2>/dev/null
        mv -f "$dir/stacks.$attempt.$name.tmp" "$dir/stacks.$attempt.$name"
        echo "$label $timeout" >"$dir/hung.$attempt.$name"
    else
        # In a container: the stacks in its log, the hang in Kubernetes' termination message,
        # and a recovering job's requeue asked of the timer.
        capture >"$tmp/stacks" 2>/dev/null
        { echo "$BEGIN$label attempt $attempt"; cat "$tmp/stacks"; echo "$END$label"; } >&2
        said=
        while read -r l; do said="${said:+$said, }$l"; done 2>/dev/null <"$tmp/summary"
        # Kubernetes reads a container's termination message, SageMaker a failing job's
        # FailureReason from /opt/ml/output/failure.
        msg="$HUNG$label made no progress (output or heartbeat) for ${timeout}s${said:+ ($said)}"
        [ ! -w /dev/termination-log ] || echo "$msg" >/dev/termination-log
        [ ! -d /opt/ml/output ] || [ ! -w /opt/ml/output ] || echo "$msg" >/opt/ml/output/failure
        [ -z "$sig" ] || [ -z "${TORCHX_REQUEUE_FILE:-}" ] || : >"$TORCHX_REQUEUE_FILE"
    fi
    if [ -n "$sig" ]; then
        case ",${PET_SIGNALS_TO_HANDLE:-}," in
            *",SIG$sig,"*) kill -s "$sig" "$child" 2>/dev/null ;;
            *) signal_ours "$sig" ;;
        esac
        if gone_within "$grace"; then : >"$tmp/done"; exit 0; fi
    fi
    # Python's faulthandler dumps the stacks py-spy could not take as the process dies.
    if [ -s "$tmp/abort" ]; then
        for p in $(cat "$tmp/abort"); do kill -s ABRT "$p" 2>/dev/null; done
        sleep 1
    fi
    signal_ours TERM
    gone_within 10 || signal_ours KILL
    : >"$tmp/done"
}
watch &
w=$!
# A watch that dies before its work is done (the OOM killer, a stray kill, mid-dump too) is
# started again, from a fresh timeout, and says so: the replica is never left unwatched.
# (dash wakes `wait` for the trap; bash runs it as the watch dies.)
# (`busy`: the trap runs again, nested, as each command it starts ends.)
ending= busy=
rewatch() {
    [ -z "$ending$busy" ] || return 0
    busy=1
    if [ ! -e "$tmp/done" ] && ! kill -0 "$w" 2>/dev/null && kill -0 "$child" 2>/dev/null; then
        rm -f "$tmp/hung"
        echo "torchx: the hang watch of $label ended before its work was done; watching it again" >&2
        watch &
        w=$!
    fi
    busy=
}
trap rewatch CHLD
while :; do
    wait "$child"
    code=$?
    kill -0 "$child" 2>/dev/null || break
done
ending=1
trap - CHLD
# A wait a trap woke (128 + its signal: SIGCHLD as the command ended, or one passed on) while
# the shell reaped the command: the command's status is still to be had (127 once it was given).
if [ "$code" -gt 128 ]; then
    wait "$child"
    c=$?
    [ "$c" = 127 ] || code=$c
fi
if [ -e "$tmp/hung" ]; then
    wait "$w"
    # In a container, a hang that is a failure says so by its exit code (an engine without a
    # termination message, AWS Batch, tells it by that).
    [ -n "$dir" ] || [ -n "$sig" ] || code=$HUNG_CODE
else
    kill "$w" 2>/dev/null
fi
# The pumps end with the last writer; a stray process that holds one is left to the engine.
n=0
while { kill -0 "$o" || kill -0 "$e"; } 2>/dev/null && [ "$n" -lt 50 ]; do
    n=$((n + 1))
    sleep 0.1
done
rm -rf "$tmp"
exit "$code""#;

/// How a hung container's termination message (Kubernetes) and failure reason (SageMaker)
/// start.
pub(crate) const HUNG_MESSAGE: &str = "torchx: hung: ";
/// The exit code of a container the watch stopped for a hang that is a failure (no recovery
/// option; as GNU `timeout`'s).
pub(crate) const HUNG_EXIT_CODE: i32 = 124;

/// The signal a hung replica of a recovering job gets first: its checkpoint signal, else USR1
/// (as local_cwd's machine sends).
pub(crate) fn hang_signal(checkpoint: Option<crate::specs::CheckpointSignal>) -> &'static str {
    checkpoint
        .unwrap_or(crate::specs::DEFAULT_CHECKPOINT_SIGNAL)
        .signal
        .name()
}

/// The watch's script, with its constants.
fn script() -> String {
    format!(
        "COLLECTIVES='{}' BEGIN='{STACKS_BEGIN}' END='{STACKS_END}' HUNG='{HUNG_MESSAGE}' \
         HUNG_CODE={HUNG_EXIT_CODE} FAULTHANDLER_NOTE={} NO_PYTHON_STACK_NOTE={}\n{WATCH}",
        crate::schedulers::local_cwd::COLLECTIVES.join("|"),
        crate::text::shell_quote(crate::schedulers::local_cwd::FAULTHANDLER_NOTE),
        crate::text::shell_quote(crate::schedulers::local_cwd::NO_PYTHON_STACK_NOTE)
    )
}

/// The words that run a command under the watch on Slurm: `sh -c WATCH torchx-watch DIR
/// ATTEMPT SIG GRACE`, to be followed by the timeout, the replica (`role/N`) and the command.
/// The values are shell words of the calling script (quoted or variables), placed as they are.
pub(crate) fn watch_words(dir: &str, attempt: &str, signal: &str, grace: u64) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        crate::text::shell_quote(&script()),
        "torchx-watch".into(),
        dir.into(),
        attempt.into(),
        signal.into(),
        grace.to_string(),
    ]
}

/// `command` under the watch in a container (an argv, no shell around it): stacks to the
/// container's stderr, signals passed to the command, a recovering job's hang (`signal` set)
/// asked as a requeue of the timer (`TORCHX_REQUEUE_FILE`).
pub(crate) fn in_container(
    timeout: u64,
    replica: &str,
    signal: Option<&str>,
    command: Vec<String>,
) -> Vec<String> {
    let mut words: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        script(),
        "torchx-watch".into(),
        String::new(),
        String::new(),
        signal.unwrap_or_default().into(),
        crate::schedulers::local_cwd::GRACE.as_secs().to_string(),
        timeout.to_string(),
        replica.into(),
    ];
    words.extend(command);
    words
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::in_container;
    use crate::scheduler::hang_stacks::stacks_in_log;

    /// Runs `script` under the watch (timeout `timeout`, checkpoint signal `sig`) in `dir`.
    fn watched(
        dir: &std::path::Path,
        sig: &str,
        timeout: u64,
        script: &str,
    ) -> std::process::Output {
        Command::new("sh")
            .args(["-c", &super::script(), "torchx-watch"])
            .arg(dir)
            .args([
                "0",
                sig,
                "3",
                &timeout.to_string(),
                "trainer/0",
                "sh",
                "-c",
                script,
            ])
            .env("TMPDIR", dir)
            .output()
            .unwrap()
    }

    #[test]
    fn a_quiet_command_is_hung_its_stacks_written_and_stopped() {
        let tmp = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let out = watched(tmp.path(), "", 2, "echo started; sleep 300; echo never");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(20), "{took:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
        // The watch says what it does, and nothing about processes that went meanwhile (the
        // command's shell may say its sleep was terminated).
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.starts_with(
                "torchx: trainer/0 made no progress (output or heartbeat) for 2s: its stacks, \
                 then stopping it\n"
            ),
            "{said}"
        );
        assert!(!said.contains("/proc/"), "{said}");
        let marker = std::fs::read_to_string(tmp.path().join("hung.0.trainer-0")).unwrap();
        assert_eq!(marker, "trainer/0 2\n");
        let stacks = std::fs::read_to_string(tmp.path().join("stacks.0.trainer-0")).unwrap();
        assert!(stacks.contains("=== trainer/0 pid "), "{stacks}");
        assert!(stacks.contains("sleep 300"), "{stacks}");
        assert!(
            !stacks.contains("torchx-watch"),
            "the watch's own processes: {stacks}"
        );
        // Nothing left behind in the temporary directory but the results.
        let left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("torchx-watch"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn output_or_a_heartbeat_is_progress_and_the_exit_status_is_the_commands() {
        let tmp = tempfile::tempdir().unwrap();
        let out = watched(
            tmp.path(),
            "",
            3,
            "for i in 1 2 3 4; do echo $i; echo e$i >&2; sleep 1.5; done; exit 3",
        );
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n2\n3\n4\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "e1\ne2\ne3\ne4\n");
        let out = watched(
            tmp.path(),
            "",
            3,
            "for i in 1 2 3 4; do touch \"$TORCHX_HEARTBEAT_FILE\"; sleep 1.5; done",
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(!tmp.path().join("hung.0.trainer-0").exists());
    }

    /// As on Slurm, a signal to every process of the step (the checkpoint signal before a
    /// time limit) ends neither the watch nor its pumps: a replica that ignores it and goes
    /// quiet is still found hung.
    #[test]
    fn a_signal_to_the_whole_step_does_not_end_the_watch() {
        use std::os::unix::process::CommandExt;
        let tmp = tempfile::tempdir().unwrap();
        let child = Command::new("sh")
            .args(["-c", &super::script(), "torchx-watch"])
            .arg(tmp.path())
            .args(["0", "", "3", "3", "trainer/0", "sh", "-c"])
            .arg("trap '' USR1; echo started; sleep 300")
            .env("TMPDIR", tmp.path())
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        crate::sys::signal_group(child.id(), crate::specs::Signal::Usr1.number());
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
        assert!(tmp.path().join("hung.0.trainer-0").exists(), "{out:?}");
    }

    /// A Python process py-spy cannot read (none on PATH here) dumps its threads' stacks to
    /// its stderr through faulthandler, armed for the attempt, when a hang that is a failure
    /// stops it.
    #[test]
    fn without_py_spy_faulthandler_dumps_a_python_stack() {
        // This machine's python3, by its path: the watch's PATH has no py-spy.
        let python = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
            .expect("a python3 on PATH");
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new("sh")
            .args(["-c", &super::script(), "torchx-watch"])
            .arg(tmp.path())
            .args(["0", "", "3", "2", "trainer/0"])
            .arg(&python)
            .arg("-c")
            .arg("import time\ndef stall():\n    time.sleep(300)\nprint('started', flush=True)\nstall()\n")
            .env("TMPDIR", tmp.path())
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        let stacks = std::fs::read_to_string(tmp.path().join("stacks.0.trainer-0")).unwrap();
        assert!(stacks.contains("faulthandler"), "{stacks}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Fatal Python error: Aborted"), "{stderr}");
        assert!(stderr.contains("in stall"), "{stderr}");
    }

    /// The watch killed mid-dump (py-spy still attached) is started again: the replica,
    /// still hung, is found again, its stacks taken and it is stopped.
    #[test]
    fn a_watch_killed_mid_dump_is_started_again() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let first = tmp.path().join("first-dump");
        // A py-spy whose first dump never ends (it names its pid), whose next ones answer.
        let spy = bin.join("py-spy");
        std::fs::write(
            &spy,
            format!(
                "#!/bin/sh\nif [ ! -e {0} ]; then echo $$ >{0}; exec sleep 30; fi\necho 'Thread 1: a fake stack'\n",
                first.display()
            ),
        )
        .unwrap();
        let mut perms = std::fs::metadata(&spy).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&spy, perms).unwrap();
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let child = Command::new("sh")
            .args(["-c", &super::script(), "torchx-watch"])
            .arg(tmp.path())
            .args([
                "0",
                "",
                "3",
                "2",
                "trainer/0",
                "sh",
                "-c",
                "echo started; sleep 300",
            ])
            .env("TMPDIR", tmp.path())
            .env("PATH", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let spy_pid = loop {
            if let Some(pid) = std::fs::read_to_string(&first)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                break pid;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "no dump began");
            std::thread::sleep(Duration::from_millis(100));
        };
        // py-spy ← timeout ← the dump's subshell ← the watch.
        let parent = |pid: u32| -> u32 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(1).unwrap().parse().unwrap()
        };
        let watch = parent(parent(parent(spy_pid)));
        assert_ne!(watch, child.id(), "the watch is the main shell's child");
        crate::sys::signal_pid(watch, crate::sys::SIGKILL);
        let out = child.wait_with_output().unwrap();
        assert!(started.elapsed() < Duration::from_secs(40));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("torchx: the hang watch of trainer/0 ended before its work was done; watching it again"),
            "{said}"
        );
        assert!(tmp.path().join("hung.0.trainer-0").exists(), "{said}");
        let stacks = std::fs::read_to_string(tmp.path().join("stacks.0.trainer-0")).unwrap();
        assert!(stacks.contains("a fake stack"), "{stacks}");
    }

    /// With a checkpoint signal, a hung replica gets it first and may save and end.
    #[test]
    fn a_recovering_replica_gets_the_checkpoint_signal_first() {
        let tmp = tempfile::tempdir().unwrap();
        let out = watched(
            tmp.path(),
            "USR1",
            2,
            "trap 'echo saving; exit 75' USR1; echo started; while :; do sleep 0.2; done",
        );
        assert_eq!(out.status.code(), Some(75), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started\nsaving\n");
        assert!(tmp.path().join("hung.0.trainer-0").exists());
    }

    /// In a container: the stacks go to stderr between their lines (read back from the log),
    /// the signals the timer passes on reach the command, and a recovering job's hang asks the
    /// timer for a requeue.
    #[test]
    fn in_a_container_the_stacks_go_to_the_log_and_signals_to_the_command() {
        let tmp = tempfile::tempdir().unwrap();
        let requeue = tmp.path().join("requeue");
        let sh = |script: &str| vec!["sh".to_string(), "-c".into(), script.into()];
        let cmd = in_container(
            2,
            "trainer/3",
            Some("USR1"),
            sh("trap 'echo saving; exit 75' USR1; echo started; while :; do sleep 0.2; done"),
        );
        let out = Command::new(&cmd[0])
            .args(&cmd[1..])
            .env("TMPDIR", tmp.path())
            .env("TORCHX_ATTEMPT", "4")
            .env("TORCHX_REQUEUE_FILE", &requeue)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(75), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started\nsaving\n");
        assert!(requeue.exists(), "the hang asked for no requeue");
        let log: Vec<String> = String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(str::to_string)
            .collect();
        let stacks = stacks_in_log(&log);
        assert_eq!(stacks.len(), 1, "{log:?}");
        assert_eq!((stacks[0].0.as_str(), stacks[0].1), ("trainer/3", 4));
        assert!(stacks[0].2.contains("=== trainer/3 pid "), "{log:?}");
        // A signal to the watch (the timer's, to its command) reaches the command.
        let cmd = in_container(
            60,
            "trainer/0",
            None,
            sh("trap 'echo got term; exit 7' TERM; while :; do sleep 0.2; done"),
        );
        let child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        crate::sys::signal_pid(child.id(), crate::sys::SIGTERM);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(7), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "got term\n");
    }
}
