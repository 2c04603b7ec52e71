#!/usr/bin/env python3
"""A Python scheduler plugin of TorchX 0.8's shape (examples/namespace-plugin: `my_backend`
registered with `@register.scheduler()` in `torchx_plugins.schedulers`) from the CLI, side by
side with Python TorchX's own CLI.

    python3 bench/plugin_scheduler.py --ours /path/to/venv --theirs /path/to/venv [--runs 15]

`--ours`: a venv with this project's package and the example (scripts/test.sh's `.venv-test`);
`--theirs`: a venv with upstream `torchx-nightly` (the 0.8 line) and the example. Reports medians
of wall time for `torchx run --dryrun -s <plugin> utils.echo --msg hi` and
`torchx runopts <plugin>`, and how many Python interpreters our dry run started (strace).
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

# Upstream names the skeleton's `create_scheduler` factory `create_scheduler`; we name it after
# its module (`my_backend`): the same plugin code on both sides.
def commands(name):
    return {
        "run --dryrun -s <plugin> utils.echo": ["run", "--dryrun", "-s", name, "utils.echo", "--msg", "hi"],
        "runopts <plugin>": ["runopts", name],
    }


def median_ms(cmd, env, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{cmd} failed: {done.stderr[-500:]}")
    return 1000 * statistics.median(times)


def interpreters(cmd, env):
    """Python processes started by `cmd` (its execve calls of the venv's python)."""
    with tempfile.NamedTemporaryFile(mode="r") as log:
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", log.name, *cmd],
                       env=env, capture_output=True, check=True)
        return sum(1 for line in log if "execve(" in line and "python" in line.split(",")[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ours", required=True)
    p.add_argument("--theirs", required=True)
    p.add_argument("--runs", type=int, default=15)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "TORCHX_STATE_DIR": state, "TORCHX_MY_BACKEND_DIR": state}
        ours_env = {**env, "TORCHX_PYTHON": f"{a.ours}/bin/python"}
        theirs_cmds = commands("create_scheduler")
        for name, args in commands("my_backend").items():
            ours = median_ms([f"{a.ours}/bin/torchx", *args], ours_env, a.runs)
            theirs = median_ms([f"{a.theirs}/bin/torchx", *theirs_cmds[name]], env, a.runs)
            print(f"{name:45s} ours {ours:6.0f} ms   TorchX {theirs:6.0f} ms   {theirs / ours:4.1f}x")
        dryrun = commands("my_backend")["run --dryrun -s <plugin> utils.echo"]
        started = interpreters([f"{a.ours}/bin/torchx", *dryrun], ours_env)
        print(f"Python interpreters our dry run started: {started}")


if __name__ == "__main__":
    main()
