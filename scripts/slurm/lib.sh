# shellcheck shell=bash
# Shared constants and helpers for up.sh / down.sh / smoke.sh (sourced, not run).
# shellcheck disable=SC2034  # constants are used by the scripts that source this

SLURM_LOCAL_CLUSTER=local
SLURM_LOCAL_PARTITION=debug

# Where the local cluster keeps its files (standard system paths only).
CONF_DIR=/etc/slurm
RUN_DIR=/run/slurm-local            # pid files of every daemon up.sh started
STATE_DIR=/var/lib/slurm-local      # slurmctld state, slurmd spool dirs
LOG_DIR=/var/log/slurm-local        # all daemon logs + jobcomp.log

CTLD_PORT=6817
SLURMD_PORT=6818                    # single-node mode
NODE_PORT_BASE=6830                 # multi-node mode: node nK listens on 6830+K
DBD_PORT=6819

DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=slurm-local-ci              # local-only DB user (unix socket, no TCP)
DB_SOCKET=/run/mysqld/mysqld.sock
DB_PIDFILE=/run/mysqld/mysqld.pid
MUNGE_PIDFILE=/run/munge/munged.pid

# Kept identical to the recipe this was adapted from, so either script recognises the other's config.
MANAGED_MARKER="managed by shared/slurm/up.sh"

_slurm_local_tag=${_slurm_local_tag:-slurm-local}
log()  { printf '[%s] %s\n' "$_slurm_local_tag" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "$_slurm_local_tag" "$*" >&2; }
die()  { printf '[%s] ERROR: %s\n' "$_slurm_local_tag" "$*" >&2; exit 1; }

# show_log FILE [LINES]: print the tail of a log to stderr (for error reports).
show_log() {
    local f=$1 n=${2:-25}
    if [ -r "$f" ]; then
        printf -- '----- last %s lines of %s -----\n' "$n" "$f" >&2
        tail -n "$n" "$f" >&2 || true
        printf -- '-----\n' >&2
    else
        printf -- '----- (no log at %s) -----\n' "$f" >&2
    fi
}

# pid_running NAME COMM: succeeds (and prints the pid) when $RUN_DIR/NAME.pid
# names a live process whose command name is COMM, i.e. a daemon we started.
pid_running() {
    local name=$1 comm=$2 f="$RUN_DIR/$1.pid" pid
    [ -r "$f" ] || return 1
    pid=$(tr -dc '0-9' < "$f")
    [ -n "$pid" ] || return 1
    proc_alive "$pid" "$comm" || return 1
    printf '%s\n' "$pid"
}

# proc_alive PID COMM: PID is a live (non-zombie) process named COMM.
proc_alive() {
    local pid=$1 comm=$2
    [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
    # daemons are re-parented to PID 1; until it reaps them they are zombies
    [ "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" != Z ]
}

# stop_daemon NAME COMM: SIGTERM the daemon recorded in $RUN_DIR/NAME.pid (only
# if it is still that program), wait for it, SIGKILL after 20 s; drop the pid file.
stop_daemon() {
    local name=$1 comm=$2 pid
    if pid=$(pid_running "$name" "$comm"); then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            proc_alive "$pid" "$comm" || break
            sleep 0.2
        done
        if proc_alive "$pid" "$comm"; then
            warn "$name (pid $pid) ignored SIGTERM for 20 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    fi
    rm -f "$RUN_DIR/$name.pid"
}

# cancel_all_jobs: scancel every queued/running job of the local cluster (if
# our slurmctld answers) and wait up to 15 s for running ones to finish.
cancel_all_jobs() {
    local jobs
    pid_running slurmctld slurmctld >/dev/null || return 0
    jobs=$(squeue -h -o '%A' -t PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING 2>/dev/null | sort -u | paste -sd' ' - || true)
    [ -n "$jobs" ] || return 0
    log "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 1 75); do
        [ -z "$(squeue -h -o '%A' -t RUNNING,COMPLETING,CONFIGURING 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    warn "jobs still running after scancel: $(squeue -h -o '%A' -t RUNNING,COMPLETING 2>/dev/null | paste -sd' ' -)"
}

# port_busy PORT: succeeds when something listens on 127.0.0.1/0.0.0.0:PORT.
port_busy() {
    local port=$1
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}

port_owner() {
    command -v ss >/dev/null 2>&1 && ss -Hltnp "sport = :$1" 2>/dev/null || true
}
