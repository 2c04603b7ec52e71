#!/usr/bin/env python3
"""Side-by-side timings: this torchx vs Python TorchX 0.7.0 vs exec of /bin/true.

Usage: python3 bench/compare.py [--runs N] [--venv DIR]
Builds the release binary, installs torchx==0.7.0 into a throwaway venv (unless --venv points at
one that has it), runs every command N times (default 7) and prints medians as a Markdown table.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def median_ms(cmd, runs, env, cwd):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--venv", default=None)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "torchx-cli"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "torchx", "--example", "dryrun_bench"], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ours = os.path.join(target, "release", "torchx")
    venv = a.venv or os.path.join(tempfile.gettempdir(), "torchx-py-bench-venv")
    py_torchx = os.path.join(venv, "bin", "torchx")
    if not os.path.exists(py_torchx):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "torchx==0.7.0"], check=True)
    work = tempfile.mkdtemp(prefix="torchx-bench-")
    env = dict(os.environ, HOME=work, TORCHX_STATE_DIR=os.path.join(work, "state"))
    env.pop("TORCHXCONFIG", None)
    true_ms = median_ms(["/bin/true"], a.runs, env, work)
    rows = []
    for label, args in [
        ("--help", ["--help"]),
        ("builtins", ["builtins"]),
        ("runopts", ["runopts", "local_cwd"]),
        ("run --dryrun utils.echo", ["run", "--dryrun", "-s", "local_cwd", "utils.echo"]),
        ("run -s local_cwd utils.echo (to exit)", ["run", "-s", "local_cwd", "utils.echo"]),
    ]:
        o = median_ms([ours] + args, a.runs, env, work)
        p = median_ms([py_torchx] + args, a.runs, env, work)
        rows.append((label, o, p))
    py_dry = subprocess.run([os.path.join(venv, "bin", "python"), "-c", PY_DRYRUN], capture_output=True, text=True, cwd=work).stdout.strip()
    our_dry = subprocess.run([os.path.join(target, "release", "examples", "dryrun_bench"), "1000"], capture_output=True, text=True).stdout.strip()
    print(f"Machine: {os.cpu_count()} cores; medians of {a.runs} runs; exec of /bin/true: {true_ms:.2f} ms\n")
    print("| command | ours (ms) | Python TorchX 0.7.0 (ms) | speed-up | ours / `/bin/true` |")
    print("|---|---|---|---|---|")
    for label, o, p in rows:
        print(f"| `{label}` | {o:.2f} | {p:.1f} | {p / o:.0f}× | {o / true_ms:.1f}× |")
    print(f"| in-process dryrun, local_cwd, 1 role × 1000 replicas | {float(our_dry):.2f} | {float(py_dry):.1f} | {float(py_dry) / float(our_dry):.0f}× | – |")
    shutil.rmtree(work, ignore_errors=True)

PY_DRYRUN = r'''
import time, statistics
from torchx.schedulers.local_scheduler import create_scheduler
from torchx import specs
s = create_scheduler("torchx")
role = specs.Role(name="trainer", image="/tmp", entrypoint="python", args=["train.py", "--rank", specs.macros.replica_id, "--id", specs.macros.app_id], num_replicas=1000)
app = specs.AppDef(name="bench", roles=[role])
ts = []
for _ in range(7):
    t = time.perf_counter(); info = s.submit_dryrun(app, {}); str(info); ts.append((time.perf_counter() - t) * 1000)
print(statistics.median(ts))
'''

if __name__ == "__main__":
    main()
