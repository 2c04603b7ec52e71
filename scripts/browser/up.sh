#!/usr/bin/env bash
# Debian's Chromium and its WebDriver, for the dashboard's browser tests
# (python/tests/test_ui_browser.py drives them with Selenium, headless). Installs them when
# missing (root, apt); prints the browser's version.
set -euo pipefail
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "browser/up.sh: chromium and chromium-driver are missing: apt-get install chromium chromium-driver (as root)" >&2
    exit 1
  fi
  log=$(mktemp)
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >"$log" 2>&1 \
    || { tail -20 "$log" >&2; echo "browser/up.sh: apt-get install chromium chromium-driver failed" >&2; exit 1; }
fi
/usr/bin/chromium --version 2>/dev/null | head -1
