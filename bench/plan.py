"""`torchx plan` across local_cwd, slurm and local_docker, and what the pre-flight checks add to
`torchx run` on local_cwd (`run` against `run --skip_preflight`, each `utils.sh true`).

    python3 bench/plan.py [--torchx target/release/torchx] [--n 20]

Needs the Slurm cluster (scripts/slurm/up.sh) and the Docker engine (scripts/docker/up.sh,
DOCKER_HOST) for the plan row; run from a scratch directory (Slurm writes nothing for a
test-only submission, but the local jobs log under the state directory).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str], env: dict[str, str], cwd: str, ok: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"{cmd}: exit {done.returncode}: {done.stderr}")
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--torchx", default="target/release/torchx")
    p.add_argument("--n", type=int, default=20)
    a = p.parse_args()
    torchx = str(Path(a.torchx).resolve())
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TORCHX_STATE_DIR": d, "HOME": d}
        plan = [
            torchx,
            "plan",
            "-s",
            "local_cwd,slurm,local_docker",
            "--workspace",
            "",
            "utils.sh",
            "--image",
            "busybox:local",
            "true",
        ]
        timed(plan, env, d)
        plans = [timed(plan, env, d) for _ in range(a.n)]
        run = [torchx, "run", "utils.sh", "true"]
        skip = [torchx, "run", "--skip_preflight", "utils.sh", "true"]
        runs, skips = [], []
        for _ in range(a.n):
            runs.append(timed(run, env, d))
            skips.append(timed(skip, env, d))
    ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    print("| what | median (ms) |")
    print("|---|---|")
    print(
        f"| `torchx plan -s local_cwd,slurm,local_docker` (sbatch --test-only, the engine's image) | {ms(plans):.0f} |"
    )
    print(f"| `torchx run utils.sh true` on local_cwd (pre-flight on) | {ms(runs):.1f} |")
    print(f"| `torchx run --skip_preflight utils.sh true` | {ms(skips):.1f} |")
    print(f"pre-flight adds {ms(runs) - ms(skips):.1f} ms")


if __name__ == "__main__":
    main()
