#!/usr/bin/env python3
"""Side-by-side timings: this torchx vs Python TorchX 0.7.0 (vs exec of /bin/true and a shell loop).

Usage: python3 bench/compare.py [--runs N] [--venv DIR]
Builds the release binary and examples, installs torchx==0.7.0 into a throwaway venv (unless
--venv points at one that has it), runs every measurement N times (default 7), alternating ours and
theirs so that machine noise hits both alike, and prints medians as Markdown tables.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from timing import medians_ms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MANY_PY = """
import torchx.specs as specs
def many(n: int = 200) -> specs.AppDef:
    role = specs.Role(name="t", image="/tmp", entrypoint="/bin/true", num_replicas=n)
    return specs.AppDef(name="many", roles=[role])
"""

MANY_YAML = """name: many
roles:
- name: t
  image: /tmp
  entrypoint: /bin/true
  num_replicas: 200
"""

SHELL_LOOP = "for i in $(seq 200); do /bin/true & done; wait"


def stdout_of(cmd, env, cwd):
    return subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--venv", default=None)
    a = ap.parse_args()
    build = ["cargo", "build", "--release", "-q"]
    subprocess.run(build + ["-p", "torchx-cli"], cwd=ROOT, check=True)
    subprocess.run(
        build + ["-p", "torchx", "--features", "testing", "--example", "dryrun_bench", "--example", "ledger_fill"],
        cwd=ROOT,
        check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ours = os.path.join(target, "release", "torchx")
    venv = a.venv or os.path.join(tempfile.gettempdir(), "torchx-py-bench-venv")
    py = os.path.join(venv, "bin", "torchx")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "torchx==0.7.0"], check=True)
    work = tempfile.mkdtemp(prefix="torchx-bench-")
    env = dict(os.environ, HOME=work, TORCHX_STATE_DIR=os.path.join(work, "state"))
    env.pop("TORCHXCONFIG", None)
    with open(os.path.join(work, "many.py"), "w") as f:
        f.write(MANY_PY)
    with open(os.path.join(work, "many.yaml"), "w") as f:
        f.write(MANY_YAML)

    true_ms = medians_ms({"true": ["/bin/true"]}, a.runs, env, work)["true"]
    rows = []
    for label, args in [
        ("--help", ["--help"]),
        ("builtins", ["builtins"]),
        ("runopts", ["runopts", "local_cwd"]),
        ("run --dryrun utils.echo", ["run", "--dryrun", "-s", "local_cwd", "utils.echo"]),
        ("run -s local_cwd utils.echo (to exit)", ["run", "-s", "local_cwd", "utils.echo"]),
    ]:
        m = medians_ms({"ours": [ours] + args, "py": [py] + args}, a.runs, env, work)
        rows.append((label, m["ours"], m["py"], ""))

    # status of a finished job, from a new process.
    our_handle = stdout_of([ours, "run", "utils.echo"], env, work).strip()
    py_out = stdout_of([py, "run", "-s", "local_cwd", "utils.echo"], env, work)
    py_handle = next((w for w in py_out.split() if w.startswith("local_cwd://")), "local_cwd://torchx/x")
    status = {"ours": [ours, "status", our_handle], "py": [py, "status", py_handle]}
    m = medians_ms(status, a.runs, env, work, may_fail=("py",))
    rows.append(
        ("status of a finished job", m["ours"], m["py"], "Python: fails, the app is not visible to another process")
    )

    # list with 10,000 jobs in the ledger.
    big = dict(env, TORCHX_STATE_DIR=os.path.join(work, "big"))
    subprocess.run(
        [os.path.join(target, "release", "examples", "ledger_fill"), "10000"],
        env=big,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    m = medians_ms({"ours": [ours, "list"], "py": [py, "list", "-s", "local_cwd"]}, a.runs, big, work, may_fail=("py",))
    rows.append(("list, 10,000 jobs in the ledger", m["ours"], m["py"], "Python: raises, local jobs are not persisted"))

    # 200 replicas of /bin/true, launched to all SUCCEEDED.
    m = medians_ms(
        {
            "ours": [ours, "run", "./many.yaml"],
            "py": [py, "run", "-s", "local_cwd", "./many.py:many"],
            "sh": ["sh", "-c", SHELL_LOOP],
        },
        a.runs,
        env,
        work,
        pause=0.3,
    )
    rows.append(
        (
            "200 replicas of `/bin/true` to all SUCCEEDED",
            m["ours"],
            m["py"],
            f"shell loop: {m['sh']:.1f} ms; ours / shell = {m['ours'] / m['sh']:.2f}×",
        )
    )

    py_dry = subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", PY_DRYRUN], capture_output=True, text=True, cwd=work
    ).stdout.strip()
    our_dry = subprocess.run(
        [os.path.join(target, "release", "examples", "dryrun_bench"), "1000"], capture_output=True, text=True
    ).stdout.strip()
    print(f"Machine: {os.cpu_count()} cores; medians of {a.runs} runs; exec of /bin/true: {true_ms:.2f} ms\n")
    print("| command | ours (ms) | Python TorchX 0.7.0 (ms) | speed-up | ours / `/bin/true` | note |")
    print("|---|---|---|---|---|---|")
    for label, o, p, note in rows:
        print(f"| `{label}` | {o:.2f} | {p:.1f} | {p / o:.0f}× | {o / true_ms:.1f}× | {note} |")
    print(
        f"| in-process dryrun, local_cwd, 1 role × 1000 replicas | {float(our_dry):.2f} | {float(py_dry):.1f} | {float(py_dry) / float(our_dry):.0f}× | – | |"
    )
    shutil.rmtree(work, ignore_errors=True)


PY_DRYRUN = r"""
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
"""

if __name__ == "__main__":
    main()
