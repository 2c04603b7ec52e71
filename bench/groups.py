#!/usr/bin/env python3
"""Arrays and sweeps, side by side (BENCHMARKS.md, "Arrays and sweeps").

Usage: python3 bench/groups.py --ours target/release/torchx [--torchx-venv DIR] [--slurm]

1. local_cwd: 100 tasks of 0.2 s, at most 8 at once: `torchx run --wait --array 0-99%8`, the
   same commands run by a shell loop 8 at a time (`xargs -P8`), a shell loop of `torchx run
   --wait` (ours, then Python TorchX's) 8 at a time. Each task notes how many run beside it: the
   most any saw is reported.
2. --slurm (a cluster up, scripts/slurm/up.sh): a 1000-task array, `torchx run -s slurm --array
   0-999`: its Slurm calls (counted by shims on PATH), its time, and the group's `torchx status`
   (calls, time); then the same 1000 jobs as a shell loop of `torchx run -s slurm` (ours: 100
   timed, Python TorchX: 10 timed, both scaled to 1000). Everything submitted is cancelled.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

TASK = "d={d}; touch $d/run.{i}; ls $d | grep -c '^run' >> $d/seen; sleep 0.2; rm $d/run.{i}"


def timed(cmd, env, shell=False):
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, shell=shell, capture_output=True, text=True, check=False)
    return time.perf_counter() - t, p


def most_seen(d):
    with open(os.path.join(d, "seen")) as f:
        return max(int(x) for x in f.read().split())


def fresh_env(root):
    env = dict(os.environ)
    for sub in ("home", "state"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    env.update(HOME=os.path.join(root, "home"), TORCHX_STATE_DIR=os.path.join(root, "state"))
    env.pop("TORCHXCONFIG", None)
    return env


def local_sweep(ours, python_torchx, runs):
    rows = {}

    def measure(label, build):
        times, most = [], 0
        for _ in range(runs):
            root = tempfile.mkdtemp()
            d = os.path.join(root, "runs")
            os.makedirs(d)
            cmd, shell = build(d)
            elapsed, p = timed(cmd, fresh_env(root), shell)
            if p.returncode != 0:
                raise SystemExit(f"{label} failed: {p.stderr[-2000:]}")
            times.append(elapsed)
            most = max(most, most_seen(d))
            shutil.rmtree(root, ignore_errors=True)
        rows[label] = (statistics.median(times), most)

    measure(
        "ours: `torchx run --wait --array 0-99%8`",
        lambda d: (
            [ours, "run", "--wait", "--array", "0-99%8", "utils.sh", "sh", "-c", TASK.format(d=d, i="${array_index}")],
            False,
        ),
    )
    measure(
        "shell: the same commands, `xargs -P8`",
        lambda d: (
            f"seq 0 99 | xargs -P8 -I@ sh -c {shq(TASK.format(d=d, i='@'))}",
            True,
        ),
    )
    measure(
        "shell loop of ours: `xargs -P8 torchx run --wait`",
        lambda d: (
            f"seq 0 99 | xargs -P8 -I@ {ours} run --wait utils.sh sh -c {shq(TASK.format(d=d, i='@'))} >/dev/null",
            True,
        ),
    )
    if python_torchx:
        measure(
            "shell loop of Python TorchX 0.7.0: `xargs -P8 torchx run --wait`",
            lambda d: (
                f"seq 0 99 | xargs -P8 -I@ {python_torchx} run -s local_cwd --wait utils.sh "
                f"sh -c {shq(TASK.format(d=d, i='@'))} >/dev/null 2>&1",
                True,
            ),
        )
    shell = rows["shell: the same commands, `xargs -P8`"][0]
    print("\n| 100 tasks of 0.2 s, 8 at once | median (s) | / shell | most at once |")
    print("|---|---|---|---|")
    for label, (t, most) in rows.items():
        print(f"| {label} | {t:.2f} | {t / shell:.2f}× | {most} |")


def shq(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


def shims(root, log):
    """A directory of logging shims for the Slurm commands, to go first on PATH."""
    d = os.path.join(root, "shims")
    os.makedirs(d)
    for tool in ("sbatch", "squeue", "sacct", "scontrol", "sinfo", "scancel"):
        real = shutil.which(tool)
        path = os.path.join(d, tool)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho {tool} >> {log}\nexec {real} "$@"\n')
        os.chmod(path, 0o755)
    return d


def calls(log):
    if not os.path.exists(log):
        return {}
    out = {}
    with open(log) as f:
        for line in f:
            out[line.strip()] = out.get(line.strip(), 0) + 1
    os.remove(log)
    return out


def slurm_array(ours, python_torchx):
    root = tempfile.mkdtemp()
    env = fresh_env(root)
    log = os.path.join(root, "calls")
    env["PATH"] = shims(root, log) + ":" + env["PATH"]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        elapsed, p = timed([ours, "run", "-s", "slurm", "--array", "0-999", "utils.sh", "true"], env)
        if p.returncode != 0:
            raise SystemExit(f"the array failed: {p.stderr[-2000:]}")
        group = p.stdout.strip()
        submitted = calls(log)
        status_times = []
        for _ in range(5):
            t, s = timed([ours, "status", group], env)
            status_times.append(t)
        status_calls = calls(log)
        n_status = sum(status_calls.values()) / 5
        timed([ours, "cancel", group], env)
        calls(log)
        print("\n| 1000-task Slurm array | time (s) | Slurm calls |")
        print("|---|---|---|")
        print(f"| `torchx run -s slurm --array 0-999` | {elapsed:.2f} | {fmt(submitted)} |")
        print(
            f"| `torchx status <group>` (median of 5) | {statistics.median(status_times):.3f} "
            f"| {n_status:g} per status ({fmt(status_calls)} over 5) |"
        )
        loop_ours = loop(env, [ours, "run", "-s", "slurm", "utils.sh", "true"], 100)
        calls(log)
        print(
            f"| shell loop of ours, `torchx run -s slurm` ×1000 (100 timed, ×10) | {loop_ours * 10:.1f} | 1000 sbatch |"
        )
        if python_torchx:
            loop_py = loop(env, [python_torchx, "run", "-s", "slurm", "utils.sh", "true"], 10)
            print(f"| shell loop of Python TorchX 0.7.0 ×1000 (10 timed, ×100) | {loop_py * 100:.0f} | 1000 sbatch |")
        subprocess.run(["scancel", "--me"], check=False)
    finally:
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)


def loop(env, cmd, n):
    t = time.perf_counter()
    for _ in range(n):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise SystemExit(f"{cmd} failed: {p.stderr[-2000:]}")
    return time.perf_counter() - t


def fmt(counts):
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--torchx-venv", default=None, help="a venv with torchx==0.7.0")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--slurm", action="store_true")
    a = ap.parse_args()
    ours = os.path.abspath(a.ours)
    python_torchx = os.path.join(a.torchx_venv, "bin", "torchx") if a.torchx_venv else None
    local_sweep(ours, python_torchx, a.runs)
    if a.slurm:
        slurm_array(ours, python_torchx)


if __name__ == "__main__":
    main()
