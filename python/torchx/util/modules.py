"""Importing objects by dotted path, as TorchX's ``torchx.util.modules``."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any, Union

logger: logging.Logger = logging.getLogger(__name__)


def _absent(error: BaseException, module_path: str) -> bool:
    """Whether ``error`` says ``module_path`` (or a parent package of it) does not exist, as
    opposed to a module that exists and failed to import."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    return missing is not None and (missing == module_path or module_path.startswith(missing + "."))


def load_module(path: str) -> Union[ModuleType, Any, None]:
    """The module ``a.b``, or the attribute ``c`` of module ``a.b`` for ``a.b:c`` (or
    ``a.b.c`` when ``c`` is not a module); None if there is no such thing. A module that exists
    but fails to import (or lacks the attribute) is None too, with a warning naming the
    failure."""
    module_path, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_path)
        return getattr(module, attr) if attr else module
    except Exception as e:
        if not _absent(e, module_path):
            logger.warning("failed to load module `%s`: %s", path, e)
            return None
        if attr or "." not in module_path:
            return None
    parent, _, name = module_path.rpartition(".")
    return getattr(load_module(parent), name, None)


def import_attr(name: str, attr: str, default: Any = None) -> Any:
    """``name.attr``; ``default`` if module ``name`` does not exist. A module that exists but
    fails to import raises (``ModuleNotFoundError`` for its missing dependency), and a missing
    attribute is an ``AttributeError``."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if _absent(e, name):
            return default
        raise
    return getattr(module, attr)
