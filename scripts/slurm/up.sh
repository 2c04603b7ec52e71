#!/usr/bin/env bash
# up.sh - install, configure and start a real local Slurm cluster (Debian 12,
# Slurm 22.05) on this machine, without systemd; idempotent.
#
#   bash scripts/slurm/up.sh [--nodes N] [--no-accounting] [--cpus N]
#                           [--mem-mb N] [--no-install] [--fresh] [--force]
#
# Starts munged, (mariadbd + slurmdbd), slurmctld and one slurmd per simulated
# node as plain background daemons, records their pids in /run/slurm-local and
# waits until every node is usable in sinfo. Re-running it is cheap: whatever is
# already up with the same configuration is left alone. Stop with down.sh.
# A running cluster is never reconfigured (its jobs would be cancelled) without --force.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ORIG_ARGS=("$@")
_slurm_local_tag=slurm-up
# shellcheck source=lib.sh
. "$SCRIPT_DIR/lib.sh"

usage() {
    cat <<EOF
usage: bash up.sh [options]
  --nodes N        simulated nodes (one slurmd each, all on 127.0.0.1);
                   N=1 names the node after 'hostname -s', N>=2 names them
                   n1..nN. Default \${SLURM_LOCAL_NODES:-4}. Heterogeneous
                   jobs need one node per component (see README).
  --no-accounting  skip MariaDB + slurmdbd (sacct then only works with
                   --completion). Same as SLURM_LOCAL_ACCOUNTING=0.
  --accounting     force accounting on (default).
  --cpus N         CPUs advertised per node (default: nproc). SLURM_LOCAL_CPUS.
  --mem-mb N       RealMemory per node in MB (default: MemTotal). SLURM_LOCAL_MEM_MB.
  --no-install     never call apt-get; fail if a package is missing.
  --fresh          forget all previous jobs (controller state, accounting DB).
  --force          overwrite an /etc/slurm/slurm.conf that up.sh did not write, or
                   reconfigure a running cluster (its jobs are cancelled).
  --timeout S      seconds to wait for each daemon / the nodes (default 90).
EOF
}

NODES="${SLURM_LOCAL_NODES:-4}"
ACCOUNTING="${SLURM_LOCAL_ACCOUNTING:-1}"
CPUS="${SLURM_LOCAL_CPUS:-}"
MEM_MB="${SLURM_LOCAL_MEM_MB:-}"
INSTALL=1
FRESH=0
FORCE=0
TIMEOUT="${SLURM_LOCAL_TIMEOUT:-90}"

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES=${2:?--nodes needs a value}; shift 2 ;;
        --nodes=*) NODES=${1#*=}; shift ;;
        --accounting) ACCOUNTING=1; shift ;;
        --no-accounting) ACCOUNTING=0; shift ;;
        --cpus) CPUS=${2:?--cpus needs a value}; shift 2 ;;
        --cpus=*) CPUS=${1#*=}; shift ;;
        --mem-mb) MEM_MB=${2:?--mem-mb needs a value}; shift 2 ;;
        --mem-mb=*) MEM_MB=${1#*=}; shift ;;
        --no-install) INSTALL=0; shift ;;
        --fresh) FRESH=1; shift ;;
        --force) FORCE=1; shift ;;
        --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
        --timeout=*) TIMEOUT=${1#*=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E bash "$SCRIPT_DIR/$(basename "$0")" "${ORIG_ARGS[@]}"
    fi
    die "must run as root (Slurm daemons, apt-get and /etc/slurm need it)"
fi

case "$NODES" in ''|*[!0-9]*) die "--nodes must be a positive integer, got '$NODES'" ;; esac
if [ "$NODES" -lt 1 ] || [ "$NODES" -gt 64 ]; then die "--nodes must be between 1 and 64"; fi
case "$ACCOUNTING" in 0|1) ;; *) die "SLURM_LOCAL_ACCOUNTING must be 0 or 1" ;; esac
[ -n "$CPUS" ] || CPUS=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
[ -n "$MEM_MB" ] || MEM_MB=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
case "$CPUS$MEM_MB$TIMEOUT" in *[!0-9]*|'') die "--cpus, --mem-mb and --timeout must be integers" ;; esac

T_START=$(date +%s)
elapsed() { echo $(( $(date +%s) - T_START )); }

mkdir -p "$RUN_DIR" "$STATE_DIR/ctld" "$STATE_DIR/slurmd" "$LOG_DIR"
chmod 755 "$RUN_DIR" "$STATE_DIR" "$LOG_DIR"

# --------------------------------------------------------------------------
# 1. packages
# --------------------------------------------------------------------------
missing=()
[ -x /usr/sbin/slurmctld ] || missing+=(slurmctld)
[ -x /usr/sbin/slurmd ]    || missing+=(slurmd)
[ -x /usr/bin/sbatch ]     || missing+=(slurm-client)
[ -x /usr/sbin/munged ]    || missing+=(munge)
if [ "$ACCOUNTING" = 1 ]; then
    [ -x /usr/sbin/slurmdbd ] || missing+=(slurmdbd)
    [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
fi

install_packages() {
    # Keep package scripts from starting services themselves (that would leave
    # daemons we do not own): a temporary policy-rc.d, only if none exists.
    local policy=/usr/sbin/policy-rc.d own_policy=0 rc=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# temporary, written by scripts/slurm/up.sh\nexit 101\n' > "$policy"
        chmod 755 "$policy"
        own_policy=1
    fi
    log "apt-get update ..."
    if ! DEBIAN_FRONTEND=noninteractive apt-get update -q > "$LOG_DIR/apt.log" 2>&1; then
        rc=1
    else
        log "apt-get install ${missing[*]} ..."
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            "${missing[@]}" >> "$LOG_DIR/apt.log" 2>&1 || rc=1
    fi
    [ "$own_policy" = 1 ] && rm -f "$policy"
    if [ "$rc" != 0 ]; then
        show_log "$LOG_DIR/apt.log" 30
        die "package installation failed (see $LOG_DIR/apt.log)"
    fi
}

if [ "${#missing[@]}" -gt 0 ]; then
    [ "$INSTALL" = 1 ] || die "missing packages: ${missing[*]} (and --no-install given)"
    command -v apt-get >/dev/null 2>&1 || die "missing packages ${missing[*]} and no apt-get (Debian/Ubuntu only)"
    t0=$(date +%s)
    install_packages
    log "installed ${missing[*]} in $(( $(date +%s) - t0 )) s"
else
    log "packages already installed"
fi
command -v sinfo >/dev/null 2>&1 || die "sinfo not on PATH after install (PATH=$PATH)"

# --------------------------------------------------------------------------
# 2. configuration
# --------------------------------------------------------------------------
HOST_SHORT=$(hostname -s 2>/dev/null || uname -n)
HOST_SHORT=${HOST_SHORT%%.*}
[ -n "$HOST_SHORT" ] || die "cannot determine the host name"

NODE_NAMES=()
NODE_LINES=""
if [ "$NODES" = 1 ]; then
    NODE_NAMES=("$HOST_SHORT")
    NODE_LINES="NodeName=$HOST_SHORT NodeAddr=127.0.0.1 Port=$SLURMD_PORT CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN"
else
    # Several slurmd on one host: each node gets its own NodeHostname (so the
    # stock Debian build, which lacks --enable-multiple-slurmd, accepts them),
    # the same NodeAddr and its own port; slurmd is started with -N <name>.
    for i in $(seq 1 "$NODES"); do
        NODE_NAMES+=("n$i")
        NODE_LINES+="NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1 Port=$((NODE_PORT_BASE + i)) CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN"$'\n'
    done
    NODE_LINES=${NODE_LINES%$'\n'}
fi

if [ "$ACCOUNTING" = 1 ]; then
    JOBACCT_GATHER=jobacct_gather/linux
    ACCOUNTING_LINES="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT"
else
    JOBACCT_GATHER=jobacct_gather/none
    ACCOUNTING_LINES="AccountingStorageType=accounting_storage/none"
fi

# render TEMPLATE KEY=VALUE... : substitute @KEY@; whole-line @NODE_LINES@ and
# @ACCOUNTING_LINES@ placeholders expand to several lines.
render() {
    local tmpl=$1 line kv key val
    shift
    [ -r "$tmpl" ] || die "template $tmpl not found"
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in
            @NODE_LINES@) printf '%s\n' "$NODE_LINES"; continue ;;
            @ACCOUNTING_LINES@) printf '%s\n' "$ACCOUNTING_LINES"; continue ;;
        esac
        for kv in "$@"; do
            key=${kv%%=*}; val=${kv#*=}
            line=${line//@$key@/$val}
        done
        printf '%s\n' "$line"
    done < "$tmpl"
}

VARS=(
    "MANAGED_MARKER=$MANAGED_MARKER" "CLUSTER=$SLURM_LOCAL_CLUSTER"
    "PARTITION=$SLURM_LOCAL_PARTITION" "CTLD_HOST=$HOST_SHORT"
    "CTLD_PORT=$CTLD_PORT" "SLURMD_PORT=$SLURMD_PORT" "DBD_PORT=$DBD_PORT"
    "STATE_DIR=$STATE_DIR" "RUN_DIR=$RUN_DIR" "LOG_DIR=$LOG_DIR"
    "NODE_COUNT=$NODES" "JOBACCT_GATHER=$JOBACCT_GATHER"
    "DB_USER=$DB_USER" "DB_PASS=$DB_PASS" "DB_NAME=$DB_NAME"
)

# install_conf TEMPLATE DEST MODE: render; replace DEST only if it changed.
# Sets CONF_CHANGED=1 when it wrote something.
install_conf() {
    local tmpl=$1 dest=$2 mode=$3 tmp
    tmp=$(mktemp)
    render "$tmpl" "${VARS[@]}" > "$tmp"
    if grep -q '@[A-Z_]*@' "$tmp"; then
        grep -n '@[A-Z_]*@' "$tmp" >&2
        rm -f "$tmp"
        die "unsubstituted placeholder in $tmpl"
    fi
    if [ -e "$dest" ] && ! grep -qF "$MANAGED_MARKER" "$dest" && [ "$FORCE" != 1 ]; then
        rm -f "$tmp"
        die "$dest exists and was not written by up.sh; move it away or pass --force"
    fi
    if [ -e "$dest" ] && cmp -s "$tmp" "$dest"; then
        rm -f "$tmp"
        return 0
    fi
    # A running cluster is somebody's: changing its configuration would cancel its jobs.
    if [ -e "$dest" ] && [ "$guard_running" = 1 ] && cluster_running && [ "$FORCE" != 1 ] && [ "$FRESH" != 1 ]; then
        diff -u "$dest" "$tmp" >&2 || true
        rm -f "$tmp"
        die "a cluster is running with another $dest (diff above); these options would cancel its jobs and restart it: pass --force to do that, or stop it first with down.sh"
    fi
    install -m "$mode" -o root -g root "$tmp" "$dest"
    rm -f "$tmp"
    CONF_CHANGED=1
    log "wrote $dest"
}

cluster_running() {
    pid_running slurmctld slurmctld >/dev/null || compgen -G "$RUN_DIR/slurmd-*.pid" >/dev/null
}
mkdir -p "$CONF_DIR"
CONF_CHANGED=0
guard_running=1
install_conf "$SCRIPT_DIR/slurm.conf.in" "$CONF_DIR/slurm.conf" 644
guard_running=0
SLURM_CONF_CHANGED=$CONF_CHANGED
DBD_CONF_CHANGED=0
if [ "$ACCOUNTING" = 1 ]; then
    CONF_CHANGED=0
    install_conf "$SCRIPT_DIR/slurmdbd.conf.in" "$CONF_DIR/slurmdbd.conf" 600
    DBD_CONF_CHANGED=$CONF_CHANGED
fi

# Restart what we own when its configuration changed (or on --fresh).
stop_slurm_nodes() {
    local f name
    for f in "$RUN_DIR"/slurmd-*.pid; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .pid)
        stop_daemon "$name" slurmd
    done
}
if [ "$SLURM_CONF_CHANGED" = 1 ] || [ "$FRESH" = 1 ]; then
    if pid_running slurmctld slurmctld >/dev/null || compgen -G "$RUN_DIR/slurmd-*.pid" >/dev/null; then
        log "configuration changed or --fresh: cancelling jobs, restarting our slurmctld/slurmd"
    fi
    # Slurm would requeue/kill jobs whose nodes changed anyway; cancel them
    # so nothing from an earlier layout lingers in the queue.
    cancel_all_jobs
    stop_slurm_nodes
    stop_daemon slurmctld slurmctld
fi
if [ "$DBD_CONF_CHANGED" = 1 ] || [ "$FRESH" = 1 ] || [ "$ACCOUNTING" = 0 ]; then
    stop_daemon slurmdbd slurmdbd
fi
if [ "$ACCOUNTING" = 0 ]; then
    stop_daemon mariadbd mariadbd     # only if up.sh started it earlier
fi
if [ "$FRESH" = 1 ]; then
    log "--fresh: clearing controller state and slurmd spool"
    rm -rf "${STATE_DIR:?}/ctld" "${STATE_DIR:?}/slurmd"
    rm -f "$LOG_DIR/jobcomp.log"
    mkdir -p "$STATE_DIR/ctld" "$STATE_DIR/slurmd"
fi

# wait_for SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds.
wait_for() {
    local secs=$1 deadline
    shift
    deadline=$(( $(date +%s) + secs ))
    while ! "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            return 1
        fi
        sleep 0.2
    done
}

# record_pid NAME PIDFILE COMM: copy a daemon's own pid file into $RUN_DIR.
record_pid() {
    local name=$1 src=$2 comm=$3 pid
    pid=$(tr -dc '0-9' < "$src" 2>/dev/null || true)
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ]; then
        printf '%s\n' "$pid" > "$RUN_DIR/$name.pid"
    else
        warn "could not record the pid of $name from $src"
    fi
}

# Fail early if a port we need is held by something we did not start.
check_port() { # PORT WHAT
    if port_busy "$1"; then
        die "port $1 ($2) is already in use by a process up.sh did not start: $(port_owner "$1")"
    fi
}
pid_running slurmctld slurmctld >/dev/null || check_port "$CTLD_PORT" slurmctld
if [ "$ACCOUNTING" = 1 ]; then
    pid_running slurmdbd slurmdbd >/dev/null || check_port "$DBD_PORT" slurmdbd
fi
for node in "${NODE_NAMES[@]}"; do
    if [ "$NODES" = 1 ]; then port=$SLURMD_PORT; else port=$((NODE_PORT_BASE + ${node#n})); fi
    pid_running "slurmd-$node" slurmd >/dev/null || check_port "$port" "slurmd $node"
done

# --------------------------------------------------------------------------
# 3. munge
# --------------------------------------------------------------------------
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
t_daemons=$(date +%s)
if munge_ok; then
    if pid_running munged munged >/dev/null; then
        log "munged: already running"
    else
        log "munged: already answering (started outside up.sh; down.sh will leave it alone)"
    fi
else
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        mkdir -p /etc/munge
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --force --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        fi
    fi
    chown munge:munge /etc/munge /etc/munge/munge.key
    chmod 700 /etc/munge
    chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    rm -f "$MUNGE_PIDFILE"
    log "starting munged"
    if ! runuser -u munge -- /usr/sbin/munged; then
        show_log /var/log/munge/munged.log
        die "munged failed to start"
    fi
    if ! wait_for 15 munge_ok; then
        show_log /var/log/munge/munged.log
        die "munged started but 'munge -n | unmunge' still fails"
    fi
    record_pid munged "$MUNGE_PIDFILE" munged
fi

# --------------------------------------------------------------------------
# 4. accounting: MariaDB + slurmdbd
# --------------------------------------------------------------------------
db_ok() { mysqladmin --socket="$DB_SOCKET" ping >/dev/null 2>&1; }
sacctmgr_ok() { sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; }

if [ "$ACCOUNTING" = 1 ]; then
    if db_ok; then
        if pid_running mariadbd mariadbd >/dev/null; then
            log "mariadbd: already running"
        else
            log "mariadb: already answering on $DB_SOCKET (started outside up.sh; down.sh will leave it alone)"
        fi
    else
        if [ ! -d /var/lib/mysql/mysql ]; then
            log "initialising /var/lib/mysql"
            mariadb-install-db --user=mysql --datadir=/var/lib/mysql \
                > "$LOG_DIR/mariadb-install.log" 2>&1 \
                || { show_log "$LOG_DIR/mariadb-install.log"; die "mariadb-install-db failed"; }
        fi
        install -d -o mysql -g mysql -m 0755 /run/mysqld
        rm -f "$DB_PIDFILE"
        log "starting mariadbd (unix socket only)"
        setsid /usr/sbin/mariadbd --user=mysql --skip-networking \
            --socket="$DB_SOCKET" --pid-file="$DB_PIDFILE" \
            >> "$LOG_DIR/mariadb.log" 2>&1 < /dev/null &
        if ! wait_for "$TIMEOUT" db_ok; then
            show_log "$LOG_DIR/mariadb.log"
            die "mariadbd did not answer on $DB_SOCKET within ${TIMEOUT}s"
        fi
        record_pid mariadbd "$DB_PIDFILE" mariadbd
    fi
    if [ "$FRESH" = 1 ]; then
        log "--fresh: dropping accounting database $DB_NAME"
        mysql --socket="$DB_SOCKET" -uroot -e "DROP DATABASE IF EXISTS \`$DB_NAME\`;" \
            || die "could not drop $DB_NAME"
    fi
    mysql --socket="$DB_SOCKET" -uroot -e "
        CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
        ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
        GRANT ALL ON \`$DB_NAME\`.* TO '$DB_USER'@'localhost';
        FLUSH PRIVILEGES;" \
        || die "could not create the MariaDB user $DB_USER (root must be able to log in over the unix socket)"

    if pid_running slurmdbd slurmdbd >/dev/null; then
        log "slurmdbd: already running"
    else
        check_port "$DBD_PORT" slurmdbd
        log "starting slurmdbd"
        /usr/sbin/slurmdbd || { show_log "$LOG_DIR/slurmdbd.log"; die "slurmdbd failed to start"; }
        if ! wait_for "$TIMEOUT" sacctmgr_ok; then
            show_log "$LOG_DIR/slurmdbd.log"
            die "slurmdbd did not answer sacctmgr within ${TIMEOUT}s"
        fi
    fi
    if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$SLURM_LOCAL_CLUSTER"; then
        log "registering cluster '$SLURM_LOCAL_CLUSTER' in slurmdbd"
        sacctmgr -i add cluster "$SLURM_LOCAL_CLUSTER" >/dev/null \
            || die "sacctmgr add cluster $SLURM_LOCAL_CLUSTER failed"
    fi
fi

# --------------------------------------------------------------------------
# 5. slurmctld and slurmd
# --------------------------------------------------------------------------
ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

if pid_running slurmctld slurmctld >/dev/null; then
    log "slurmctld: already running"
else
    check_port "$CTLD_PORT" slurmctld
    log "starting slurmctld"
    /usr/sbin/slurmctld || { show_log "$LOG_DIR/slurmctld.log"; die "slurmctld failed to start"; }
    if ! wait_for "$TIMEOUT" ctld_up; then
        show_log "$LOG_DIR/slurmctld.log"
        die "slurmctld did not answer 'scontrol ping' within ${TIMEOUT}s"
    fi
fi

# Every node is this host: make the node names resolve to it (a multi-node job's torchrun
# rendezvous endpoint is its first node's name). Rewritten in place: /etc/hosts may be a mount.
if [ "$NODES" != 1 ]; then
    hosts_marker="# torchx local slurm nodes"
    hosts=$(grep -v "$hosts_marker\$" /etc/hosts || true)
    printf '%s\n127.0.0.1 %s %s\n' "$hosts" "${NODE_NAMES[*]}" "$hosts_marker" >/etc/hosts
fi

for node in "${NODE_NAMES[@]}"; do
    if pid_running "slurmd-$node" slurmd >/dev/null; then
        continue
    fi
    if [ "$NODES" = 1 ]; then port=$SLURMD_PORT; else port=$((NODE_PORT_BASE + ${node#n})); fi
    check_port "$port" "slurmd $node"
    mkdir -p "$STATE_DIR/slurmd/$node"
    log "starting slurmd for node $node (port $port)"
    /usr/sbin/slurmd -N "$node" || { show_log "$LOG_DIR/slurmd-$node.log"; die "slurmd -N $node failed to start"; }
done

# --------------------------------------------------------------------------
# 6. wait until every node is usable
# --------------------------------------------------------------------------
node_states() { sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }
bad_nodes() {
    # prints nodes that are not usable yet; empty output = all usable
    node_states | awk '
        { st = $2; sub(/[~#!%$@^-]+$/, "", st)
          if (st !~ /^(idle|mixed|allocated|completing|planned|reserved)$/) print }'
}
all_nodes_ok() { [ -n "$(node_states)" ] && [ -z "$(bad_nodes)" ]; }

deadline=$(( $(date +%s) + TIMEOUT ))
resumed=0
until all_nodes_ok; do
    now=$(date +%s)
    # A node left DRAINED/DOWN by an earlier run (e.g. killed mid-job) is
    # resumed once; ReturnToService=2 handles plain DOWN on registration.
    if [ "$resumed" = 0 ] && [ "$now" -ge $(( deadline - TIMEOUT + 5 )) ]; then
        drained=$(bad_nodes | awk '$2 ~ /^(drain|drained|draining|down|fail|failing)/ {print $1}' | paste -sd, -)
        if [ -n "$drained" ]; then
            warn "resuming nodes $drained: $(sinfo -h -N -o '%N %T %E' -n "$drained" | paste -sd';' -)"
            scontrol update nodename="$drained" state=resume >/dev/null 2>&1 || true
        fi
        resumed=1
    fi
    if [ "$now" -ge "$deadline" ]; then
        sinfo -N -l >&2 || true
        show_log "$LOG_DIR/slurmctld.log"
        for node in "${NODE_NAMES[@]}"; do show_log "$LOG_DIR/slurmd-$node.log" 10; done
        die "nodes not usable after ${TIMEOUT}s: $(bad_nodes | paste -sd';' -)"
    fi
    sleep 0.3
done

log "daemons ready in $(( $(date +%s) - t_daemons )) s (total $(elapsed) s)"
sinfo
log "cluster '$SLURM_LOCAL_CLUSTER' is up: $NODES node(s) x $CPUS CPUs, accounting=$([ "$ACCOUNTING" = 1 ] && echo slurmdbd || echo none); stop with: bash $SCRIPT_DIR/down.sh"
