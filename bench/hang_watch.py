"""What the hang watchdog costs when nothing hangs: a 2-replica local_cwd job that prints a line
every 10 ms for 10 s, run with and without ``--hang_timeout``, alternately; reported is the CPU
time (user + system) of the job's supervisor, read from ``/proc/<pid>/stat`` until it exits.

    python3 bench/hang_watch.py [--runs 5]

Needs the release binary (``cargo build --release -p torchx-cli``) or ``$TORCHX_BIN``."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
APP = (
    "name: chatty\nroles:\n- name: trainer\n  image: .\n  entrypoint: sh\n  num_replicas: 2\n"
    "  args: [-c, 'i=0; while [ $i -lt 1000 ]; do echo line $i; i=$((i+1)); sleep 0.01; done']\n"
)


def torchx() -> str:
    return os.environ.get("TORCHX_BIN") or str(ROOT / "target" / "release" / "torchx")


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def one(watch: bool, state: Path, cwd: Path) -> float:
    env = dict(os.environ, TORCHX_STATE_DIR=str(state))
    extra = ["--hang_timeout", "60s"] if watch else []
    out = subprocess.run(
        [torchx(), "run", "--detach", *extra, "./app.yaml"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    handle = out.stdout.split()[0]
    described = subprocess.run(
        [torchx(), "describe", handle, "--json"], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    pid = int(json.loads(described.stdout)["metadata"]["supervisor_pid"])
    last = 0.0
    while (now := cpu_seconds(pid)) is not None:
        last = now
        time.sleep(0.05)
    return last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "app.yaml").write_text(APP)
        seen: dict[bool, list[float]] = {False: [], True: []}
        for i in range(runs):
            for watch in (False, True):
                seen[watch].append(one(watch, cwd / f"state-{i}-{watch}", cwd))
    for watch, label in ((False, "without"), (True, "with --hang_timeout 60s")):
        values = seen[watch]
        print(f"supervisor CPU {label}: median {statistics.median(values) * 1000:.0f} ms ({values})")


if __name__ == "__main__":
    main()
