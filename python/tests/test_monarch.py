"""Meta's Monarch 0.7.0 (PyPI ``torchmonarch``, which drives TorchX's ``Runner``) on this
package, as its users install it: ``--no-deps`` (its ``[torchx]`` extra would install
``torchx-nightly`` over ours) after our package, in a venv of its own (scripts/test.sh makes it
when TORCHX_TEST_MONARCH=1 and names its interpreter in TORCHX_TEST_MONARCH_PYTHON). Its wheel
ships its tests; the TorchX-facing ones must all pass: mesh specs, its config, and its
``create``/``info``/``kill`` commands (among them a dry run with a workspace on Slurm, which
relies on TorchX ignoring a workspace Slurm runs in place), and its ``create`` of a server with a
workspace and ``job_dir`` on the real Slurm cluster."""

import json
import os
import pathlib
import subprocess
import textwrap

import pytest

ENGINES = os.environ.get("TORCHX_TEST_ENGINES", "").split(",")

TORCHX_FACING = ["tests/tools/test_mesh_spec.py", "tests/tools/config", "tests/_src/tools/test_commands.py"]


def _monarch_python() -> str:
    python = os.environ.get("TORCHX_TEST_MONARCH_PYTHON")
    if not python:
        if "monarch" in ENGINES:
            pytest.fail("CI installed Monarch for this run but TORCHX_TEST_MONARCH_PYTHON is unset")
        pytest.skip("no Monarch venv (scripts/test.sh with TORCHX_TEST_MONARCH=1)")
    return python


def test_monarchs_torchx_facing_tests_pass(tmp_path: "os.PathLike[str]") -> None:
    python = _monarch_python()
    # The wheel installs its tests as a top-level `tests` package beside `monarch`.
    site = subprocess.run(
        [python, "-c", "import monarch, os; print(os.path.dirname(os.path.dirname(monarch.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = subprocess.run(
        [python, "-c", "import torchx, torchx._rs; print(torchx.__file__)"], capture_output=True, text=True, check=True
    ).stdout
    assert "torchx-nightly" not in ours and os.path.isfile(os.path.join(site, "tests", "tools", "test_mesh_spec.py"))
    out = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TORCHX_FACING],
        capture_output=True,
        text=True,
        cwd=site,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "failed" not in out.stdout, out.stdout[-2000:]


# Run by Monarch's interpreter: its `create` merges the workspace into a temporary directory,
# dry-runs, deletes that directory, then schedules; the job must still see the workspace.
CREATE_ON_SLURM = textwrap.dedent("""
    import asyncio, json, pathlib, sys, time
    from datetime import timedelta

    from monarch.tools import commands
    from monarch.tools.config import Config, Workspace
    from torchx.specs import AppDef, Role

    root = pathlib.Path(sys.argv[1])
    ws = root / "ws"
    ws.mkdir()
    (ws / "marker.txt").write_text("from the workspace\\n")
    job_dir = root / "job"
    role = Role("mesh", image=str(root), entrypoint="sh", args=["-c", "cat ws/marker.txt > seen.txt; sleep 300"])
    config = Config(
        scheduler="slurm",
        scheduler_args={"job_dir": str(job_dir)},
        workspace=Workspace(dirs=[ws], env=None),
        appdef=AppDef("monarch-ws", [role]),
    )
    handle = commands.create(config, name="monarch-ws")
    ready = asyncio.run(commands.server_ready(handle, check_interval=timedelta(seconds=0.5)))
    spec = commands.info(handle)
    seen = job_dir / "seen.txt"
    for _ in range(60):
        if seen.exists() and seen.read_text():
            break
        time.sleep(0.5)
    commands.kill(handle)
    for _ in range(120):
        after = commands.info(handle)
        if after is None or after.state.name in ("CANCELLED", "FAILED", "SUCCEEDED"):
            break
        time.sleep(0.5)
    print(json.dumps({
        "ready": ready.state.name if ready else None,
        "info": [spec.state.name, [m.name for m in spec.meshes], len(spec.meshes[0].hostnames)] if spec else None,
        "seen": seen.read_text() if seen.exists() else None,
        "after_kill": after.state.name if after else None,
    }))
""")


def test_monarch_creates_a_server_with_a_workspace_and_job_dir_on_slurm(tmp_path: pathlib.Path) -> None:
    from _engines import slurm_up

    python = _monarch_python()
    if not slurm_up():
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
    script = tmp_path / "create.py"
    script.write_text(CREATE_ON_SLURM)
    out = subprocess.run(
        [python, str(script), str(tmp_path)], capture_output=True, text=True, cwd=str(tmp_path), timeout=300
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "ready": "RUNNING",
        "info": ["RUNNING", ["mesh"], 1],
        "seen": "from the workspace\n",
        "after_kill": "CANCELLED",
    }, seen
