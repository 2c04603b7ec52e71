"""Results of jobs (metrics of HPO trials) kept on any fsspec filesystem, as TorchX's
``torchx.runtime.tracking``."""

from torchx.runtime.tracking.api import FsspecResultTracker, ResultTracker

__all__ = ["FsspecResultTracker", "ResultTracker"]
