#!/usr/bin/env bash
# down.sh - stops what scripts/k8s/up.sh started (by its pid files), newest first; the built
# binaries stay cached.
set -uo pipefail
run=${TORCHX_K8S_DIR:-/var/lib/torchx-k8s}/run
for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    f=$run/$name.pid
    [ -f "$f" ] || continue
    pid=$(tr -dc 0-9 <"$f")
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
done
echo "[k8s-down] stopped" >&2
