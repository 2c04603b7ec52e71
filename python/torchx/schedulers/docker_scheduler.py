"""The ``local_docker`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.docker_scheduler``."""

from typing import Any

from torchx.schedulers._rust import RustScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RustScheduler:
    return RustScheduler("local_docker", session_name, **kwargs)


# The typed run options (TorchX 0.8's ``StructuredOpts`` of this scheduler), made from the core's
# option schema on first use.
_OPTS_NAMES = ('Opts', 'DockerOpts')


def _opts_class() -> Any:
    from torchx.schedulers._rust import builtin_opts

    cls = builtin_opts('local_docker', _OPTS_NAMES[0], __name__)
    globals().update(dict.fromkeys(_OPTS_NAMES, cls))
    return cls


def __getattr__(name: str) -> Any:
    if name in _OPTS_NAMES:
        return _opts_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
