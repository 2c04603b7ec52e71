"""The example plugin package (examples/python-plugin, pip-installed by scripts/test.sh): each
of its five entry-point groups through the native `torchx` binary, end to end."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

pytest.importorskip("torchx_example_plugin", reason="pip install ./examples/python-plugin (scripts/test.sh does)")


def _torchx(
    torchx_bin: str, cwd: Path, *args: str, env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess:
    full = {**os.environ, "TORCHX_PYTHON": sys.executable, **(env or {})}
    return subprocess.run([torchx_bin, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHX_EXAMPLE_DIR", str(tmp_path / "example-jobs"))
    return tmp_path


def test_component_runs_on_local_cwd(torchx_bin: str, here: Path) -> None:
    listed = _torchx(torchx_bin, here, "builtins")
    assert "example.hello" in listed.stdout, listed.stderr
    done = _torchx(
        torchx_bin,
        here,
        "run",
        "--wait",
        "--log",
        "-s",
        "local_cwd",
        "example.hello",
        "--who",
        "plugins",
        "--times",
        "2",
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).count("hello plugins") == 2, done.stdout  # --log streams to stderr


def test_scheduler_runs_jobs_end_to_end(torchx_bin: str, here: Path) -> None:
    opts = _torchx(torchx_bin, here, "runopts", "example_subprocess")
    assert "nice=NICE (int, 0)" in opts.stdout, opts.stderr
    dry = _torchx(
        torchx_bin, here, "run", "--dryrun", "-s", "example_subprocess", "-cfg", "nice=5", "utils.echo", "--msg", "hi"
    )
    assert dry.returncode == 0 and "nice -n 5 echo hi" in dry.stdout, dry.stderr
    assert not (here / "example-jobs").exists()  # a dry run submits nothing
    run = _torchx(torchx_bin, here, "run", "-s", "example_subprocess", "utils.sh", "echo", "from the plugin")
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[-1]
    assert handle.startswith("example_subprocess://torchx/sh-")
    for _ in range(100):
        status = _torchx(torchx_bin, here, "status", handle)
        if "SUCCEEDED" in status.stdout:
            break
        time.sleep(0.1)
    assert "SUCCEEDED" in status.stdout, status.stdout + status.stderr
    log = _torchx(torchx_bin, here, "log", f"{handle}/sh/0")
    assert "from the plugin" in log.stdout, log.stderr
    assert handle.split("/")[-1] in _torchx(torchx_bin, here, "list", "-s", "example_subprocess").stdout
    sleeper = (
        _torchx(torchx_bin, here, "run", "-s", "example_subprocess", "utils.sh", "sleep", "60")
        .stdout.strip()
        .splitlines()[-1]
    )
    assert _torchx(torchx_bin, here, "cancel", sleeper).returncode == 0
    assert "CANCELLED" in _torchx(torchx_bin, here, "status", sleeper).stdout
    assert _torchx(torchx_bin, here, "delete", sleeper).returncode == 0
    assert _torchx(torchx_bin, here, "status", sleeper).returncode == 4
    bad = _torchx(torchx_bin, here, "run", "--dryrun", "-s", "example_subprocess", "-cfg", "nice=99", "utils.echo")
    assert bad.returncode != 0 and "nice must be 0-19" in bad.stderr


def test_named_resource_tracker_and_subcommand(torchx_bin: str, here: Path) -> None:
    dry = _torchx(
        torchx_bin,
        here,
        "run",
        "--dryrun",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "dist.ddp",
        "--script",
        "t.py",
        "-h",
        "example_gpu_x2",
    )
    assert dry.returncode == 0 and "nvidia.com/gpu: '2'" in dry.stdout, dry.stderr
    env = {"TORCHX_TRACKER_EXAMPLE_JSONL_CONFIG": str(here / "runs.jsonl"), "TORCHX_JOB_ID": "local_cwd://torchx/job-1"}
    added = _torchx(torchx_bin, here, "tracker", "--tracker", "example_jsonl", "add", "metadata", "loss=0.25", env=env)
    assert added.returncode == 0, added.stderr
    md = _torchx(
        torchx_bin,
        here,
        "tracker",
        "--tracker",
        "example_jsonl",
        "list",
        "metadata",
        "--json",
        "local_cwd://torchx/job-1",
        env=env,
    )
    assert json.loads(md.stdout) == {"loss": 0.25}, md.stderr
    hello = _torchx(torchx_bin, here, "example_hello", "--shout", "you")
    assert hello.returncode == 0 and hello.stdout.strip() == "HELLO YOU", hello.stderr
