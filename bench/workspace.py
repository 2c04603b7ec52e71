#!/usr/bin/env python3
"""The second `torchx run` of an unchanged workspace, ours vs Python TorchX 0.7.0.

Needs the engines of scripts/docker/up.sh, scripts/registry/up.sh and scripts/aws/up.sh (their
env exported) and a venv with torchx==0.7.0, docker and boto3 (`--torchx-venv`). The workspace
is a small project (200 source files, one 5 MB data file). Each tool runs once to warm up
(build, push), then `--runs` more times on the unchanged workspace; medians in ms.

    python3 bench/workspace.py --ours target/release/torchx --torchx-venv /tmp/venv
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def project(root: Path) -> None:
    for i in range(200):
        (root / "pkg").mkdir(exist_ok=True)
        (root / "pkg" / f"mod_{i}.py").write_text(f"VALUE = {i}\n" * 50)
    (root / "data.bin").write_bytes(os.urandom(5 * 1024 * 1024))
    (root / "main.py").write_text("print('hi')\n")


def timed(cmd: list, cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--torchx-venv", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    registry = os.environ["TORCHX_TEST_REGISTRY"]
    python_torchx = str(Path(a.torchx_venv) / "bin" / "torchx")
    rows = []
    for scheduler, cfg in [
        ("local_docker", ""),
        ("aws_batch", "queue=torchx,image_repo={registry}/bench/{tool}"),
    ]:
        for tool, binary in [("ours", str(Path(a.ours).resolve())), ("torchx", python_torchx)]:
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp) / "proj"
                root.mkdir()
                project(root)
                env = dict(os.environ, HOME=tmp, TORCHX_STATE_DIR=str(Path(tmp) / "state"))
                cmd = [binary, "run", "-s", scheduler]
                if cfg:
                    cmd += ["-cfg", cfg.format(registry=registry, tool=tool)]
                cmd += ["utils.sh", "--image", "busybox:local", "true"]
                first = timed(cmd, root, env)
                again = [timed(cmd, root, env) for _ in range(a.runs)]
                rows.append((scheduler, tool, first, statistics.median(again)))
    print("| scheduler | tool | first run (ms) | unchanged workspace, median (ms) |")
    print("|---|---|---|---|")
    for scheduler, tool, first, median in rows:
        print(f"| {scheduler} | {tool} | {first:.0f} | {median:.0f} |")


if __name__ == "__main__":
    main()
