#!/usr/bin/env bash
# Stop the moto server that up.sh started: kills only the pid in its pid file,
# and only if that pid is still a moto.server process.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${AWS_EMU_STATE_DIR:-$ROOT/.aws-emu}"
PIDFILE="$STATE/moto.pid"

if [[ ! -f "$PIDFILE" ]]; then
  echo "down.sh: no pid file at $PIDFILE; nothing to stop" >&2
  exit 0
fi
PID="$(cat "$PIDFILE")"
if ! [[ "$PID" =~ ^[0-9]+$ ]]; then
  echo "down.sh: bad pid file $PIDFILE" >&2; rm -f "$PIDFILE"; exit 1
fi
if ! kill -0 "$PID" 2>/dev/null; then
  echo "down.sh: pid $PID is not running" >&2; rm -f "$PIDFILE"; exit 0
fi
if ! tr '\0' ' ' <"/proc/$PID/cmdline" 2>/dev/null | grep -qE 'moto\.server|moto_ext\.py'; then
  echo "down.sh: pid $PID is not a moto server (pid reused?); not killing it" >&2
  rm -f "$PIDFILE"; exit 1
fi

kill -TERM "$PID"
for _ in $(seq 1 50); do
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$PID" 2>/dev/null; then
  kill -KILL "$PID"
fi
rm -f "$PIDFILE"
echo "down.sh: stopped moto pid $PID" >&2
# Docker mode: the containers of jobs that were still running go with it.
if [[ "$(cat "$STATE/batch-mode" 2>/dev/null)" == docker ]] && command -v docker >/dev/null; then
  left=$(docker ps -aq --filter label=torchx-aws-emulator 2>/dev/null || true)
  if [[ -n "$left" ]]; then
    # shellcheck disable=SC2086
    docker rm -f $left >/dev/null 2>&1 || true
  fi
fi
