"""The ``lsf`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.lsf_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("lsf", session_name, **kwargs)
