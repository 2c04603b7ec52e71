#!/usr/bin/env bash
# down.sh - stop the local Slurm cluster started by up.sh.
#
#   bash scripts/slurm/down.sh [--keep-jobs] [--purge]
#
# Only daemons whose pid up.sh recorded in /run/slurm-local are stopped, and
# only if that pid still runs the expected program (never by name). Before the
# controller goes away, every job still queued or running is scancel'ed so no
# job step outlives its slurmd.
#   --keep-jobs  do not scancel queued/running jobs first
#   --purge      also delete state and logs (/var/lib/slurm-local,
#                /var/log/slurm-local) and the configs up.sh wrote
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ORIG_ARGS=("$@")
_slurm_local_tag=slurm-down
# shellcheck source=lib.sh
. "$SCRIPT_DIR/lib.sh"

KEEP_JOBS=0
PURGE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --keep-jobs) KEEP_JOBS=1; shift ;;
        --purge) PURGE=1; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E bash "$SCRIPT_DIR/$(basename "$0")" "${ORIG_ARGS[@]}"
    fi
    die "must run as root"
fi

if [ ! -d "$RUN_DIR" ]; then
    log "nothing to stop ($RUN_DIR does not exist)"
else
    [ "$KEEP_JOBS" = 1 ] || cancel_all_jobs

    stopped_any=0
    for f in "$RUN_DIR"/slurmd-*.pid; do
        [ -e "$f" ] || continue
        stop_daemon "$(basename "$f" .pid)" slurmd
        stopped_any=1
    done
    for d in slurmctld:slurmctld slurmdbd:slurmdbd mariadbd:mariadbd munged:munged; do
        name=${d%%:*}
        [ -e "$RUN_DIR/$name.pid" ] || continue
        stop_daemon "$name" "${d#*:}"
        stopped_any=1
    done
    [ "$stopped_any" = 1 ] || log "no daemon started by up.sh is recorded in $RUN_DIR"
fi

if [ "$PURGE" = 1 ]; then
    log "purging $STATE_DIR $LOG_DIR $RUN_DIR"
    rm -rf "${STATE_DIR:?}" "${LOG_DIR:?}" "${RUN_DIR:?}"
    for f in "$CONF_DIR/slurm.conf" "$CONF_DIR/slurmdbd.conf"; do
        if [ -e "$f" ] && grep -qF "$MANAGED_MARKER" "$f"; then
            log "removing $f"
            rm -f "$f"
        fi
    done
fi
log "done"
