"""The ``local_cwd`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.local_scheduler``."""

from typing import Any, List, Optional

from torchx.schedulers._rust import RustScheduler


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: Optional[List[str]] = None,
    **kwargs: Any,
) -> RustScheduler:
    """``local_cwd``: replicas are processes in the current directory. ``cache_size`` is
    accepted for TorchX compatibility (jobs are kept in the ledger, not in memory) and must be
    positive, as in TorchX."""
    if cache_size <= 0:
        raise ValueError(f"cache size must be greater than zero, got {cache_size}")
    if extra_paths:
        raise NotImplementedError(
            "local_cwd: extra_paths is not supported by this torchx; put the directories on"
            " PATH in the role's env instead"
        )
    return RustScheduler("local_cwd", session_name, **kwargs)
