#!/usr/bin/env python3
"""The Python front against Python TorchX 0.7.0, side by side in one run.

    python3 bench/python_front.py [--ours-venv .venv-test] [--runs 15]

Needs a venv with this project's package (`scripts/test.sh` makes `.venv-test`) and installs
`torchx==0.7.0` into a throwaway venv (the same one `bench/compare.py` uses). Reports medians
of wall time for: `python -c pass`, `python -c 'import torchx.specs'`, and a script doing
`get_runner().dryrun_component("dist.ddp", ["--script", "t.py", "-j", "2x2"],
scheduler="slurm", cfg={"partition": "x"})` (ours pins `slurm_version`, which TorchX lacks,
so neither asks a cluster); and the `torchx` command: `torchx run --dryrun -s local_cwd` of a
Python component file (`./comp.py:greet`), of the builtin `utils.echo`, the same on the Python
scheduler plugin `example_subprocess` (examples/python-plugin, installed into both venvs), and
`torchx --help`.
"""

import argparse
import os
import subprocess
import sys
import tempfile

from timing import medians_ms

DRYRUN = """
from torchx.runner import get_runner
cfg = {{"partition": "x"{extra}}}
info = get_runner().dryrun_component(
    "dist.ddp", ["--script", "t.py", "-j", "2x2"], scheduler="slurm", cfg=cfg)
assert "#SBATCH" in repr(info) or "sbatch" in repr(info), repr(info)[:200]
"""


STDLIB_FLOOR = "copy, dataclasses, enum, re, threading, typing"


COMPONENT = '''
import torchx.specs as specs


def greet(user: str = "world") -> specs.AppDef:
    """Greets someone.

    Args:
        user: who to greet
    """
    return specs.AppDef(
        name="greet",
        roles=[specs.Role(name="greeter", image="/tmp", entrypoint="echo", args=["hello", user])],
    )
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours-venv", default=".venv-test")
    ap.add_argument("--torchx-venv", default=os.path.join(tempfile.gettempdir(), "torchx-py-bench-venv"))
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.torchx_venv, "bin", "torchx")):
        subprocess.run([sys.executable, "-m", "venv", a.torchx_venv], check=True)
        pip = os.path.join(a.torchx_venv, "bin", "pip")
        subprocess.run([pip, "install", "-q", "torchx==0.7.0"], check=True)
    ours = os.path.join(os.path.abspath(a.ours_venv), "bin", "python")
    theirs = os.path.join(a.torchx_venv, "bin", "python")
    tmp = tempfile.mkdtemp()
    # A `sinfo` that fails at once, as on a machine without Slurm: TorchX asks it during the
    # dry run and would otherwise wait on whatever controller this machine has.
    fake = os.path.join(tmp, "bin")
    os.makedirs(fake)
    with open(os.path.join(fake, "sinfo"), "w") as f:
        f.write("#!/bin/sh\nexit 1\n")
    os.chmod(os.path.join(fake, "sinfo"), 0o755)
    env = dict(os.environ, HOME=tmp, TORCHX_STATE_DIR=os.path.join(tmp, "state"), PATH=f"{fake}:{os.environ['PATH']}")
    env.pop("TORCHXCONFIG", None)
    rows = [
        ("`python -c pass`", ["-c", "pass"], ["-c", "pass"]),
        # The standard library `torchx.specs` stands on (what TorchX's needs too): the floor.
        (f"`python -c 'import {STDLIB_FLOOR}'`", ["-c", f"import {STDLIB_FLOOR}"], ["-c", f"import {STDLIB_FLOOR}"]),
        ("`python -c 'import torchx.specs'`", ["-c", "import torchx.specs"], ["-c", "import torchx.specs"]),
        (
            "`get_runner().dryrun_component('dist.ddp', ..., scheduler='slurm')` script",
            ["-c", DRYRUN.format(extra=', "slurm_version": "24.11"')],
            ["-c", DRYRUN.format(extra="")],
        ),
    ]
    with open(os.path.join(tmp, "comp.py"), "w") as f:
        f.write(COMPONENT)
    ours_cli = os.path.join(os.path.dirname(ours), "torchx")
    theirs_cli = os.path.join(os.path.dirname(theirs), "torchx")
    dryrun = ["run", "--dryrun", "-s", "local_cwd"]
    commands = [
        (
            "`torchx run --dryrun -s local_cwd ./comp.py:greet` (a Python component file)",
            [ours_cli, *dryrun, "./comp.py:greet"],
            [theirs_cli, *dryrun, "./comp.py:greet"],
        ),
        (
            "`torchx run --dryrun -s local_cwd utils.echo --msg hi` (a builtin)",
            [ours_cli, *dryrun, "utils.echo", "--msg", "hi"],
            [theirs_cli, *dryrun, "utils.echo", "--msg", "hi"],
        ),
        ("`torchx --help`", [ours_cli, "--help"], [theirs_cli, "--help"]),
    ]
    plugin_row = (
        "`torchx run --dryrun -s example_subprocess example.hello` (a Python scheduler plugin and a plugin component)",
        [ours_cli, "run", "--dryrun", "-s", "example_subprocess", "example.hello"],
        [theirs_cli, "run", "--dryrun", "-s", "example_subprocess", "example.hello"],
    )
    # The example plugin registers components too, which in TorchX hides its builtins: it is
    # installed for the last row only (and each venv is left as it was: scripts/test.sh
    # installs it into ours).
    plugin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python-plugin")
    venvs = (os.path.dirname(os.path.dirname(ours)), a.torchx_venv)
    had_plugin = [_installed(venv, "torchx-example-plugin") for venv in venvs]
    for venv, had in zip(venvs, had_plugin, strict=True):
        if had:
            _pip(venv, "uninstall", "-q", "-y", "torchx-example-plugin")
    print("| what | ours (ms) | Python TorchX 0.7.0 (ms) | speed-up |")
    print("|---|---|---|---|")
    table = [(what, [ours, *o], [theirs, *t]) for what, o, t in rows] + commands
    cmds = {(what, side): cmd for what, o, t in table for side, cmd in (("ours", o), ("theirs", t))}
    measured = medians_ms(cmds, a.runs, env, tmp)
    for what, _, _ in table:
        o, t = measured[what, "ours"], measured[what, "theirs"]
        print(f"| {what} | {o:.1f} | {t:.1f} | {t / o:.1f}× |")
    for venv in venvs:
        _pip(venv, "install", "-q", "--no-deps", plugin)
    try:
        what, our_cmd, their_cmd = plugin_row
        measured = medians_ms({"ours": our_cmd, "theirs": their_cmd}, a.runs, env, tmp)
        o, t = measured["ours"], measured["theirs"]
        print(f"| {what} | {o:.1f} | {t:.1f} | {t / o:.1f}× |")
    finally:
        for venv, had in zip(venvs, had_plugin, strict=True):
            if not had:
                _pip(venv, "uninstall", "-q", "-y", "torchx-example-plugin")


def _pip(venv, *args):
    subprocess.run([os.path.join(venv, "bin", "pip"), *args], check=True)


def _installed(venv, dist):
    shown = subprocess.run([os.path.join(venv, "bin", "pip"), "show", "-q", dist], capture_output=True)
    return shown.returncode == 0


if __name__ == "__main__":
    main()
