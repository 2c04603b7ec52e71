"""Generic named resources (``gpu.small`` ... ``cpu.xlarge``), as TorchX's
``torchx.specs.named_resources_generic``: no capabilities or devices, so they fit any
scheduler. The values come from the Rust core's table, which the CLI uses too."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from torchx.specs.api import Resource


def __getattr__(name: str) -> Any:
    if name == "NAMED_RESOURCES":
        from torchx.specs import _tables

        factories: Dict[str, Callable[[], Resource]] = {
            **_tables.family("gpu."),
            **_tables.family("cpu."),
        }
        globals()["NAMED_RESOURCES"] = factories
        return factories
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


NAMED_RESOURCES: Mapping[str, Callable[[], Resource]]
