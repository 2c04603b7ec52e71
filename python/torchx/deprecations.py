"""Deprecation warnings as TorchX 0.8 gives them: ``UserWarning`` (visible by default, unlike
``DeprecationWarning``) for a moved module and for a deprecated function or class."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Optional, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


def deprecated_module(old_import: str, new_import: str, *, stacklevel: int = 3) -> None:
    """Warns that ``old_import`` moved to ``new_import`` (call it from the old module's body)."""
    warnings.warn(
        f"[Deprecated] {old_import} has moved to {new_import} and will be removed in a future"
        f" release. Update your import:\n\n  - from {old_import} import ...\n"
        f"  + from {new_import} import ...\n",
        UserWarning,
        stacklevel=stacklevel,
    )


def deprecated(*, replacement: Optional[str] = None) -> Callable[[_F], _F]:
    """Wraps a function or class so that each call warns it is deprecated (naming
    ``replacement`` when given)."""

    def decorate(fn: _F) -> _F:
        message = f"[Deprecated] {fn.__qualname__} is deprecated"
        if replacement:
            message += f" -- use {replacement} instead"
        message += "."

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, UserWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
