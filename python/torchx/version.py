"""TorchX's ``torchx.version``: the package version and the image builtin components run by
default (``TORCHX_IMAGE``). A ``get_torchx_image`` entry point of group ``torchx.version`` (a
function of the version) names another image, as in TorchX 0.8; without one it is
``torchx.IMAGE``, the published image the CLI's components use too (this project's version is
not an image tag of TorchX's)."""

from torchx import IMAGE, __version__
from torchx.util.entrypoints import load


def _get_torchx_image(torchx_version: str) -> str:
    """TorchX's image of release ``torchx_version``."""
    return f"ghcr.io/pytorch/torchx:{torchx_version}"


TORCHX_IMAGE: str = load("torchx.version", "get_torchx_image", default=lambda _version: IMAGE)(__version__)

__all__ = ["TORCHX_IMAGE", "__version__"]
