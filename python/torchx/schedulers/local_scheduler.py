"""The ``local_cwd`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.local_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("local_cwd", session_name, **kwargs)
