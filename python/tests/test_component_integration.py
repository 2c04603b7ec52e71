"""TorchX's component integration test on local_cwd, as its
``scripts/component_integration_tests.py --scheduler local_cwd`` runs it: every provider of
``torchx.components.integration_tests.component_provider`` (dist.ddp of the compute-world-size
example with 2x2 real PyTorch processes, utils.booth, utils.sh, utils.touch, utils.copy)
submitted, waited for and logged by ``IntegComponentTest``. The jobs run the interpreter of this
test (its directory first on PATH, as in an activated venv)."""

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

if "torch" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
    import torch  # noqa: F401  (CI installed it: a missing PyTorch is a failure)
else:
    pytest.importorskip("torch")

import torchx.components.integration_tests.component_provider as component_provider
from torchx.components.integration_tests.integ_tests import IntegComponentTest
from torchx.specs import AppDef


@pytest.fixture(autouse=True)
def venv_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)


def test_every_builtin_component_succeeds_on_local_cwd(capsys: pytest.CaptureFixture[str]) -> None:
    IntegComponentTest().run_components(module=component_provider, image=os.getcwd(), scheduler="local_cwd", cfg={})
    out = capsys.readouterr().out
    assert out.count("=== BEGIN LOG local_cwd://test-runner/") == 5
    # The four ranks of dist.ddp all-reduced to the world size.
    assert out.count("computed world_size: 4") == 4


def test_a_failing_component_fails_the_run() -> None:
    failing = ModuleType("failing_providers")

    class Fails(component_provider.ComponentProvider):
        def get_app_def(self) -> AppDef:
            from torchx.components.utils import sh

            return sh("false", image=self._image)

    failing.Fails = Fails  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match="1/1 test jobs failed"):
        IntegComponentTest().run_components(module=failing, image=os.getcwd(), scheduler="local_cwd", cfg={})


def test_dryrun_submits_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    IntegComponentTest().run_components(
        module=component_provider, image=os.getcwd(), scheduler="local_cwd", cfg={}, dryrun=True
    )
    assert "=== BEGIN LOG" not in capsys.readouterr().out
