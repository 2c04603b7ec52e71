"""torchx-rs: TorchX's Python API on a Rust core.

The distribution is named ``torchx`` (version ``<TorchX line>+rs.<ours>``): installing it replaces
upstream ``torchx`` in an environment, and requirements on ``torchx`` are met by it.
"""

from __future__ import annotations

import os

__version__ = "0.8.0+rs.0.1.0"

# The image builtin components run by default (TorchX 0.7.0's).
IMAGE: str = "ghcr.io/pytorch/torchx:0.7.0"


def _warn_if_upstream_installed() -> None:
    """Warns when an upstream distribution's files were written over this package: pip keeps
    one `torchx` distribution, but upstream's nightly (`torchx-nightly`) installs the same
    import package under another name. One listing of this package's own directory (not of
    sys.path, nor importlib.metadata's scan): importing torchx stays cheap."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        names = os.listdir(here)
    except OSError:
        return
    for name in names:
        upstream = name.startswith("torchx_nightly-") or (name.startswith("torchx-") and "+rs" not in name)
        if upstream and name.endswith(".dist-info"):
            import warnings

            warnings.warn(
                f"upstream TorchX ({name[: -len('.dist-info')]}) is installed in {here}, over "
                "this package (torchx-rs): both provide the `torchx` import package; uninstall "
                "it and reinstall this one",
                RuntimeWarning,
                stacklevel=3,
            )
            return


_warn_if_upstream_installed()
