"""A linear pipeline of N local steps (`torchx run pipe.yaml`, each step `utils.sh true` after
the one before) against a shell script that waits for each job and submits the next (N
foreground `torchx run utils.sh true`). The difference per step is what the pipeline's holder
costs: a submitting process per step (`torchx __pipeline-step`, which outlives a holder that
dies) and the holder's look at the job it submitted.

    python3 bench/pipeline.py [--n 100] [--torchx target/release/torchx]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def pipeline(torchx: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TORCHX_STATE_DIR": d, "HOME": d}
        steps = [{"name": "s0", "component": "utils.sh", "args": ["true"]}]
        steps += [
            {"name": f"s{i}", "component": "utils.sh", "args": ["true"], "after": [f"s{i - 1}"]} for i in range(1, n)
        ]
        path = Path(d) / "pipe.json"
        path.write_text(json.dumps({"name": "bench", "steps": steps}))
        started = time.perf_counter()
        subprocess.run([torchx, "run", str(path)], env=env, cwd=d, capture_output=True, check=True)
        return time.perf_counter() - started


def loop(torchx: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TORCHX_STATE_DIR": d, "HOME": d}
        started = time.perf_counter()
        subprocess.run(
            ["sh", "-c", f'for i in $(seq {n}); do "{torchx}" run utils.sh true >/dev/null 2>&1 || exit 1; done'],
            env=env,
            cwd=d,
            check=True,
        )
        return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--torchx", default="target/release/torchx")
    a = p.parse_args()
    torchx = str(Path(a.torchx).resolve())
    pipes = [pipeline(torchx, a.n) for _ in range(3)]
    loops = [loop(torchx, a.n) for _ in range(3)]
    c, s = statistics.median(pipes), statistics.median(loops)
    print("| what | total (s) | per step (ms) |")
    print("|---|---|---|")
    print(
        f"| pipeline of {a.n} local steps, each after the one before (dry runs included) | {c:.2f} | {c / a.n * 1000:.1f} |"
    )
    print(f"| shell loop of {a.n} foreground `torchx run` | {s:.2f} | {s / a.n * 1000:.1f} |")


if __name__ == "__main__":
    main()
