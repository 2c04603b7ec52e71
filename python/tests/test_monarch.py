"""Meta's Monarch 0.7.0 (PyPI ``torchmonarch``, which drives TorchX's ``Runner``) on this
package, as its users install it: ``--no-deps`` (its ``[torchx]`` extra would install
``torchx-nightly`` over ours) after our package, in a venv of its own (scripts/test.sh makes it
when TORCHX_TEST_MONARCH=1 and names its interpreter in TORCHX_TEST_MONARCH_PYTHON). Its wheel
ships its tests; the TorchX-facing ones must all pass: mesh specs, its config, and its
``create``/``info``/``kill`` commands (among them a dry run with a workspace on Slurm, which
relies on TorchX ignoring a workspace Slurm runs in place)."""

import os
import subprocess

import pytest

ENGINES = os.environ.get("TORCHX_TEST_ENGINES", "").split(",")

TORCHX_FACING = ["tests/tools/test_mesh_spec.py", "tests/tools/config", "tests/_src/tools/test_commands.py"]


def test_monarchs_torchx_facing_tests_pass(tmp_path: "os.PathLike[str]") -> None:
    python = os.environ.get("TORCHX_TEST_MONARCH_PYTHON")
    if not python:
        if "monarch" in ENGINES:
            pytest.fail("CI installed Monarch for this run but TORCHX_TEST_MONARCH_PYTHON is unset")
        pytest.skip("no Monarch venv (scripts/test.sh with TORCHX_TEST_MONARCH=1)")
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
