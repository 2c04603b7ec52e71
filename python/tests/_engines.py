"""Whether the real engines the tests use are here (scripts/*/up.sh start them; CI lists the
ones it started in TORCHX_TEST_ENGINES, and a promised engine that is missing fails the test)."""

import os
import subprocess

import pytest


def docker_up() -> bool:
    """The local Docker engine with its busybox:local image (scripts/docker/up.sh)."""
    up = (
        subprocess.run(["docker", "image", "inspect", "busybox:local"], capture_output=True).returncode
        == 0
    )
    if not up and "docker" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
        pytest.fail("the Docker engine was started for this run but is missing")
    return up


def slurm_up() -> bool:
    """The local Slurm cluster (scripts/slurm/up.sh)."""
    try:
        up = subprocess.run(["sinfo", "--noheader"], capture_output=True).stdout.strip() != b""
    except FileNotFoundError:
        up = False
    if not up and "slurm" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
        pytest.fail("the Slurm cluster was started for this run but is missing")
    return up
