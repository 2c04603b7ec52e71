"""What the container timer and the Slurm task wrapper cost while they wait for a replica's
processes after a signal: one scan of every `/proc/PID/environ` for the replica's mark, every
200 ms, on a node with 1,000 other processes. Times the exact scan (`grep -zxF`, what the shells
run) and the substring scan it replaced, each as `sh -c` runs it.

    python3 bench/mark_scan.py [--processes 1000] [--scans 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time

EXACT = 'grep -lsF -zx "TORCHX_ATTEMPT_MARK=$mark" /proc/[0-9]*/environ >/dev/null'
SUBSTRING = 'grep -lsF "TORCHX_ATTEMPT_MARK=$mark" /proc/[0-9]*/environ >/dev/null'


def scan_ms(script: str, scans: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of one scan (CPU: user + system of the children)."""
    walls, cpus = [], []
    env = {**os.environ, "mark": "torchx-1-0-4242-"}
    for _ in range(scans):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(["sh", "-c", script], env=env, check=False)
        walls.append((time.perf_counter() - started) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--scans", type=int, default=30)
    args = parser.parse_args()
    # Other processes of the node, each with an environment of ordinary size.
    others = [
        subprocess.Popen(["sleep", "600"], env={**os.environ, "TORCHX_ATTEMPT_MARK": f"torchx-1-0-{i}-"})
        for i in range(args.processes)
    ]
    try:
        total = len([p for p in os.listdir("/proc") if p.isdigit()])
        print(f"processes on the node: {total}")
        for label, script in [("exact (grep -zxF)", EXACT), ("substring (before)", SUBSTRING)]:
            wall, cpu = scan_ms(script, args.scans)
            print(f"{label}: {wall:.1f} ms a scan (CPU {cpu:.1f} ms); at 5 scans/s {cpu * 5 / 10:.1f}% of a core")
    finally:
        for p in others:
            p.kill()
        for p in others:
            p.wait()


if __name__ == "__main__":
    main()
