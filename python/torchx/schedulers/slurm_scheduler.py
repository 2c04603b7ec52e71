"""The ``slurm`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.slurm_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("slurm", session_name, **kwargs)
