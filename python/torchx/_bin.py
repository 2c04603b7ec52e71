"""Finds the ``torchx`` executable that belongs with this package."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import Optional


def find_torchx_bin() -> Optional[str]:
    """The ``torchx`` command of this Python environment (its scripts directory, or beside
    its interpreter), else the first on PATH; ``None`` if there is none."""
    candidates = [
        os.path.join(sysconfig.get_path("scripts"), "torchx"),
        os.path.join(os.path.dirname(sys.executable), "torchx"),
    ]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which("torchx")
