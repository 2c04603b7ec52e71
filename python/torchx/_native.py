"""Typed, lazy access to the extension module ``torchx._rs`` (types in ``_rs.pyi``):
``_native.ext`` loads it on first use, so importing any module of the package loads nothing."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchx import _rs as ext
else:

    def __getattr__(name: str) -> Any:
        if name == "ext":
            from torchx import _rs

            return _rs
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ext"]
