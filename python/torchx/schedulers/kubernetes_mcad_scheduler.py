"""The ``kubernetes_mcad`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.kubernetes_mcad_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler, typed_opts_getattr


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("kubernetes_mcad", session_name, **kwargs)


# The typed run options (TorchX 0.8's ``StructuredOpts`` of this scheduler), made from the core's
# option schema on first use.
__getattr__ = typed_opts_getattr("kubernetes_mcad", ("Opts", "KubernetesMCADOpts"), __name__)
