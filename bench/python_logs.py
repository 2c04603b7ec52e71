#!/usr/bin/env python3
"""A long log read from Python (`Runner.log_lines`, as `torchx log` does it in TorchX) beside
the CLI's `torchx log` of the same job. Each Python reader is timed with two consumers: a
Python `for` loop (what a script pays per line on top) and `collections.deque(..., maxlen=0)`,
which takes the lines at C speed (the reader's own throughput).

    python bench/python_logs.py [--torchx target/release/torchx] [--lines 2000000]

Run with the interpreter whose `torchx` package is under test (a venv with the wheel built
from this checkout). Output goes nowhere; the median of 3 runs of each is printed.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(f: object, n: int = 3) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchx", default="target/release/torchx")
    ap.add_argument("--lines", type=int, default=2_000_000)
    a = ap.parse_args()
    torchx = os.path.abspath(a.torchx)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TORCHX_STATE_DIR"] = f"{tmp}/state"
        os.environ["TORCHX_SUPERVISOR"] = torchx
        line = "0123456789" * 9 + "abcdefgh"
        out = subprocess.run(
            [torchx, "run", "utils.sh", "--", "sh", "-c", f"yes {line} | head -n {a.lines}"],
            capture_output=True,
            text=True,
            check=True,
        )
        handle = out.stdout.split()[0]
        size = a.lines * (len(line) + 1) / (1 << 20)

        def cli() -> None:
            subprocess.run([torchx, "log", f"{handle}/sh/0"], stdout=subprocess.DEVNULL, check=True)

        def lines() -> object:
            from torchx.runner import get_runner

            return get_runner().log_lines(handle, "sh", 0)

        # The floor of any per-line API: Python iterating the same log file itself.
        import glob

        (log_file,) = glob.glob(f"{tmp}/state/**/sh/0/stdout.log", recursive=True)

        def file_lines() -> object:
            return open(log_file)  # noqa: SIM115 - closed when the consumer drops it

        def looped(source: object) -> object:
            def run() -> None:
                n = sum(1 for _ in source())  # type: ignore[operator]
                assert n == a.lines, n

            return run

        def drained(source: object) -> object:
            return lambda: collections.deque(source(), maxlen=0)  # type: ignore[operator]

        t_cli = timed(cli)
        print(f"{a.lines} lines ({size:.0f} MiB), median of 3:")
        print(f"  torchx log (CLI):                      {t_cli:6.2f} s  {size / t_cli:7.0f} MiB/s")
        for what, source in (("Runner.log_lines", lines), ("open(file) lines", file_lines)):
            for consumer, wrap in (("for loop", looped), ("deque", drained)):
                t = timed(wrap(source))
                label = f"{what} ({consumer}):"
                print(f"  {label:38s} {t:6.2f} s  {size / t:7.0f} MiB/s  ({t_cli / t:.0%} of the CLI)")
        print(f"  (python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
