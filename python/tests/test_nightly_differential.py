"""The same calls of the nightly's API (``nightly_probe.py``) against ``torchx-nightly==2026.10.26``
in its own venv (``$TORCHX_NIGHTLY_PYTHON``; ``scripts/test.sh`` makes it when
``TORCHX_TEST_NIGHTLY=1``, as CI does) and against this package give the same values."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict

import pytest

PROBE = pathlib.Path(__file__).with_name("nightly_probe.py")


def _probe(python: str, tmp_path: pathlib.Path, env: Dict[str, str]) -> Dict[str, Any]:
    out = subprocess.run([python, str(PROBE)], capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    result: Dict[str, Any] = json.loads(out.stdout)
    return result


def test_the_nightly_and_this_package_answer_the_same(tmp_path: pathlib.Path) -> None:
    nightly = os.environ.get("TORCHX_NIGHTLY_PYTHON")
    if not nightly:
        if os.environ.get("TORCHX_TEST_NIGHTLY") == "1":
            pytest.fail("TORCHX_TEST_NIGHTLY=1 but no TORCHX_NIGHTLY_PYTHON: the nightly's venv is missing")
        pytest.skip("no TORCHX_NIGHTLY_PYTHON (a venv with torchx-nightly==2026.10.26)")
    # Each interpreter finds its own `torchx` beside it (and its own package, not PYTHONPATH's).
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TORCHX_BIN")}
    theirs = _probe(nightly, tmp_path, clean)
    ours = _probe(sys.executable, tmp_path, dict(os.environ))
    assert theirs.keys() == ours.keys()
    differ = {k: {"nightly": theirs[k], "ours": ours[k]} for k in theirs if theirs[k] != ours[k]}
    assert not differ, json.dumps(differ, indent=1)
