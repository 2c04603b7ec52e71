"""The schedulers: ``get_scheduler_factories()`` maps each name to its
``create_scheduler(session_name, **kwargs)``: the builtins (the Rust core's), then the
``torchx.schedulers`` entry points. Unlike TorchX, a plugin cannot replace or hide a
builtin: one with a builtin's name is ignored with a warning."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Mapping, MutableMapping, Optional

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


def get_scheduler_factories() -> MutableMapping[str, SchedulerFactory]:
    """Scheduler name → ``create_scheduler(session_name, **kwargs)``: builtins first, then
    ``torchx.schedulers`` entry points with other names. The entry points are scanned only
    when a name is not a builtin's or the names are listed."""
    return _LazySchedulerFactories()


def _builtin_factories() -> Dict[str, SchedulerFactory]:
    return {name: _defer_load_scheduler(path) for name, path in DEFAULT_SCHEDULER_MODULES.items()}


def _plugin_factories() -> Dict[str, SchedulerFactory]:
    from torchx.util.entrypoints import load_group

    plugins: Dict[str, SchedulerFactory] = {}
    for name, factory in (load_group("torchx.schedulers", default={}) or {}).items():
        if name in DEFAULT_SCHEDULER_MODULES:
            import warnings

            warnings.warn(
                f"scheduler `{name}` of the `torchx.schedulers` entry points is ignored: a"
                " builtin scheduler has that name",
                stacklevel=2,
            )
            continue
        plugins[name] = factory
    return plugins


class _LazySchedulerFactories(MutableMapping[str, SchedulerFactory]):
    """The factories as a mapping that reads the entry points on first need: a runner that
    uses builtins never pays for ``importlib.metadata``."""

    def __init__(self) -> None:
        self._builtins = _builtin_factories()
        self._all: Optional[Dict[str, SchedulerFactory]] = None

    def _loaded(self) -> Dict[str, SchedulerFactory]:
        if self._all is None:
            self._all = {**self._builtins, **_plugin_factories()}
        return self._all

    def __getitem__(self, name: str) -> SchedulerFactory:
        if self._all is None and name in self._builtins:
            return self._builtins[name]
        return self._loaded()[name]

    def __setitem__(self, name: str, factory: SchedulerFactory) -> None:
        self._loaded()[name] = factory

    def __delitem__(self, name: str) -> None:
        del self._loaded()[name]

    def __contains__(self, name: object) -> bool:
        return (self._all is None and name in self._builtins) or name in self._loaded()

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __repr__(self) -> str:
        return repr(self._loaded())


def get_default_scheduler_name() -> str:
    """The first scheduler of ``get_scheduler_factories()`` (``local_docker``), as in TorchX."""
    return next(iter(DEFAULT_SCHEDULER_MODULES))
