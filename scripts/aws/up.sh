#!/usr/bin/env bash
# Start a local AWS emulator (moto server with the patches of moto_ext.py) on loopback for the
# aws_batch and aws_sagemaker integration tests, and create the `torchx` job queue in it.
# Batch jobs really run as containers when a Docker engine answers (DOCKER_HOST): docker mode;
# without one they only move through their states: lifecycle mode. moto.env says which
# (AWS_EMU_BATCH_MODE), and so does the last line but one of this script's output.
#
#   bash scripts/aws/up.sh     # installs moto into .venv-aws (PyPI, ~30 s once), starts it
#   . .aws-emu/moto.env        # exports AWS_ENDPOINT_URL + dummy credentials + region
#   ...run tests...
#   bash scripts/aws/down.sh   # kills exactly the pid recorded by up.sh
#
# Adapted from the team's shared recipe. Lifecycle mode (moto_ext.py) is on by default here:
# jobs move SUBMITTED -> ... -> RUNNING -> SUCCEEDED, jobs named `bad-*` or `*must-fail*` fail,
# TerminateJob works. Set AWS_EMU_PROGRESS=0 for plain moto.
#
# Settings (all optional, environment variables):
#   AWS_EMU_VENV       venv to install moto into        (default: $PWD/.venv-aws)
#   AWS_EMU_STATE_DIR  where pid/log/env files go        (default: $PWD/.aws-emu)
#   AWS_EMU_PORT       loopback port                     (default: 5000)
#   AWS_EMU_HOST       bind address, keep it loopback    (default: 127.0.0.1)
#   AWS_EMU_MOTO_SPEC  pip requirement for moto          (default: moto[server]==5.2.5)
#   AWS_EMU_BATCH_DOCKER=1|0 run Batch jobs on the Docker engine (batch_docker.py), or not.
#                            Default: 1 when the engine of DOCKER_HOST answers, else 0 (the
#                            docker-free 'batch_simple' backend, moved through states below).
#   MOTO_SIMPLE_BATCH_FAIL_AFTER=N  passed through to moto: batch_simple jobs FAIL instead,
#                            after submit_job blocks for N seconds (0 = fail at once).
#   AWS_EMU_PROGRESS=1       start moto_ext.py (next to this script) instead of plain moto:
#                            Batch jobs and SageMaker training jobs then move through their
#                            states over time, stop_training_job works, ARNs are accepted as
#                            job ids, MNP node jobs 'id#N' describe.  Knobs (seconds):
#                            AWS_EMU_STEP_SECONDS (0.5) per pre-run state, AWS_EMU_RUN_SECONDS (2)
#                            running; AWS_EMU_FAIL_JOBS_MATCHING=REGEX makes matching jobs fail.
# Paths are resolved against the directory you run the script from (your checkout).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${AWS_EMU_VENV:-$ROOT/.venv-aws}"
STATE="${AWS_EMU_STATE_DIR:-$ROOT/.aws-emu}"
export AWS_EMU_PROGRESS="${AWS_EMU_PROGRESS:-1}"
export AWS_EMU_STEP_SECONDS="${AWS_EMU_STEP_SECONDS:-0.2}"
export AWS_EMU_RUN_SECONDS="${AWS_EMU_RUN_SECONDS:-1.5}"
export AWS_EMU_FAIL_JOBS_MATCHING="${AWS_EMU_FAIL_JOBS_MATCHING:-^bad-|must-fail}"
PORT="${AWS_EMU_PORT:-5000}"
HOST="${AWS_EMU_HOST:-127.0.0.1}"
SPEC="${AWS_EMU_MOTO_SPEC:-moto[server]==5.2.5}"
PY="${PYTHON:-python3}"
URL="http://$HOST:$PORT"
PIDFILE="$STATE/moto.pid"
LOG="$STATE/moto.log"
ENVFILE="$STATE/moto.env"

case "$HOST" in
  127.*|localhost|::1) ;;
  *) echo "up.sh: refusing to bind $HOST: loopback only" >&2; exit 2 ;;
esac

mkdir -p "$STATE"

# 1. install (idempotent: skipped when the venv already has a working moto_server)
if ! "$VENV/bin/python" -c 'import moto.server, boto3, flask' >/dev/null 2>&1; then
  echo "up.sh: installing $SPEC into $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$SPEC" boto3 docker >&2
fi
if ! "$VENV/bin/python" -c 'import docker' >/dev/null 2>&1; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check docker >&2
fi

if [[ -z "${AWS_EMU_BATCH_DOCKER:-}" ]]; then
  if "$VENV/bin/python" -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1; then
    AWS_EMU_BATCH_DOCKER=1
  else
    AWS_EMU_BATCH_DOCKER=0
  fi
fi
export AWS_EMU_BATCH_DOCKER

MODEFILE="$STATE/batch-mode"
write_env() {
  local mode
  mode=$(cat "$MODEFILE" 2>/dev/null || echo lifecycle)
  cat >"$ENVFILE" <<EOF
export AWS_EMU_BATCH_MODE=$mode
export AWS_ENDPOINT_URL=$URL
export AWS_ACCESS_KEY_ID=testing
export AWS_SECRET_ACCESS_KEY=testing
export AWS_SESSION_TOKEN=testing
export AWS_DEFAULT_REGION=us-east-1
export AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/null
export AWS_SHARED_CREDENTIALS_FILE=/dev/null
EOF
}

ready() {
  "$VENV/bin/python" - "$URL" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/moto-api/config", timeout=2).read()
EOF
}

# 2. already running?
if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && ready; then
  echo "up.sh: moto already running (pid $(cat "$PIDFILE")) at $URL, Batch in $(cat "$MODEFILE" 2>/dev/null || echo lifecycle) mode" >&2
  write_env
  AWS_ENDPOINT_URL="$URL" "$VENV/bin/python" "$HERE/seed.py" torchx >/dev/null
  echo "$ENVFILE"
  exit 0
fi
rm -f "$PIDFILE"
if [[ "$AWS_EMU_BATCH_DOCKER" == 1 ]]; then echo docker >"$MODEFILE"; else echo lifecycle >"$MODEFILE"; fi
if ready; then
  echo "up.sh: something else already answers on $URL; pick another AWS_EMU_PORT" >&2
  exit 1
fi

# 3. start, detached from this shell, pid recorded
if command -v setsid >/dev/null; then DETACH=(setsid); else DETACH=(); fi
if [[ "${AWS_EMU_PROGRESS:-0}" == 1 ]]; then
  SERVER=("$VENV/bin/python" "$HERE/moto_ext.py")
else
  SERVER=("$VENV/bin/python" -m moto.server)
fi
TEST_SERVER_MODE=true AWS_EMU_URL="$URL" "${DETACH[@]}" "${SERVER[@]}" -H "$HOST" -p "$PORT" >"$LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"

for _ in $(seq 1 150); do
  if ready; then break; fi
  if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "up.sh: moto exited during start-up; log follows" >&2; cat "$LOG" >&2; rm -f "$PIDFILE"; exit 1
  fi
  sleep 0.2
done
if ! ready; then
  echo "up.sh: moto did not answer on $URL within 30 s; log: $LOG" >&2; exit 1
fi

# 4. docker-free Batch unless asked otherwise
if [[ "$AWS_EMU_BATCH_DOCKER" != 1 ]]; then
  "$VENV/bin/python" - "$URL" <<'EOF'
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/moto-api/config", method="POST",
                             data=json.dumps({"batch": {"use_docker": False}}).encode())
cfg = json.loads(urllib.request.urlopen(req, timeout=5).read())
assert cfg["batch"]["use_docker"] is False, cfg
EOF
fi

write_env
AWS_ENDPOINT_URL="$URL" "$VENV/bin/python" "$HERE/seed.py" torchx >/dev/null
echo "up.sh: moto $("$VENV/bin/python" -c 'import moto; print(moto.__version__)') pid $(cat "$PIDFILE") at $URL, Batch in $(cat "$MODEFILE") mode; env: . $ENVFILE" >&2
echo "$ENVFILE"
