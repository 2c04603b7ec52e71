"""The schedulers: ``get_scheduler_factories()`` maps each name to its
``create_scheduler(session_name, **kwargs)``: the builtins (the Rust core's), then the
``torchx.schedulers`` entry points. Unlike TorchX, a plugin cannot replace or hide a
builtin: one with a builtin's name is ignored with a warning."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from torchx.schedulers.api import Scheduler

__all__ = ["Scheduler", "SchedulerFactory", "get_default_scheduler_name", "get_scheduler_factories"]

SchedulerFactory = Callable[..., Any]

# TorchX's order (its first is its default) and modules.
DEFAULT_SCHEDULER_MODULES: Mapping[str, str] = {
    "local_docker": "torchx.schedulers.docker_scheduler",
    "local_cwd": "torchx.schedulers.local_scheduler",
    "slurm": "torchx.schedulers.slurm_scheduler",
    "kubernetes": "torchx.schedulers.kubernetes_scheduler",
    "kubernetes_mcad": "torchx.schedulers.kubernetes_mcad_scheduler",
    "aws_batch": "torchx.schedulers.aws_batch_scheduler",
    "aws_sagemaker": "torchx.schedulers.aws_sagemaker_scheduler",
    "lsf": "torchx.schedulers.lsf_scheduler",
}


def _defer_load_scheduler(path: str) -> SchedulerFactory:
    def create(*args: Any, **kwargs: Any) -> Any:
        import importlib

        return importlib.import_module(path).create_scheduler(*args, **kwargs)

    return create


def get_scheduler_factories() -> Dict[str, SchedulerFactory]:
    """Scheduler name → ``create_scheduler(session_name, **kwargs)``: builtins first, then
    ``torchx.schedulers`` entry points with other names."""
    factories = {name: _defer_load_scheduler(path) for name, path in DEFAULT_SCHEDULER_MODULES.items()}
    from torchx.util.entrypoints import load_group

    for name, factory in (load_group("torchx.schedulers", default={}) or {}).items():
        if name in factories:
            import warnings

            warnings.warn(
                f"scheduler `{name}` of the `torchx.schedulers` entry points is ignored: a"
                " builtin scheduler has that name",
                stacklevel=2,
            )
            continue
        factories[name] = factory
    return factories


def get_default_scheduler_name() -> str:
    """The first scheduler of ``get_scheduler_factories()`` (``local_docker``), as in TorchX."""
    return next(iter(DEFAULT_SCHEDULER_MODULES))
