#!/usr/bin/env python3
"""A Python scheduler plugin of TorchX 0.8's shape (examples/namespace-plugin: `my_backend`
registered with `@register.scheduler()` in `torchx_plugins.schedulers`) from the CLI, side by
side with Python TorchX's own CLI.

    python3 bench/plugin_scheduler.py --ours /path/to/venv --theirs /path/to/venv [--runs 15]

`--ours`: a venv with this project's package and the example (scripts/test.sh's `.venv-test`);
`--theirs`: a venv with upstream `torchx-nightly` (the 0.8 line) and the example. Reports medians
of wall time for `torchx run --dryrun -s <plugin> utils.echo --msg hi` and
`torchx runopts <plugin>`, ours both with a warm plugin host (the default: the command forks
its host from the interpreter an earlier command left) and cold (`TORCHX_PLUGIN_HOST_IDLE=0`:
every command starts its interpreter, as the first command after an idle period does), and how
many Python interpreters our dry run started (strace).
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
        subprocess.run(
            ["strace", "-f", "-qq", "-e", "trace=execve", "-o", log.name, *cmd],
            env=env,
            capture_output=True,
            check=True,
        )
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
        # A private directory for the warm hosts of this run (none left from earlier runs).
        runtime = os.path.join(state, "run")
        os.mkdir(runtime, 0o700)
        ours_env["XDG_RUNTIME_DIR"] = runtime
        cold_env = {**ours_env, "TORCHX_PLUGIN_HOST_IDLE": "0"}
        for name, args in commands("my_backend").items():
            theirs = median_ms([f"{a.theirs}/bin/torchx", *theirs_cmds[name]], env, a.runs)
            for how, how_env in (("warm", ours_env), ("cold", cold_env)):
                ours = median_ms([f"{a.ours}/bin/torchx", *args], how_env, a.runs)
                print(f"{name:40s} ours ({how}) {ours:5.0f} ms   TorchX {theirs:5.0f} ms   {theirs / ours:4.1f}x")
        dryrun = commands("my_backend")["run --dryrun -s <plugin> utils.echo"]
        for how, how_env in (("warm", ours_env), ("cold", cold_env)):
            started = interpreters([f"{a.ours}/bin/torchx", *dryrun], how_env)
            print(f"Python interpreters our dry run started ({how}): {started}")


if __name__ == "__main__":
    main()
