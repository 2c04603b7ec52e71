"""``torchx.runner``: ``get_runner()`` and the ``Runner``."""

from torchx.runner.api import Runner, get_runner

__all__ = ["Runner", "get_runner"]
