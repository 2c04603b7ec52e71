"""TorchX's ``torchx.version``: the package version and the image builtin components run by
default (``TORCHX_IMAGE``, TorchX 0.7.0's; the CLI's components use the same)."""

from torchx import IMAGE, __version__

TORCHX_IMAGE: str = IMAGE

__all__ = ["TORCHX_IMAGE", "__version__"]
