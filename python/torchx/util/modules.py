"""Importing objects by dotted path, as TorchX's ``torchx.util.modules``."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Optional, Union


def load_module(path: str) -> Union[ModuleType, Any, None]:
    """The module ``a.b``, or the attribute ``c`` of module ``a.b`` for ``a.b:c`` (or
    ``a.b.c`` when ``c`` is not a module); None if there is no such thing."""
    module_path, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_path)
        return getattr(module, attr) if attr else module
    except (ModuleNotFoundError, AttributeError):
        if attr:
            return None
    parent, _, name = module_path.rpartition(".")
    if not parent:
        return None
    try:
        return getattr(importlib.import_module(parent), name, None)
    except ModuleNotFoundError:
        return None


def import_attr(name: str, attr: str, default: Any = None) -> Any:
    """``getattr(import_module(name), attr, default)``; ``default`` if the module is missing
    and a default is given."""
    try:
        module: Optional[ModuleType] = importlib.import_module(name)
    except ModuleNotFoundError:
        if default is None:
            raise
        return default
    return getattr(module, attr, default)
