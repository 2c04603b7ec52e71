"""The ``local_docker`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.docker_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("local_docker", session_name, **kwargs)
