"""``DockerWorkspaceMixin`` (a Python scheduler's container workspace: through the core's Docker
code, or docker-py when a client is given) on the real Docker engine of scripts/docker/up.sh and
the registry of scripts/registry/up.sh: a workspace is built on top of a role's image, the role
points at the new image, and remote jobs push it."""

import os
import subprocess
import uuid
from pathlib import Path

import fsspec
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


def registry() -> str:
    """The open local registry of scripts/registry/up.sh (``TORCHX_TEST_REGISTRY``)."""
    found = os.environ.get("TORCHX_TEST_REGISTRY")
    if not found:
        if "registry" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
            pytest.fail("the registry was started for this run but TORCHX_TEST_REGISTRY is unset")
        pytest.skip("no local registry (scripts/registry/up.sh)")
    return found


def test_the_core_builds_and_pushes_without_docker_py(tmp_path: Path) -> None:
    """No docker-py client given: the core's Docker workspace code builds (from an fsspec
    workspace too), reuses an unchanged image, and pushes to a real registry."""
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    repo = f"{registry()}/native-ws"
    fs = fsspec.filesystem("memory")
    root = f"/native-{uuid.uuid4().hex}"
    content = f"native {uuid.uuid4()}"
    fs.pipe(
        {f"{root}/bar/data.txt": content.encode(), f"{root}/skip.txt": b"x", f"{root}/.dockerignore": b"skip.txt\n"}
    )
    role = specs.Role("main", image="busybox:local", entrypoint="cat", args=["bar/data.txt"])
    mixin = DockerWorkspaceMixin()
    mixin.build_workspace_and_update_role(role, f"memory://{root}", {"quiet": True})
    image = role.image
    assert image.startswith("sha256:")
    try:
        run = subprocess.run(
            ["docker", "run", "--rm", image, "sh", "-c", "cat bar/data.txt; ls"], capture_output=True, text=True
        )
        assert content in run.stdout and "skip.txt" not in run.stdout, run.stderr
        # The same workspace again: the same image, not rebuilt.
        again = specs.Role("main", image="busybox:local")
        mixin.build_workspace_and_update_role(again, f"memory://{root}", {"quiet": True})
        assert again.image == image
        app = specs.AppDef("ws", roles=[role])
        planned = mixin.dryrun_push_images(app, {"image_repo": repo})
        mixin.push_images(planned)
        pushed = app.roles[0].image
        subprocess.run(["docker", "rmi", "-f", pushed], capture_output=True)
        pull = subprocess.run(["docker", "pull", pushed], capture_output=True, text=True)
        assert pull.returncode == 0, pull.stderr
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)


def test_a_failed_core_build_names_the_scheduler(tmp_path: Path) -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    (tmp_path / "Dockerfile.torchx").write_text("ARG IMAGE\nFROM $IMAGE\nRUN exit 3\n")
    role = specs.Role("main", image="busybox:local")
    with pytest.raises(RuntimeError, match="docker.*building the workspace image"):
        DockerWorkspaceMixin().build_workspace_and_update_role(role, str(tmp_path), {"quiet": True})
    assert role.image == "busybox:local"


def test_slurms_docker_workspace_builder_pushes_and_runs_srun_in_the_image(tmp_path: Path) -> None:
    """The nightly's ``workspace_type=docker`` on slurm: the workspace is built into an image,
    pushed to ``image_repo`` (the real local registry), and each replica's ``srun`` runs in it
    (``--container-image``: pyxis on the cluster, which this one has not, so no job is run)."""
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    import json
    import urllib.request

    from torchx.runner import get_runner

    repo = f"{registry()}/slurm-ws-{uuid.uuid4().hex[:8]}"
    (tmp_path / "data.txt").write_text(f"slurm docker {uuid.uuid4()}")
    role = specs.Role(
        "main",
        image="busybox:local",
        entrypoint="cat",
        args=["data.txt"],
        workspace=specs.Workspace({str(tmp_path): ""}),
    )
    cfg = {"workspace_type": "docker", "image_repo": repo, "slurm_version": "24.11"}
    with get_runner() as runner:
        info = runner.dryrun(specs.AppDef("ws", [role]), "slurm", cfg=cfg)
        image = info._app.roles[0].image
        assert image.startswith(f"{repo}:")
        assert f"--container-image={image}" in str(info.request.to_json()["script"])
        built = runner.build_workspace(role, "slurm", cfg)
    assert built == image
    tag = image.rsplit(":", 1)[1]
    registry_host, repository = repo.split("/", 1)
    with urllib.request.urlopen(f"http://{registry_host}/v2/{repository}/tags/list", timeout=30) as answer:
        assert tag in json.load(answer)["tags"]
    with get_runner() as runner:
        default = runner.dryrun(
            specs.AppDef("ws", [specs.Role("main", image=str(tmp_path), entrypoint="true")]), "slurm"
        )
    assert "--container-image" not in str(default.request.to_json()["script"])
