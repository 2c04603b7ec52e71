"""TorchX's named resources (``-h gpu.small``, ``resource(h="aws_p4d.24xlarge")``): the
builtin tables live in the Rust core; this module is their mapping view."""

from __future__ import annotations

from typing import Dict, Iterator, Mapping, Optional

from torchx.specs.api import Resource, _rs

# MB in a GiB, as TorchX defines it.
GiB: int = 1024


class _NamedResources(Mapping[str, Resource]):
    """``name -> Resource``, read from the Rust tables on first use; each lookup returns a
    fresh ``Resource`` (callers may mutate what they get)."""

    def __init__(self) -> None:
        self._names: Optional[Dict[str, None]] = None

    def _load(self) -> Dict[str, None]:
        if self._names is None:
            self._names = dict.fromkeys(_rs().named_resource_names())
        return self._names

    def __getitem__(self, name: str) -> Resource:
        if name not in self._load():
            raise KeyError(name)
        import json

        data = json.loads(_rs().named_resource(name))
        return Resource(
            cpu=data["cpu"],
            gpu=data["gpu"],
            memMB=data["memMB"],
            capabilities=data.get("capabilities", {}),
            devices=data.get("devices", {}),
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"named_resources({list(self._load())})"


named_resources: Mapping[str, Resource] = _NamedResources()


def get_named_resources(res: str) -> Resource:
    """The named resource ``res`` (``KeyError`` if there is none)."""
    return named_resources[res]


def resource(
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    h: Optional[str] = None,
) -> Resource:
    """A ``Resource``: the named resource ``h`` if given, else cpu/gpu/memMB with TorchX's
    defaults (2 CPUs, 0 GPUs, 1024 MB; a 0 counts as unset, as in TorchX)."""
    if h:
        return get_named_resources(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)
