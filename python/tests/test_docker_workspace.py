"""``DockerWorkspaceMixin`` (a Python scheduler's container workspace, through docker-py) on the
real Docker engine of scripts/docker/up.sh: a workspace is built on top of a role's image and the
role points at the new image."""

import subprocess
import uuid
from pathlib import Path

import pytest
from _engines import docker_up

from torchx import specs
from torchx.workspace.docker_workspace import DockerWorkspaceMixin


def test_builds_a_workspace_image_on_the_real_engine(tmp_path: Path) -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    docker = pytest.importorskip("docker")
    content = f"workspace {uuid.uuid4()}"
    (tmp_path / "data.txt").write_text(content)
    (tmp_path / "ignored.txt").write_text("not shipped")
    (tmp_path / ".dockerignore").write_text("ignored.txt\n")
    role = specs.Role("main", image="busybox:local", workspace=specs.Workspace.from_str(str(tmp_path)))
    mixin = DockerWorkspaceMixin(docker_client=docker.from_env())
    mixin.build_workspaces([role], {"quiet": True})
    assert role.image.startswith("sha256:")
    try:
        run = subprocess.run(
            ["docker", "run", "--rm", role.image, "sh", "-c", "cat data.txt; ls"],
            capture_output=True,
            text=True,
        )
        assert content in run.stdout, run.stderr
        assert "ignored.txt" not in run.stdout
        # Remote jobs: the local image is pushed under image_repo (planned here, not pushed).
        app = specs.AppDef("ws", roles=[role])
        planned = mixin.dryrun_push_images(app, {"image_repo": "localhost:5055/ws"})
        assert app.roles[0].image.startswith("localhost:5055/ws:")
        assert list(planned.values())[0][0] == "localhost:5055/ws"
    finally:
        subprocess.run(["docker", "rmi", "-f", role.image], capture_output=True)
