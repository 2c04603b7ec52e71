"""The builtin named-resource tables, read from the Rust core (one table for the CLI and
Python): ``name -> factory`` for the generic (``gpu.small``) and AWS (``aws_p3.2xlarge``)
families."""

from __future__ import annotations

from typing import Callable, Dict, List

from torchx import _native
from torchx.specs.api import Resource

ResourceFactory = Callable[[], Resource]


def builtin_names() -> List[str]:
    return [n for n in _native.ext.named_resource_names() if n not in ("NULL", "MISSING")]


def factory(name: str) -> ResourceFactory:
    """A function returning a fresh ``Resource`` for the builtin ``name`` on every call."""

    def make() -> Resource:
        from torchx.specs._json import resource_from_json

        return resource_from_json(_native.ext.named_resource(name))

    make.__name__ = python_name(name)
    make.__qualname__ = make.__name__
    make.__doc__ = f"The ``{name}`` named resource."
    return make


def python_name(name: str) -> str:
    """``aws_p3.2xlarge`` -> ``aws_p3_2xlarge``, ``aws_p6-b200.48xlarge`` -> ``aws_p6_b200_48xlarge`` (TorchX's factory function names)."""
    return name.replace(".", "_").replace("-", "_")


def family(prefix: str) -> Dict[str, ResourceFactory]:
    """The builtin factories whose names start with ``prefix``, in table order."""
    return {n: factory(n) for n in builtin_names() if n.startswith(prefix)}
