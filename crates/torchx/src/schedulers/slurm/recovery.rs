//! The recovery contract in the batch script: attempts recorded next to the job's logs,
//! failures and requeues counted apart, the checkpoint signal passed on, the job requeued
//! while its budgets last.

use super::opts::SlurmOpts;
use crate::error::{Error, Result};
use crate::specs::{AppDef, Recovery};
use crate::text::shell_quote;

/// The batch script's body under the recovery contract. The attempts file
/// (`torchx-$SLURM_JOB_ID/attempts`, next to the job's logs) has one `start ATTEMPT TIME` line
/// per attempt and one `end ATTEMPT TIME EXIT REASON` line per attempt that ended; it splits
/// Slurm's one restart count into failures (`failed`, `timeout`: the retry budget) and requeues
/// (`requeued`, `preempted`, `node_failure`: their own budget). An attempt stopped from outside
/// (`scontrol requeue`, preemption, scancel, a lost node) is told by the job's state in the
/// controller; one that could not even write its end is `preempted` (by the next attempt).
const RECOVERY_SCRIPT: &str = r#"set -eu

export PYTHONUNBUFFERED=1
export SLURM_UNBUFFEREDIO=1
export TORCHX_MAX_RETRIES=@RETRIES@
export TORCHX_ATTEMPT=${SLURM_RESTART_COUNT:-0}
torchx_dir="$PWD/torchx-@APP_ID@"
export TORCHX_CHECKPOINT_DIR=@CHECKPOINT_DIR@
mkdir -p "$TORCHX_CHECKPOINT_DIR"
attempts="$torchx_dir/attempts"
touch "$attempts"
now() { date +%s; }
if [ "$(grep -c '^start ' "$attempts")" -gt "$(grep -c '^end ' "$attempts")" ]; then
    echo "end $(tail -n 1 "$attempts" | cut -d' ' -f2) $(now) - preempted" >>"$attempts"
fi
failures=$(grep -cE '^end .* (failed|timeout|oom@HUNG_FAILS@)$' "$attempts" || true)
requeues=$(grep -cE '^end .* (requeued|preempted|node_failure@HUNG_REQUEUES@)$' "$attempts" || true)
started=$(now)
echo "start $TORCHX_ATTEMPT $started" >>"$attempts"
# This job as scontrol names it: an array's task as ARRAY_TASK, since the task that kept the
# array's id would otherwise requeue (or be read for) every task of the array.
job="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}}"
job="${job:-$SLURM_JOB_ID}"
echo "torchx: attempt $TORCHX_ATTEMPT (failures $failures of @RETRIES@, requeues $requeues of @REQUEUES@)"

ended=0
srun_pid=
term_at=
finish() {  # EXIT REASON: record the attempt's end, once
    if [ "$ended" = 0 ]; then
        ended=1
        echo "end $TORCHX_ATTEMPT $(now) $1 $2" >>"$attempts"
    fi
}
requeue() {
    echo "torchx: requeueing job $job ($1)"
    scontrol requeue "$job"
}
forward() {
    if [ -n "$srun_pid" ]; then kill -s "$1" "$srun_pid" 2>/dev/null || true; fi
}
# The time limit, or the job stopped from outside (scontrol requeue, preemption, scancel):
# pass it on and let the replicas end (Slurm kills them KillWait seconds later).
on_term() {
    term_at=${term_at:-$(now)}
    echo "torchx: SIGTERM: passing it to the job's processes"
    forward TERM
}
trap on_term TERM
@CHECKPOINT_TRAP@
# Each task records its own exit code: when one asks for a requeue, srun (--kill-on-bad-exit)
# stops the others and may return their signal instead. The wrapper outlives its command
# (a trapped signal waits for it) and passes its exit code on. After a signal it also waits
# for every process its command started (they carry TORCHX_ATTEMPT_MARK in their environment,
# in whatever session they moved to): a wrapper (`sh -c`, torchrun) that died of the
# checkpoint signal must not end the task while its trainer saves.
exits="$torchx_dir/exits.$TORCHX_ATTEMPT"
rm -rf "$exits"
mkdir -p "$exits"
# Any process of any task that creates this file asks for a requeue of the attempt, whatever
# the exit codes (a wrapper, torchrun, may turn the trainer's into another).
export TORCHX_REQUEUE_FILE="$torchx_dir/requeue.$TORCHX_ATTEMPT"
rm -f "$TORCHX_REQUEUE_FILE"
# Its processes are those whose environment holds the mark exactly (one NUL-separated entry of
# /proc/PID/environ matched whole where grep has -z; the trailing - keeps an older grep's
# substring match from taking a longer mark), waited for at most @SAVE_WAIT@ s (the checkpoint
# lead and a minute; Slurm ends the step's processes when the task ends).
@WATCH@torchx_task=(bash -c 'm=torchx-$SLURM_JOB_ID-$SLURM_PROCID-$$-; s=; trap s=1 HUP INT TERM USR1 USR2; TORCHX_ATTEMPT_MARK=$m "$@"; c=$?; if [ -n "$s" ]; then z=; if printf "a\0" | grep -qzxF a 2>/dev/null; then z=-zx; fi; n=0; while [ "$n" -lt $((@SAVE_WAIT@ * 5)) ] && grep -qlsF $z "TORCHX_ATTEMPT_MARK=$m" /proc/[0-9]*/environ; do n=$((n + 1)); sleep 0.2; done; fi; echo "$c" >"$0/${SLURMD_NODENAME:-node}.$$"; exit "$c"' "$exits")
set +e
srun @SRUN@ &
srun_pid=$!
while :; do
    wait "$srun_pid"
    kill -0 "$srun_pid" 2>/dev/null || break
done
wait "$srun_pid"
exitcode=$?
set -e

echo "job exited with code $exitcode"
if ls "$torchx_dir/hung.$TORCHX_ATTEMPT".* >/dev/null 2>&1; then
    echo "torchx: $(cat "$torchx_dir/hung.$TORCHX_ATTEMPT".* | cut -d' ' -f1 | tr '\n' ' ')hung"
    finish "$exitcode" hung
    if [ @REQUEUE_HUNG@ = 1 ]; then
        if [ "$requeues" -lt @REQUEUES@ ]; then requeue "hung"; fi
    elif [ "$failures" -lt "$TORCHX_MAX_RETRIES" ]; then
        requeue "hung"
    fi
    exit "$exitcode"
fi
if [ -e "$TORCHX_REQUEUE_FILE" ]; then
    echo "torchx: a process asked for a requeue (TORCHX_REQUEUE_FILE)"
    exitcode=@REQUEUE_CODE@
elif [ "$exitcode" -ne 0 ] && grep -qsx @REQUEUE_CODE@ "$exits"/*; then
    echo "torchx: a task exited with @REQUEUE_CODE@"
    exitcode=@REQUEUE_CODE@
fi
if [ "$exitcode" -eq 0 ]; then
    finish 0 succeeded
    exit 0
fi
if [ "$exitcode" -eq @REQUEUE_CODE@ ]; then
    finish "$exitcode" requeued
    if [ "$requeues" -lt @REQUEUES@ ]; then requeue "exit code $exitcode asks for it"; fi
    exit "$exitcode"
fi
# Stopped from outside (the time limit, scontrol requeue, preemption, scancel, a lost node):
# the controller says so before it stops the steps (our own SIGTERM may come after srun is
# back). Whoever stopped it decides what comes next, but for the time limit.
state=$(scontrol show job "$job" 2>/dev/null | grep -o -m 1 'JobState=[A-Z_]*' || true)
if [ "$state" = JobState=TIMEOUT ] || { [ @LIMIT@ -gt 0 ] && [ $(($(now) - started)) -ge $((@LIMIT@ - 5)) ]; }; then
    finish "$exitcode" timeout
    if [ "$failures" -lt "$TORCHX_MAX_RETRIES" ]; then requeue "timed out"; fi
    exit "$exitcode"
fi
case "$state" in
    JobState=RUNNING | "") [ -z "$term_at" ] || { finish "$exitcode" preempted; exit "$exitcode"; } ;;
    JobState=CANCELLED*) finish "$exitcode" cancelled; exit "$exitcode" ;;
    JobState=NODE_FAIL*) finish "$exitcode" node_failure; exit "$exitcode" ;;
    JobState=OUT_OF_MEMORY*)
        finish "$exitcode" oom
        if [ "$failures" -lt "$TORCHX_MAX_RETRIES" ]; then requeue "out of memory"; fi
        exit "$exitcode" ;;
    *) finish "$exitcode" preempted; exit "$exitcode" ;;
esac
finish "$exitcode" failed
if [ "$failures" -lt "$TORCHX_MAX_RETRIES" ]; then requeue "failed"; fi
exit "$exitcode"
"#;

pub(super) fn recovery_script(
    r: &Recovery,
    max_retries: u32,
    checkpoint_dir: Option<&str>,
    app_id: &str,
    srun: &str,
    (watched, requeue_hung): (bool, bool),
) -> String {
    // `--signal=B:` signals the batch shell only: it passes the signal on (SIGTERM is already).
    let checkpoint_trap = match r.checkpoint_signal.map(|s| s.signal.name()) {
        Some(sig) if sig != "TERM" => format!(
            "trap 'echo \"torchx: SIG{sig} before the time limit: passing it on\"; forward {sig}' {sig}\n"
        ),
        _ => String::new(),
    };
    let checkpoint_dir = checkpoint_dir.map_or("\"$torchx_dir/checkpoint\"".into(), shell_quote);
    // A hung replica of a recovering job gets the checkpoint signal (USR1 unless the roles
    // name one) and local_cwd's grace to save; of any other job, none.
    let hang_signal = if requeue_hung {
        crate::schedulers::hang_watch::hang_signal(r.checkpoint_signal)
    } else {
        ""
    };
    let watch = if watched {
        let words = crate::schedulers::hang_watch::watch_words(
            "\"$torchx_dir\"",
            "\"$TORCHX_ATTEMPT\"",
            &shell_quote(hang_signal),
            crate::schedulers::local_cwd::GRACE.as_secs(),
        );
        format!(
            "# A replica with a hang timeout runs under the hang watch (schedulers/hang_watch.rs), \
             which\n# leaves hung.ATTEMPT.REPLICA and its stacks here when it stops a replica that \
             made no progress.\ntorchx_watch=({})\n\
             rm -f \"$torchx_dir/hung.$TORCHX_ATTEMPT\".* \"$torchx_dir/stacks.$TORCHX_ATTEMPT\".*\n",
            words.join(" ")
        )
    } else {
        String::new()
    };
    let (hung_fails, hung_requeues) = if requeue_hung {
        ("", "|hung")
    } else {
        ("|hung", "")
    };
    fill(
        RECOVERY_SCRIPT,
        &[
            ("CHECKPOINT_TRAP", &checkpoint_trap),
            ("RETRIES", &max_retries.to_string()),
            ("REQUEUES", &r.max_requeues.to_string()),
            ("REQUEUE_CODE", &r.requeue_exit_code.to_string()),
            ("LIMIT", &slurm_limit_secs(r).to_string()),
            ("CHECKPOINT_DIR", &checkpoint_dir),
            ("APP_ID", app_id),
            ("SRUN", srun),
            ("WATCH", &watch),
            ("REQUEUE_HUNG", if requeue_hung { "1" } else { "0" }),
            ("HUNG_FAILS", hung_fails),
            ("HUNG_REQUEUES", hung_requeues),
            (
                "SAVE_WAIT",
                &(r.checkpoint_signal.map_or(0, |s| s.seconds) + 60).to_string(),
            ),
        ],
    )
}

/// Fills a template's `@KEY@` placeholders in one pass, so no value (user text among them) is
/// ever searched for another placeholder.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let key = values
            .iter()
            .find(|(k, _)| after.strip_prefix(k).is_some_and(|t| t.starts_with('@')));
        match key {
            Some((k, v)) => {
                out.push_str(v);
                rest = &after[k.len() + 1..];
            }
            None => {
                out.push('@');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The attempt's limit as Slurm enforces it: whole minutes, rounded up (0: none).
pub(super) fn slurm_limit_secs(r: &Recovery) -> u64 {
    r.time_limit.map_or(0, |s| s.div_ceil(60) * 60)
}

/// The job's recovery settings (Slurm requeues the whole job); its own `time` option is
/// another way to say the limit.
pub(super) fn job_recovery(app: &AppDef, opts: &SlurmOpts) -> Result<Option<Recovery>> {
    let recovery = app.job_recovery(super::NAME)?;
    if let (
        Some(Recovery {
            time_limit: Some(_),
            ..
        }),
        Some(time),
    ) = (recovery, &opts.time)
    {
        return Err(Error::config(format!(
            "slurm run option `time` = `{time}` and time_limit both set a time limit: give one"
        )));
    }
    Ok(recovery)
}
