"""TorchX's named resources (``-h gpu.small``, ``resource(h="aws_p4d.24xlarge")``).

The registered set is the builtin tables (from the Rust core, which the CLI uses too), then the
module named by ``$TORCHX_CUSTOM_NAMED_RESOURCES`` (its ``NAMED_RESOURCES``), then the
named-resource plugins (``torchx_plugins.named_resources`` modules and the
``torchx.named_resources`` entry points). It is loaded on first lookup. Unlike TorchX, a
registration cannot replace a builtin: the builtin is kept and a warning names the plugin.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Dict, Iterator, KeysView, Mapping, Optional, Tuple

from torchx.specs.api import NULL_RESOURCE, Resource

# MB in a GiB, as ``torchx.specs.GiB`` defines it.
GiB: int = 1024

ResourceFactory = Callable[[], Resource]


def factories() -> Dict[str, ResourceFactory]:
    """The registered ``name -> factory`` table (what ``torchx.specs._named_resource_factories``
    reads as, where 0.7.0's tests patch it), loaded once."""
    return named_resources._load()


def _build() -> Dict[str, ResourceFactory]:
    import warnings

    from torchx.specs import named_resources_aws, named_resources_generic

    table: Dict[str, ResourceFactory] = {
        **named_resources_generic.NAMED_RESOURCES,
        **named_resources_aws.NAMED_RESOURCES,
    }
    for origin, extra in _registered():
        for name, factory in extra.items():
            if name in table:
                warnings.warn(
                    f"named resource `{name}` from {origin} is ignored: a builtin (or an"
                    " earlier registration) has that name",
                    stacklevel=4,
                )
            else:
                table[name] = factory
    table["NULL"] = lambda: NULL_RESOURCE
    table["MISSING"] = lambda: NULL_RESOURCE
    return table


def _registered() -> Iterator[tuple[str, Mapping[str, ResourceFactory]]]:
    custom = os.environ.get("TORCHX_CUSTOM_NAMED_RESOURCES")
    if custom:
        import importlib

        module = importlib.import_module(custom)
        yield f"$TORCHX_CUSTOM_NAMED_RESOURCES={custom}", getattr(module, "NAMED_RESOURCES", {})
    from torchx import plugins

    found = plugins.registry().get(plugins.PluginType.NAMED_RESOURCE)
    yield "the named-resource plugins (torchx_plugins.named_resources, entry points)", found


class _NamedResourcesLibrary:
    """``name -> Resource``: each lookup calls the factory, so callers may mutate what they
    get. ``KeyError`` for an unknown name suggests the closest registered one. The table is
    discovered on first lookup, once even when threads race (a lookup from a plugin module
    while discovery imports it is a ``RuntimeError``: the table is incomplete then)."""

    def __init__(self) -> None:
        self._factories: Optional[Dict[str, ResourceFactory]] = None
        self._lock = threading.RLock()
        self._loading = False

    def _load(self) -> Dict[str, ResourceFactory]:
        if self._factories is not None:
            return self._factories
        with self._lock:
            if self._factories is not None:
                return self._factories
            if self._loading:
                raise RuntimeError(
                    "re-entrant named-resource lookup: discovery is already in progress on"
                    " this thread. A plugin module is likely looking up a named resource at"
                    " import time; the registered set is incomplete mid-scan, so defer the"
                    " lookup into the factory body."
                )
            self._loading = True
            try:
                self._factories = _build()
            finally:
                self._loading = False
            return self._factories

    def _table(self) -> Mapping[str, ResourceFactory]:
        if self is named_resources:
            # 0.7.0's spelling of the table, when a caller set it (tests patch it).
            import torchx.specs as specs

            patched: Optional[Mapping[str, ResourceFactory]] = vars(specs).get("_named_resource_factories")
            if patched is not None:
                return patched
        return self._load()

    def reset(self) -> None:
        """Forgets the table: the next lookup discovers it again."""
        with self._lock:
            self._factories = None

    def _lookup(self, key: str) -> Resource:
        """The resource ``key`` names: exactly, else the one name it spells ignoring case
        (``KeyError`` when it spells several, or none: then the closest name is suggested)."""
        table = self._table()
        if key in table:
            return table[key]()
        folded = [name for name in table if name.lower() == key.lower()]
        if len(folded) == 1:
            return table[folded[0]]()
        if folded:
            raise KeyError(
                f"`{key}` matches more than one registered named resource, ignoring case:"
                f" {sorted(folded)}. Use one of those names exactly."
            )
        import difflib

        matches = difflib.get_close_matches(key, table.keys(), n=1)
        if matches:
            hint = f"Did you mean `{matches[0]}`?"
        else:
            hint = f"Registered named resources: {list(table.keys())}"
        raise KeyError(f"No named resource found for `{key}`. {hint}")

    def __getitem__(self, key: str) -> Resource:
        """Deprecated (TorchX's nightly): use ``resource(h=name)``."""
        import warnings

        warnings.warn(
            "`named_resources[name]` is deprecated, use `resource(h=name)` instead", FutureWarning, stacklevel=2
        )
        return self._lookup(key)

    def __contains__(self, key: object) -> bool:
        table = self._table()
        return key in table or (isinstance(key, str) and any(n.lower() == key.lower() for n in table))

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._table()))

    def __len__(self) -> int:
        return len(self._table())

    def keys(self) -> KeysView[str]:
        return self._table().keys()

    def items(self) -> Iterator[Tuple[str, Resource]]:
        """``(name, resource)`` for each registered name (each resource made anew)."""
        for name, factory in list(self._table().items()):
            yield name, factory()

    def get(self, key: str, default: Optional[Resource] = None) -> Optional[Resource]:
        return self[key] if key in self else default

    def __repr__(self) -> str:
        return f"named_resources({list(self._table())})"


named_resources: _NamedResourcesLibrary = _NamedResourcesLibrary()


def get_named_resources(res: str) -> Resource:
    """Deprecated (TorchX's nightly): use ``resource(h=name)``."""
    import warnings

    warnings.warn("`get_named_resources()` is deprecated, use `resource(h=name)` instead", FutureWarning, stacklevel=2)
    return named_resources._lookup(res)


def resource(
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    h: Optional[str] = None,
) -> Resource:
    """A ``Resource``: the named resource ``h`` if given (cpu/gpu/memMB are then ignored), else
    cpu/gpu/memMB with TorchX's defaults (2 CPUs, 0 GPUs, 1024 MB; a 0 counts as unset)."""
    if h:
        return named_resources._lookup(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)
