#!/usr/bin/env python3
"""`torchx ui` at scale: the jobs page over 10,000 jobs, and a 1 GiB log tailed in the page.

    python3 bench/ui.py [--torchx target/release/torchx] [--fill target/release/examples/ledger_fill]
                        [--jobs 10000] [--gib 1]

Measures:
  - `GET /api/apps` with N finished jobs in the ledger (median of 20 warm requests), beside
    `torchx list --json` of the same ledger;
  - in headless Chromium (when Debian's chromium, chromium-driver and selenium are here): the
    time from opening the page to its N rows being counted, a filter keystroke's re-render,
    and the page's JS heap;
  - a 1 GiB log: `GET /api/logs/...?lines=5000` to its end (time, the server's peak RSS), and
    the logs page's JS heap once it shows the last 5000 lines.
Build first: `cargo build --release -p torchx-cli` and
`cargo build --release -p torchx --features testing --example ledger_fill`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any

LINE = "0123456789" * 9 + "abcdefgh"


class Server:
    def __init__(self, torchx: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([torchx, "ui", "--port", "0"], env=env, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip().removeprefix("torchx ui: ")
        self.base, self.token = self.url.split("/?token=")
        self.port = self.base.rsplit(":", 1)[1]

    def get(self, path: str) -> bytes:
        req = urllib.request.Request(self.base + path, headers={"Cookie": f"torchx_ui_{self.port}={self.token}"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return bytes(r.read())

    def peak_rss_mib(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def timed(f: Any, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def browser() -> Any | None:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    if not os.path.exists("/usr/bin/chromium"):
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--enable-precise-memory-info",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def until(check: Any, within: float = 300) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.01)
    raise TimeoutError


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchx", default="target/release/torchx")
    ap.add_argument("--fill", default="target/release/examples/ledger_fill")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--gib", type=float, default=1.0)
    a = ap.parse_args()
    torchx = os.path.abspath(a.torchx)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHX_STATE_DIR=f"{tmp}/state", HOME=tmp)
        env.pop("TORCHXCONFIG", None)
        subprocess.run([a.fill, str(a.jobs)], env=env, check=True, stdout=subprocess.DEVNULL)
        ui = Server(torchx, env)
        ui.get("/api/apps")
        api = timed(lambda: ui.get("/api/apps"), 20)
        cli = timed(lambda: subprocess.run([torchx, "list", "--json"], env=env, stdout=subprocess.DEVNULL), 5)
        print(f"GET /api/apps, {a.jobs} jobs: {api:.1f} ms (torchx list --json: {cli:.1f} ms)")
        driver = browser()
        if driver:
            driver.get(ui.url)
            driver.get(ui.base + "/#/")
            start = time.perf_counter()
            until(
                lambda: driver.execute_script(
                    "const c = document.getElementById('count'); return c && c.textContent.startsWith('"
                    + str(a.jobs)
                    + " of')"
                )
            )
            shown = (time.perf_counter() - start) * 1000
            keystroke = driver.execute_script(
                "const i = document.getElementById('filter-name'); const t = performance.now();"
                "i.value = 'echo-1'; i.dispatchEvent(new Event('input')); return performance.now() - t;"
            )
            heap = driver.execute_script("return performance.memory.usedJSHeapSize") / (1 << 20)
            print(
                f"  page: {a.jobs} rows counted after {shown:.0f} ms; a filter keystroke re-renders in "
                f"{keystroke:.1f} ms; JS heap {heap:.1f} MiB"
            )
        lines = int(a.gib * (1 << 30) / (len(LINE) + 1))
        out = subprocess.run(
            [torchx, "run", "utils.sh", "--", "sh", "-c", f"yes {LINE} | head -n {lines}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        handle = out.stdout.split()[0]
        path = "/api/logs/" + urllib.parse.quote(handle, safe="") + "?lines=5000"
        start = time.perf_counter()
        body = ui.get(path)
        took = time.perf_counter() - start
        print(
            f"GET {a.gib:g} GiB log, last 5000 lines ({len(body) >> 10} KiB): {took:.2f} s; "
            f"server peak RSS {ui.peak_rss_mib():.0f} MiB"
        )
        if driver:
            driver.get(ui.base + "/#/logs/" + urllib.parse.quote(handle, safe=""))
            start = time.perf_counter()
            until(
                lambda: (
                    "last 5000 lines" in driver.execute_script("return document.getElementById('log-note').textContent")
                )
            )
            shown = time.perf_counter() - start
            heap = driver.execute_script("return performance.memory.usedJSHeapSize") / (1 << 20)
            print(f"  page: the last 5000 lines shown after {shown:.2f} s; JS heap {heap:.1f} MiB")
            driver.quit()
        ui.stop()


if __name__ == "__main__":
    main()
