"""TorchX's named resources (``-h gpu.small``, ``resource(h="aws_p4d.24xlarge")``).

The registered set is the builtin tables (from the Rust core, which the CLI uses too), then the
module named by ``$TORCHX_CUSTOM_NAMED_RESOURCES`` (its ``NAMED_RESOURCES``), then the
named-resource plugins (``torchx_plugins.named_resources`` modules and the
``torchx.named_resources`` entry points). It is loaded on first lookup. Unlike TorchX, a
registration cannot replace a builtin: the builtin is kept and a warning names the plugin.
"""

from __future__ import annotations

import _thread
import os
from typing import Callable, Dict, Iterator, KeysView, Mapping, Optional

from torchx.specs.api import NULL_RESOURCE, Resource

# MB in a GiB, as ``torchx.specs.GiB`` defines it.
GiB: int = 1024

ResourceFactory = Callable[[], Resource]

# `_thread`, not `threading`: the same lock without importing threading into every program.
_lock = _thread.allocate_lock()


def factories() -> Dict[str, ResourceFactory]:
    """The registered ``name -> factory`` table, loaded once and kept as
    ``torchx.specs._named_resource_factories`` (where TorchX's tests patch it)."""
    import torchx.specs as specs

    with _lock:
        loaded = specs.__dict__.get("_named_resource_factories")
        if loaded is None:
            loaded = _load()
            specs.__dict__["_named_resource_factories"] = loaded
    return loaded


def _current() -> Mapping[str, ResourceFactory]:
    import torchx.specs as specs

    # A test may have replaced the table (``patch("torchx.specs._named_resource_factories")``).
    return specs.__dict__.get("_named_resource_factories") or factories()


def _load() -> Dict[str, ResourceFactory]:
    from torchx.specs import named_resources_aws, named_resources_generic

    import warnings

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
                    stacklevel=3,
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
    get. ``KeyError`` for an unknown name suggests the closest registered one."""

    def __getitem__(self, key: str) -> Resource:
        table = _current()
        if key in table:
            return table[key]()
        import difflib

        matches = difflib.get_close_matches(key, table.keys(), n=1)
        if matches:
            hint = f"Did you mean `{matches[0]}`?"
        else:
            hint = f"Registered named resources: {list(table.keys())}"
        raise KeyError(f"No named resource found for `{key}`. {hint}")

    def __contains__(self, key: object) -> bool:
        return key in _current()

    def __iter__(self) -> Iterator[str]:
        return iter(list(_current()))

    def __len__(self) -> int:
        return len(_current())

    def keys(self) -> KeysView[str]:
        return _current().keys()

    def get(self, key: str, default: Optional[Resource] = None) -> Optional[Resource]:
        return self[key] if key in self else default

    def __repr__(self) -> str:
        return f"named_resources({list(_current())})"


named_resources: _NamedResourcesLibrary = _NamedResourcesLibrary()


def get_named_resources(res: str) -> Resource:
    """The named resource ``res`` (``KeyError`` naming the closest match if unknown)."""
    return named_resources[res]


def resource(
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    h: Optional[str] = None,
) -> Resource:
    """A ``Resource``: the named resource ``h`` if given (cpu/gpu/memMB are then ignored), else
    cpu/gpu/memMB with TorchX's defaults (2 CPUs, 0 GPUs, 1024 MB; a 0 counts as unset)."""
    if h:
        return get_named_resources(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)
