"""Dependencies (`torchx run --after`) against a shell script that waits and submits.

1. local_cwd: a linear chain of N jobs of `true`, each `--after` the one before, submitted at
   once (`--detach`), then waited for; against a shell loop that runs the same N jobs one
   after the other in the foreground. The difference per step is what holding a job costs.
2. slurm (`--slurm`): a job `--after` another is one `sbatch --dependency`: the submitting
   command returns at once and no client polls; we count the Slurm commands a shim sees
   while the dependent waits.

    python3 bench/after.py [--n 100] [--torchx target/release/torchx] [--slurm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def run(torchx: str, env: dict, *args: str, cwd: str | None = None) -> str:
    out = subprocess.run([torchx, *args], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def chain(torchx: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TORCHX_STATE_DIR": d, "HOME": d}
        started = time.perf_counter()
        prev = run(torchx, env, "run", "--detach", "utils.sh", "true")
        for _ in range(n - 2):
            prev = run(torchx, env, "run", "--detach", "--after", prev, "utils.sh", "true")
        run(torchx, env, "run", "--after", prev, "utils.sh", "true")
        return time.perf_counter() - started


def loop(torchx: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TORCHX_STATE_DIR": d, "HOME": d}
        started = time.perf_counter()
        subprocess.run(
            ["sh", "-c", f'for i in $(seq {n}); do "{torchx}" run utils.sh true >/dev/null 2>&1; done'],
            env=env,
            check=True,
        )
        return time.perf_counter() - started


def slurm_edge(torchx: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        shims = Path(d) / "bin"
        shims.mkdir()
        calls = Path(d) / "calls"
        for cmd in ("squeue", "sacct", "scontrol", "sbatch"):
            real = subprocess.run(["sh", "-c", f"command -v {cmd}"], capture_output=True, text=True).stdout.strip()
            (shims / cmd).write_text(f'#!/bin/sh\necho {cmd} >> {calls}\nexec {real} "$@"\n')
            (shims / cmd).chmod(0o755)
        env = {**os.environ, "TORCHX_STATE_DIR": d, "PATH": f"{shims}:{os.environ['PATH']}"}
        # Submitted from the temporary directory: Slurm writes the jobs' output files there.
        first = run(torchx, env, "run", "-s", "slurm", "utils.sh", "sleep", "10", cwd=d)
        started = time.perf_counter()
        run(torchx, env, "run", "-s", "slurm", "--after", first, "utils.sh", "true", cwd=d)
        submit = time.perf_counter() - started
        before = calls.read_text().split().count("squeue")
        time.sleep(8)
        after = calls.read_text().split().count("squeue")
        print(
            f"| slurm: submit a job `--after` a running one | {submit * 1000:.0f} ms | "
            f"{after - before} squeue calls by torchx while it waits (Slurm holds it) |"
        )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--torchx", default="target/release/torchx")
    p.add_argument("--slurm", action="store_true")
    a = p.parse_args()
    torchx = str(Path(a.torchx).resolve())
    chains = [chain(torchx, a.n) for _ in range(3)]
    loops = [loop(torchx, a.n) for _ in range(3)]
    c, s = statistics.median(chains), statistics.median(loops)
    print("| what | total (s) | per step (ms) |")
    print("|---|---|---|")
    print(f"| chain of {a.n} local jobs, each `--after` the one before | {c:.2f} | {c / a.n * 1000:.1f} |")
    print(f"| shell loop of {a.n} foreground `torchx run` | {s:.2f} | {s / a.n * 1000:.1f} |")
    print(f"overhead of holding, per step: {(c - s) / a.n * 1000:.1f} ms")
    if a.slurm:
        slurm_edge(torchx)


if __name__ == "__main__":
    main()
