#!/usr/bin/env python3
"""Python functions as jobs, side by side (BENCHMARKS.md, "Python functions as jobs").

Usage: python3 bench/futures.py --ours target/release/torchx [--runs N]
(the running Python must have this torchx package and submitit installed)

On local_cwd: `Executor("local_cwd").submit(pow, 2, 10).result()` (one executor, reused),
`torchx run --wait utils.python -c ...` of the equivalent job (the CLI, a process per run), and
submitit's `LocalExecutor` (`submit(pow, 2, 10).result()`). Medians of N runs.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def median_ms(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    root = tempfile.mkdtemp()
    os.environ["TORCHX_STATE_DIR"] = os.path.join(root, "state")
    os.environ["TORCHX_SUPERVISOR"] = os.path.abspath(a.ours)
    os.chdir(root)

    from torchx.futures import Executor

    with Executor("local_cwd") as ex:
        ex.submit(pow, 2, 10).result()  # warm
        ours = median_ms(lambda: ex.submit(pow, 2, 10).result(), a.runs)
    cli = [a.ours, "run", "--wait", "utils.python", "-c", "print(2 ** 10)"]
    run = median_ms(lambda: subprocess.run(cli, capture_output=True, check=True), a.runs)

    import submitit

    local = submitit.LocalExecutor(folder=os.path.join(root, "submitit"))
    local.submit(pow, 2, 10).result()  # warm
    theirs = median_ms(lambda: local.submit(pow, 2, 10).result(), a.runs)

    print(f"\npython {sys.version.split()[0]}, medians of {a.runs}\n")
    print("| a trivial call on the local machine | median (ms) |")
    print("|---|---|")
    print(f"| ours: `Executor('local_cwd').submit(pow, 2, 10).result()` | {ours:.0f} |")
    print(f"| ours: `torchx run --wait utils.python -c 'print(2 ** 10)'` | {run:.0f} |")
    print(f"| submitit {submitit.__version__}: `LocalExecutor.submit(pow, 2, 10).result()` | {theirs:.0f} |")


if __name__ == "__main__":
    main()
