"""Python entry points (``importlib.metadata``), as TorchX's ``torchx.util.entrypoints``.

Plugins register under groups such as ``torchx.schedulers`` or ``torchx.named_resources``;
``load_group`` defers each entry point's import until it is called, so listing a group imports
no plugin code."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional


def _entry_points(group: str) -> Any:
    from importlib import metadata

    # As TorchX's (tests patch ``metadata.entry_points`` and select from what it returns).
    return metadata.entry_points().select(group=group)


def load(group: str, name: str, default: Any = None) -> Any:
    """The object entry point ``name`` of ``group`` names (a function, class or module);
    ``default`` if there is no such entry point and a default is given, else ``KeyError``."""
    for ep in _entry_points(group):
        if ep.name == name:
            return ep.load()
    if default is not None:
        return default
    raise KeyError(f"entrypoint {group}.{name} not found")


def _deferred(ep: Any) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        target = ep.load()
        # An entry point naming a module loads it; one naming a callable calls it.
        if ep.attr is None:
            return target
        return target(*args, **kwargs)

    run.__name__ = ep.name
    return run


def load_group(group: str, default: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Callable[..., Any]]]:
    """``name -> deferred loader`` for every entry point of ``group`` (``default`` if it has
    none and one is given, else ``{}`` as 0.8's: 0.7.0 returned None). Calling a loader imports
    its target and calls it with the given arguments, or returns the module if the entry point
    names a module."""
    eps = {ep.name: _deferred(ep) for ep in _entry_points(group)}
    return eps or (default if default is not None else {})


def __getattr__(name: str) -> Any:
    # TorchX's module imports ``importlib.metadata`` as ``metadata`` (tests patch
    # ``torchx.util.entrypoints.metadata.entry_points``); here it loads on first use.
    if name == "metadata":
        from importlib import metadata

        return metadata
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
