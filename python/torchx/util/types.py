"""Types of component parameters and how text from the command line becomes them, as TorchX's
``torchx.util.types``: ``int``/``str``/``float``/``bool``, ``List[prim]``, ``Dict[prim, prim]``
and their ``Optional`` forms."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union, cast

_PRIMITIVES = (int, str, float)

_T = TypeVar("_T")


def to_list(arg: str) -> List[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]``; blank text is the empty list."""
    if not arg.strip():
        return []
    return [item.strip() for item in arg.split(",")]


def to_dict(arg: str) -> Dict[str, str]:
    """``"K1=v1,K2=v2"`` (``;`` works too) -> ``{"K1": "v1", "K2": "v2"}``. A value may itself
    be a list literal (``FOO=a,b,BAR=c`` -> ``{"FOO": "a,b", "BAR": "c"}``); ``''``/``""`` is the
    empty string; blank text is the empty map. ``ValueError`` when no ``key=value`` pair can be
    read. The rule is the Rust core's, the one the CLI applies to ``--env`` and ``-cfg``."""
    if not arg:
        return {}
    from torchx import _native

    return dict(_native.ext.parse_kv(arg))


def _origin(tp: Any) -> Any:
    return typing.get_origin(tp)


def strip_annotated(tp: Any) -> Any:
    """``T`` for ``Annotated[T, ...]``; any other type unchanged."""
    if _origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def annotated_flags(tp: Any) -> List[str]:
    """The extra command-line flags of ``Annotated[T, "-x", ...]`` (strings starting with
    ``-``)."""
    if _origin(tp) is not typing.Annotated:
        return []
    return [m for m in tp.__metadata__ if isinstance(m, str) and m.startswith("-")]


def is_bool(param_type: Any) -> bool:
    return param_type is bool


def is_primitive(param_type: Any) -> bool:
    """Whether ``param_type`` is ``int``, ``str`` or ``float``."""
    return param_type in _PRIMITIVES


def decode_optional(param_type: Any) -> Any:
    """``Optional[T]`` (or ``T | None``, ``None | T``) -> ``T``; ``Annotated[T, ...]`` -> ``T``;
    any other type unchanged."""
    param_type = strip_annotated(param_type)
    if _origin(param_type) not in (Union, types.UnionType):
        return param_type
    args = [a for a in typing.get_args(param_type) if a is not type(None)]
    return args[0] if len(args) == 1 else param_type


def _decode_dict(encoded: str, param_type: Any) -> Dict[Any, Any]:
    key_type, value_type = typing.get_args(param_type)
    return {key_type(k): value_type(v) for k, v in to_dict(encoded).items()}


def _decode_list(encoded: str, param_type: Any) -> List[Any]:
    (value_type,) = typing.get_args(param_type)
    if not is_primitive(value_type):
        raise ValueError(f"List types support only primitives (int, str, float), not {value_type}")
    return [value_type(v) for v in to_list(encoded)]


def decode_from_string(encoded_value: str, annotation: Any) -> Union[Dict[Any, Any], List[Any], None]:
    """Text -> the ``List``/``Dict`` ``annotation`` names (``a,b`` for lists, ``k=v,k2=v2`` for
    dicts), with elements converted to the annotated types; ``None`` for empty text.
    ``ValueError`` for any other annotation."""
    if not encoded_value:
        return None
    annotation = strip_annotated(annotation)
    origin = _origin(annotation)
    if origin is dict:
        return _decode_dict(encoded_value, annotation)
    if origin is list:
        return _decode_list(encoded_value, annotation)
    raise ValueError(f"cannot decode text into {annotation}: only List and Dict types are supported")


def decode(encoded_value: Any, annotation: Any) -> Any:
    """A parsed command-line value as ``annotation``: ``bool`` from ``"true"``/``"false"``,
    lists and dicts from their text, anything else as given."""
    if encoded_value is None:
        return None
    annotation = strip_annotated(annotation)
    if is_bool(annotation):
        return bool(encoded_value) and str(encoded_value).lower() == "true"
    if not is_primitive(annotation) and isinstance(encoded_value, str):
        return decode_from_string(encoded_value, annotation)
    return encoded_value


def get_argparse_param_type(parameter: inspect.Parameter) -> Callable[[str], object]:
    """The ``type=`` argparse uses for ``parameter``: the primitive itself, else ``str``
    (decoded afterwards by ``decode``)."""
    annotation = strip_annotated(parameter.annotation)
    if is_primitive(annotation):
        return cast(Callable[[str], object], annotation)
    return str


def none_throws(optional: Optional[_T], message: str = "Unexpected `None`") -> _T:
    """``optional`` itself; ``AssertionError`` if it is ``None``."""
    if optional is None:
        raise AssertionError(message)
    return optional
