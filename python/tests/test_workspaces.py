"""Workspaces through TorchX's Python API on the builtin schedulers: ``dryrun`` plans role[0]'s
image (building nothing), ``run`` builds it on the real Docker engine."""

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from _engines import docker_up, slurm_up
from torchx import specs
from torchx.runner import get_runner

_SMALL = specs.Resource(cpu=1, gpu=0, memMB=256)


def _app(image: str = "busybox:local") -> specs.AppDef:
    return specs.AppDef(
        name="ws",
        roles=[
            specs.Role(name="main", image=image, entrypoint="cat", args=["data.txt"], resource=_SMALL),
            specs.Role(name="side", image=image, entrypoint="true", resource=_SMALL),
        ],
    )


def _workspace(tmp_path: Path, content: str) -> str:
    ws = tmp_path / "proj"
    ws.mkdir(exist_ok=True)
    (ws / "data.txt").write_text(content)
    return str(ws)


def test_dryrun_plans_role0_image_and_builds_nothing(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "planned")
    app = _app()
    with get_runner() as runner:
        info = runner.dryrun(app, "local_docker", workspace=ws)
    main, side = info._app.roles
    assert main.image.startswith("torchx-workspace:") and main.workspace is None
    assert side.image == "busybox:local", "the workspace is role[0]'s, as TorchX's"
    assert main.image in str(info)


def test_pushing_schedulers_need_image_repo(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "pushed")
    with get_runner() as runner:
        with pytest.raises(ValueError, match="set the run option image_repo"):
            runner.dryrun(_app(), "kubernetes", workspace=ws)
        info = runner.dryrun(_app(), "kubernetes", cfg={"image_repo": "127.0.0.1:5055/team/app"}, workspace=ws)
    assert info._app.roles[0].image.startswith("127.0.0.1:5055/team/app:")


def test_local_cwd_ignores_another_directory_with_a_warning_as_torchx(tmp_path: Path) -> None:
    # TorchX ignores it, and clients (Monarch) rely on that; the CLI refuses it (tests/cli.rs).
    app = specs.AppDef(name="ws", roles=[specs.Role(name="m", image="", entrypoint="true")])
    with get_runner() as runner:
        runner.dryrun(app, "local_cwd", workspace=os.getcwd())
        with pytest.warns(UserWarning, match=r"local_cwd: the workspace `.*` of role `m` is ignored"):
            runner.dryrun(app, "local_cwd", workspace=str(tmp_path))


def test_builtin_submit_takes_a_workspace_as_the_runner_does(tmp_path: Path) -> None:
    from torchx.schedulers.local_scheduler import create_scheduler

    ws = specs.Workspace({str(tmp_path): ""})
    app = specs.AppDef(name="ws", roles=[specs.Role(name="m", image="", entrypoint="true", workspace=ws)])
    with pytest.warns(UserWarning, match="is ignored"):
        create_scheduler("test").submit_dryrun(app, {})
    assert app.roles[0].workspace == ws  # the caller's app is left as it was


def test_slurm_snapshots_the_workspace_at_dryrun_as_torchx_copies_it(tmp_path: Path) -> None:
    if not slurm_up():
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("from the dry run\n")
    app = specs.AppDef(name="ws", roles=[specs.Role(name="m", image="", entrypoint="cat", args=["hello.txt"])])
    with get_runner() as runner:
        info = runner.dryrun(app, "slurm", cfg={"job_dir": str(tmp_path / "job")}, workspace=str(ws))
        import shutil

        shutil.rmtree(ws)  # as Monarch removes its temporary workspace before scheduling
        handle = runner.schedule(info)
        status = runner.wait(handle, wait_interval=0.2)
        assert status is not None and status.state == specs.AppState.SUCCEEDED, status
        from torchx.schedulers.api import Stream

        assert "".join(runner.log_lines(handle, "m", streams=Stream.STDOUT)).strip() == "from the dry run"


def test_run_builds_the_workspace_on_the_real_engine(tmp_path: Path) -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    content = f"from the workspace {uuid.uuid4()}"
    ws = _workspace(tmp_path, content)
    with get_runner() as runner:
        info = runner.dryrun(_app(), "local_docker", workspace=ws)
        image = info._app.roles[0].image
        try:
            handle = runner.schedule(info)
            status = runner.wait(handle, wait_interval=0.2)
            assert status is not None and status.state == specs.AppState.SUCCEEDED, status
            lines = list(runner.log_lines(handle, "main", 0))
            runner.delete(handle)
        finally:
            # The image holds this run's unique content: nobody else uses it.
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
    assert any(content in line for line in lines), lines


def test_env_keeps_the_users_order_in_the_request() -> None:
    """Kubernetes expands ``$(VAR)`` only from variables listed before: the order is the user's."""
    role = specs.Role(
        name="r",
        image="img",
        entrypoint="sh",
        env={"B": "value-of-b", "A": "$(B)/y", "Z": "last-one"},
        resource=_SMALL,
    )
    with get_runner() as runner:
        info = runner.dryrun(specs.AppDef(name="order", roles=[role]), "kubernetes")
    text = str(info)
    assert text.index("value-of-b") < text.index("$(B)/y") < text.index("last-one"), text
