"""The schedulers: ``get_scheduler_factories()`` maps each name to its
``create_scheduler(session_name, **kwargs)``."""

from __future__ import annotations

from typing import Any, Callable, Dict

SchedulerFactory = Callable[..., Any]

# TorchX's order (its first is its default); each is the Rust core's scheduler of that name.
_BUILTINS = (
    "local_docker",
    "local_cwd",
    "slurm",
    "kubernetes",
    "kubernetes_mcad",
    "aws_batch",
    "aws_sagemaker",
    "lsf",
)


def get_scheduler_factories() -> Dict[str, SchedulerFactory]:
    """Scheduler name → ``create_scheduler(session_name, **kwargs)``."""
    from torchx.schedulers import local_scheduler
    from torchx.schedulers._rust import create_scheduler

    factories = {name: create_scheduler(name) for name in _BUILTINS}
    # local_cwd takes TorchX's local-scheduler arguments (cache_size, ...).
    factories["local_cwd"] = local_scheduler.create_scheduler
    return factories


def get_default_scheduler_name() -> str:
    """The first scheduler of ``get_scheduler_factories()``, as in TorchX."""
    return next(iter(get_scheduler_factories()))
