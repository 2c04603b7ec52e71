"""The installed package is self-contained: the `torchx` command comes with it (the
torchx-rs-cli distribution), and local_cwd jobs started from Python are supervised by it."""

import os
import subprocess
import sys
import sysconfig

from torchx._bin import find_torchx_bin

SCRIPT = """
from torchx.runner import get_runner
runner = get_runner()
handle = runner.run_component("utils.echo", ["--msg", "installed"], "local_cwd")
status = runner.wait(handle, wait_interval=0.05)
print(status.state.name, "".join(runner.log_lines(handle, "echo")).strip())
import os
print("env untouched:", "TORCHX_SUPERVISOR" not in os.environ)
"""


def test_the_torchx_command_is_installed_with_the_package(tmp_path) -> None:
    installed = os.path.join(sysconfig.get_path("scripts"), "torchx")
    assert find_torchx_bin() == installed
    out = subprocess.run([installed, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("torchx ")
    # A fresh process that knows of no other torchx: no TORCHX_SUPERVISOR, a bare PATH.
    env = {
        "HOME": str(tmp_path),
        "TORCHX_STATE_DIR": str(tmp_path / "state"),
        "PATH": "/usr/bin:/bin",
    }
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    # The supervisor path went to the core, not into this process's environment.
    assert run.stdout.strip().splitlines() == ["SUCCEEDED installed", "env untouched: True"]
