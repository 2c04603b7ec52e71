#!/usr/bin/env bash
# Start two real OCI registries (Debian's docker-registry, distribution 2.8) on loopback for the
# workspace-image tests: an open one and one behind htpasswd basic auth. Idempotent: a registry
# already running (by its pid file) is left alone. Root only for the first install.
# The AWS emulator owns port 5000: these use 5055 (open) and 5056 (authenticated).
#
#   bash scripts/registry/up.sh    # prints the path of an env file on its last line
#   . "$(bash scripts/registry/up.sh | tail -1)"
#   bash scripts/registry/down.sh  # stops exactly the registries this script started
#
# Settings (environment variables, all optional):
#   REGISTRY_DIR        state dir (default /var/lib/torchx-registry)
#   REGISTRY_PORT       open registry port (default 5055); REGISTRY_AUTH_PORT (default 5056)
#   REGISTRY_USER / REGISTRY_PASSWORD   the authenticated registry's account (default torchx / torchx-test)
set -euo pipefail
dir=${REGISTRY_DIR:-/var/lib/torchx-registry}
port=${REGISTRY_PORT:-5055}
auth_port=${REGISTRY_AUTH_PORT:-5056}
user=${REGISTRY_USER:-torchx}
password=${REGISTRY_PASSWORD:-torchx-test}
mkdir -p "$dir"

if ! command -v docker-registry >/dev/null || ! command -v htpasswd >/dev/null; then
  # keep the package from starting its own registry on :5000 while it installs
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry apache2-utils >"$dir/apt.log" 2>&1 \
    || { tail -20 "$dir/apt.log" >&2; echo "registry/up.sh: apt-get install docker-registry apache2-utils failed" >&2; exit 1; }
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

htpasswd -Bbc "$dir/htpasswd" "$user" "$password" >/dev/null 2>&1

# start NAME PORT [auth]: one registry with its own storage, config, log and pid file.
start() {
  local name=$1 p=$2 auth=${3:-}
  local pidfile="$dir/$name.pid"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "registry $name already running on 127.0.0.1:$p" >&2
    return
  fi
  mkdir -p "$dir/$name"
  {
    printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n' "$dir/$name"
    printf 'http:\n  addr: 127.0.0.1:%s\n' "$p"
    [ -n "$auth" ] && printf 'auth:\n  htpasswd:\n    realm: torchx-test\n    path: %s\n' "$dir/htpasswd"
  } >"$dir/$name.yml"
  docker-registry serve "$dir/$name.yml" >"$dir/$name.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 40); do
    # 200 from the open registry, 401 from the authenticated one: both are up.
    python3 - "$p" <<'PY' && return
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v2/", timeout=2)
except urllib.error.HTTPError as e:
    sys.exit(e.code != 401)
except OSError:
    sys.exit(1)
PY
    sleep 0.25
  done
  tail -20 "$dir/$name.log" >&2
  echo "registry/up.sh: registry $name did not answer on 127.0.0.1:$p" >&2
  exit 1
}
start open "$port"
start auth "$auth_port" auth

cat >"$dir/registry.env" <<ENV
export TORCHX_TEST_REGISTRY=127.0.0.1:$port
export TORCHX_TEST_AUTH_REGISTRY=127.0.0.1:$auth_port
export TORCHX_TEST_REGISTRY_USER=$user
export TORCHX_TEST_REGISTRY_PASSWORD=$password
ENV
echo "$dir/registry.env"
