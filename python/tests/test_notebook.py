"""``torchx.notebook``: the ``%%workspacefile`` cell magic in a real IPython shell, and the
notebook's in-memory workspace run on the real Docker engine (the core's schedulers read fsspec
workspaces from a local copy)."""

import uuid

import fsspec
import pytest
from _engines import docker_up

pytest.importorskip("IPython")
from IPython.testing.globalipapp import get_ipython as start_ipython  # noqa: E402
from torchx.runner import get_runner  # noqa: E402


def get_ipython():  # type: ignore[no-untyped-def]
    """The test shell (started once per process: later calls of IPython's helper give None)."""
    import IPython

    return IPython.get_ipython() or start_ipython()


def test_workspacefile_writes_the_cell_into_the_workspace(capsys: pytest.CaptureFixture[str]) -> None:
    ip = get_ipython()
    from torchx.notebook import get_workspace

    ip.run_cell_magic("workspacefile", "pkg/train.py", "print('hi')\n")
    assert capsys.readouterr().out == "Added pkg/train.py to workspace memory://torchx-workspace/\n"
    fs, root = fsspec.core.url_to_fs(get_workspace())
    with fs.open(f"{root}/pkg/train.py", "rt") as f:
        assert f.read() == "print('hi')\n"


def test_the_notebook_workspace_runs_on_local_docker() -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    ip = get_ipython()
    from torchx.notebook import get_workspace

    marker = f"from the notebook {uuid.uuid4()}"
    ip.run_cell_magic("workspacefile", "hello.txt", marker)
    with get_runner() as runner:
        handle = runner.run_component(
            "utils.sh",
            ["--image", "busybox:local", "cat", "hello.txt"],
            scheduler="local_docker",
            workspace=get_workspace(),
        )
        status = runner.wait(handle, wait_interval=0.2)
        assert status is not None and status.state.name == "SUCCEEDED", status
        assert marker in "".join(runner.log_lines(handle, "sh", 0))
