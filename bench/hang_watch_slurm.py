"""What Slurm's hang watch costs when nothing hangs: a 2-replica job whose replicas each print a
line every 10 ms for 10 s, run on the Slurm cluster with and without ``--hang_timeout``,
alternately; reported is the job's CPU time as Slurm accounts it (``sacct`` TotalCPU: every
process of the batch script and the steps, the watch's shells, pumps and checks among them).

    python3 bench/hang_watch_slurm.py [--runs 3]

Needs a Slurm cluster with accounting (``scripts/slurm/up.sh``) and a torchx binary
(``$TORCHX_BIN``, else target/release, else target/debug)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = (
    "name: chatty\nroles:\n- name: trainer\n  image: .\n  entrypoint: sh\n  num_replicas: 2\n"
    "  args: [-c, 'i=0; while [ $i -lt 1000 ]; do echo line $i; i=$((i+1)); sleep 0.01; done']\n"
)


def torchx() -> str:
    if os.environ.get("TORCHX_BIN"):
        return os.environ["TORCHX_BIN"]
    release = ROOT / "target" / "release" / "torchx"
    return str(release if release.exists() else ROOT / "target" / "debug" / "torchx")


def seconds(text: str) -> float:
    """sacct's [DD-[HH:]]MM:SS.mmm."""
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return (int(days or 0) * 24 + parts[0]) * 3600 + parts[1] * 60 + parts[2]


def one(watch: bool, cwd: Path) -> float:
    extra = ["--hang_timeout", "60s"] if watch else []
    out = subprocess.run(
        [torchx(), "run", "-s", "slurm", "--wait", *extra, "./app.yaml"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    job = out.stdout.split()[0].rsplit("/", 1)[1]
    # The accounting of the job's end lands a moment after it.
    for _ in range(50):
        said = subprocess.run(
            ["sacct", "-j", job, "-n", "-P", "--format=JobID,State,TotalCPU"], capture_output=True, text=True
        ).stdout.strip()
        # A line per component of the heterogeneous job (a replica each), with its steps' CPU
        # once they are accounted (each component's step 0 is listed).
        rows = [line.split("|") for line in said.splitlines()]
        components = [r for r in rows if "." not in r[0]]
        steps = [r for r in rows if r[0].endswith(".0")]
        if components and len(steps) == len(components) and all(r[1] == "COMPLETED" for r in components):
            return sum(seconds(r[2]) for r in components)
        time.sleep(0.2)
    raise RuntimeError(f"job {job}: no accounting ({said!r})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "app.yaml").write_text(APP)
        seen: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(runs):
            for watch in (False, True):
                seen[watch].append(one(watch, cwd))
    for watch, label in ((False, "without"), (True, "with --hang_timeout 60s")):
        values = seen[watch]
        print(f"job CPU {label}: median {statistics.median(values) * 1000:.0f} ms ({values})")


if __name__ == "__main__":
    main()
