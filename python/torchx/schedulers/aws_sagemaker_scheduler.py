"""The ``aws_sagemaker`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.aws_sagemaker_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("aws_sagemaker", session_name, **kwargs)
