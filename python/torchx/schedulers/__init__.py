"""The schedulers: ``get_scheduler_factories()`` maps each name to its
``create_scheduler(session_name, **kwargs)``: the builtins (the Rust core's), then the scheduler
plugins (``torchx_plugins.schedulers`` modules and the ``torchx.schedulers`` entry points).
Unlike TorchX, a plugin cannot replace or hide a builtin: one with a builtin's name is ignored
with a warning."""

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


def get_scheduler_factories(*, skip_defaults: bool = False) -> MutableMapping[str, SchedulerFactory]:
    """Scheduler name → ``create_scheduler(session_name, **kwargs)``: the builtins first (none
    with ``skip_defaults``), then the plugins of :func:`torchx.plugins.registry` with other
    names. Plugins are discovered only when a name is not a builtin's or the names are
    listed."""
    return _LazySchedulerFactories({} if skip_defaults else _builtin_factories())


def _builtin_factories() -> Dict[str, SchedulerFactory]:
    return {name: _defer_load_scheduler(path) for name, path in DEFAULT_SCHEDULER_MODULES.items()}


class _PluginsModule:
    """:mod:`torchx.plugins`, imported on first use: the ``plugins`` name TorchX 0.8's module
    has (its tests patch ``torchx.schedulers.plugins``), without the import's cost up front."""

    def __getattr__(self, name: str) -> Any:
        import torchx.plugins

        return getattr(torchx.plugins, name)


plugins: Any = _PluginsModule()


def _plugin_factories() -> Dict[str, SchedulerFactory]:
    found = plugins.registry().get(plugins.PluginType.SCHEDULER)
    return without_builtins(found, DEFAULT_SCHEDULER_MODULES, "scheduler")


def without_builtins(found: Mapping[str, Any], builtins: Any, kind: str) -> Dict[str, Any]:
    """``found`` less the plugins named as a builtin, each dropped with a warning: a plugin adds
    to the builtins and never replaces one."""
    kept: Dict[str, Any] = {}
    for name, factory in found.items():
        if name in builtins:
            import warnings

            warnings.warn(
                f"{kind} `{name}` of the plugins ({getattr(factory, '__module__', '?')}) is"
                f" ignored: a builtin {kind} has that name (plugins add to the builtins, never"
                " replace one)",
                stacklevel=3,
            )
            continue
        kept[name] = factory
    return kept


class _LazySchedulerFactories(MutableMapping[str, SchedulerFactory]):
    """The factories as a mapping that reads the entry points on first need: a runner that
    uses builtins never pays for ``importlib.metadata``."""

    def __init__(self, builtins: Dict[str, SchedulerFactory]) -> None:
        self._builtins = builtins
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
