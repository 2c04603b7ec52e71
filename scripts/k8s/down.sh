#!/usr/bin/env bash
# down.sh - stops what scripts/k8s/up.sh started (by its pid files), newest first; the built
# binaries stay cached.
set -uo pipefail
run=${TORCHX_K8S_DIR:-/var/lib/torchx-k8s}/run
for name in mcad-controller vc-scheduler vc-controller-manager vc-webhook-manager kubelet coredns containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do
    f=$run/$name.pid
    [ -f "$f" ] || continue
    pid=$(tr -dc 0-9 <"$f")
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
done
# The pods' containers outlive containerd (their shims): stop them, then unmount what the
# kubelet and containerd mounted for them.
for shim in $(pgrep -f "containerd-shim-runc-v2 .*-address $run/containerd.sock" 2>/dev/null); do
    pkill -KILL -P "$shim" 2>/dev/null
    kill -KILL "$shim" 2>/dev/null
done
node=${TORCHX_K8S_DIR:-/var/lib/torchx-k8s}/node
awk -v a="$node/" -v b="$run/" 'index($2, a) == 1 || index($2, b) == 1 { print $2 }' /proc/mounts |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
echo "[k8s-down] stopped" >&2
