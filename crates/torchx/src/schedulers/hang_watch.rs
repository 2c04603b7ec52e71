//! The hang watch where no torchx process runs beside the job (Slurm's batch script): `sh`
//! runs the replica's command with its stdout and stderr pumped through two `cat`s, whose
//! read counts (`/proc/PID/io`) are the replica's output, and watches them and the mtime of
//! `TORCHX_HEARTBEAT_FILE`. After `timeout` seconds with neither, the replica is hung: the
//! stacks of its processes (those whose environment holds its `TORCHX_ATTEMPT_MARK`) are
//! written (`py-spy dump` where it is on PATH and attaches, else command line, state and
//! wchan, as local_cwd's watchdog does), then a marker, then the processes are stopped: the
//! checkpoint signal first when the job recovers (a grace to save), then SIGTERM, SIGKILL
//! 10 s later. The script that started the attempt reads the marker and ends it `hung`.
//!
//! The pumps ignore every signal the job's processes get (a trainer that prints while it
//! saves must not die of a broken pipe), and the watching shell survives them: the engine
//! signals each process of the step itself.

/// `$1` directory of the stacks and markers, `$2` attempt, `$3` checkpoint signal (empty: none,
/// the hang is a failure), `$4` seconds to save after it, `$5` hang timeout (seconds), `$6`
/// the replica (`role/N`); then the command.
const WATCH: &str = r#"dir=$1 attempt=$2 sig=$3 grace=$4 timeout=$5 label=$6; shift 6
name=$(printf '%s' "$label" | tr / -)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torchx-watch.XXXXXX") || exec "$@"
export TORCHX_HEARTBEAT_FILE="$dir/heartbeat.$attempt.$name"
: >"$TORCHX_HEARTBEAT_FILE"
mark=${TORCHX_ATTEMPT_MARK:-torchx-watch-$$-$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date +%s)-}
mkfifo "$tmp/o" "$tmp/e" || exec "$@"
(trap '' HUP INT TERM QUIT USR1 USR2; exec cat "$tmp/o") &
o=$!
(trap '' HUP INT TERM QUIT USR1 USR2; exec cat "$tmp/e" >&2) &
e=$!
trap : HUP INT TERM QUIT USR1 USR2
TORCHX_ATTEMPT_MARK=$mark "$@" >"$tmp/o" 2>"$tmp/e" &
child=$!
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
        else
            echo "=== $label${rank:+ rank $rank} pid $p (proc): $cmd"
            grep -s '^State:' "/proc/$p/status"
            echo "waiting in: $(cat 2>/dev/null "/proc/$p/wchan")"
            echo "(no Python stack: not a Python process, or py-spy is not installed or cannot attach)"
        fi
    done
}
watch() {
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
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
    capture >"$dir/stacks.$attempt.$name.tmp" 2>/dev/null
    mv -f "$dir/stacks.$attempt.$name.tmp" "$dir/stacks.$attempt.$name"
    echo "$label $timeout" >"$dir/hung.$attempt.$name"
    if [ -n "$sig" ]; then
        case ",${PET_SIGNALS_TO_HANDLE:-}," in
            *",SIG$sig,"*) kill -s "$sig" "$child" 2>/dev/null ;;
            *) signal_ours "$sig" ;;
        esac
        gone_within "$grace" && exit 0
    fi
    signal_ours TERM
    gone_within 10 || signal_ours KILL
}
watch &
w=$!
while :; do
    wait "$child"
    code=$?
    kill -0 "$child" 2>/dev/null || break
done
if [ -e "$tmp/hung" ]; then wait "$w"; else kill "$w" 2>/dev/null; fi
# The pumps end with the last writer; a stray process that holds one is left to the engine.
n=0
while { kill -0 "$o" || kill -0 "$e"; } 2>/dev/null && [ "$n" -lt 50 ]; do
    n=$((n + 1))
    sleep 0.1
done
rm -rf "$tmp"
exit "$code""#;

/// The words that run a command under the watch: `sh -c WATCH torchx-watch DIR ATTEMPT SIG
/// GRACE`, to be followed by the timeout, the replica (`role/N`) and the command. The values
/// are shell words of the calling script (quoted or variables), placed as they are.
pub(crate) fn watch_words(dir: &str, attempt: &str, signal: &str, grace: u64) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        crate::text::shell_quote(WATCH),
        "torchx-watch".into(),
        dir.into(),
        attempt.into(),
        signal.into(),
        grace.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::WATCH;

    /// Runs `script` under the watch (timeout `timeout`, checkpoint signal `sig`) in `dir`.
    fn watched(
        dir: &std::path::Path,
        sig: &str,
        timeout: u64,
        script: &str,
    ) -> std::process::Output {
        Command::new("sh")
            .args(["-c", WATCH, "torchx-watch"])
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
}
