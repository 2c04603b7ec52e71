"""The ``aws_batch`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.aws_batch_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler, typed_opts_getattr


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("aws_batch", session_name, **kwargs)


# The typed run options (TorchX 0.8's ``StructuredOpts`` of this scheduler), made from the core's
# option schema on first use.
__getattr__ = typed_opts_getattr("aws_batch", ("Opts", "AWSBatchOpts"), __name__)
