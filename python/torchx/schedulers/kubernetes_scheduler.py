"""The ``kubernetes`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.kubernetes_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("kubernetes", session_name, **kwargs)
