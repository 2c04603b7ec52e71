"""torchx-rs: TorchX's Python API on a Rust core.

The distribution is named ``torchx`` (version ``<TorchX line>+rs.<ours>``): installing it replaces
upstream ``torchx`` in an environment, and requirements on ``torchx`` are met by it.
"""

from __future__ import annotations

import os
import sys
import warnings

__version__ = "0.8.0+rs.0.1.0"

# The image builtin components run by default (TorchX 0.7.0's).
IMAGE: str = "ghcr.io/pytorch/torchx:0.7.0"


def _warn_if_upstream_installed() -> None:
    # A directory listing, not importlib.metadata: importing torchx stays cheap.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for entry in sys.path:
        root = entry or os.getcwd()
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            # Upstream's distributions: torchx (without our local label) and torchx-nightly.
            upstream = name.startswith("torchx_nightly-") or (
                name.startswith("torchx-") and "+rs" not in name
            )
            if upstream and name.endswith(".dist-info"):
                warnings.warn(
                    f"upstream TorchX ({name[:-len('.dist-info')]}) is installed in {root} next "
                    f"to torchx-rs (whose `torchx` package is in {here}): both provide the "
                    "`torchx` import package; uninstall one of them",
                    RuntimeWarning,
                    stacklevel=3,
                )
                return


_warn_if_upstream_installed()
