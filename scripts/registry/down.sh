#!/usr/bin/env bash
# Stop the registries scripts/registry/up.sh started (by their pid files only). --purge also
# removes their storage.
set -euo pipefail
dir=${REGISTRY_DIR:-/var/lib/torchx-registry}
for name in open auth; do
  pidfile="$dir/$name.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null && grep -q docker-registry "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid"; for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  fi
  rm -f "$pidfile"
done
[ "${1:-}" = --purge ] && rm -rf "$dir"
exit 0
