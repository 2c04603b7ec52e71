"""One isolated state directory for the whole session (the core's schedulers are created once
per process), and the `torchx` binary: $TORCHX_BIN (scripts/test.sh sets it), else the one
installed with the package."""

import os
import shutil
import tempfile

import pytest

_STATE = tempfile.mkdtemp(prefix="torchx-py-state-")
os.environ["TORCHX_STATE_DIR"] = _STATE
os.environ.pop("TORCHXCONFIG", None)


def _torchx_bin() -> str:
    found = os.environ.get("TORCHX_BIN") or shutil.which("torchx")
    if not found:
        raise RuntimeError("no torchx binary: set TORCHX_BIN (scripts/test.sh does) or put torchx on PATH")
    return found


os.environ.setdefault("TORCHX_SUPERVISOR", _torchx_bin())


@pytest.fixture(scope="session")
def torchx_bin() -> str:
    return _torchx_bin()


@pytest.fixture(scope="session")
def state_dir() -> str:
    return _STATE
