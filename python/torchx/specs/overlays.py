"""Overlays (0.8's ``torchx.specs.overlays``): partial scheduler-native objects, kept in an
``AppDef``'s or ``Role``'s metadata, that a scheduler merges into what it renders (the
Kubernetes schedulers merge ``metadata["kubernetes"]``'s ``V1Pod`` overlay into each pod).

Merging (:func:`apply_overlay`): dicts merge recursively, lists append, a tuple replaces a list,
other values replace. Keys made by the operators change that for one field: ``PUT(key)``
replaces the value whole, ``JOIN(key, on="name")`` merges lists of dicts item by item on a key
field, ``DEL(key)`` removes the field.

The Rust core applies the same rules when it renders a Kubernetes or MCAD job (one rule, two
languages: ``python/tests/test_overlays.py`` checks that both agree on every case).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple, cast

if TYPE_CHECKING:
    from torchx.specs.api import AppDef, Role

logger: logging.Logger = logging.getLogger(__name__)

_Overlay = Dict[str, Any]

# Marks a metadata namespace as holding overlays by kind (``{"V1Pod": {...}}``).
_FORMAT_KEY = "__torchx_overlays__"
_PUT_PREFIX = "__put__:"
_JOIN_PREFIX = "__join__:"
_DEL_PREFIX = "__del__:"


def PUT(key: str) -> str:
    """The key that replaces field ``key`` whole instead of merging into it."""
    return f"{_PUT_PREFIX}{key}"


def JOIN(key: str, *, on: str) -> str:
    """The key that merges the list of dicts ``key`` item by item, matching items on their
    ``on`` field (an item with a new value is appended)."""
    return f"{_JOIN_PREFIX}{key}:{on}"


def DEL(key: str) -> str:
    """The key that removes field ``key``."""
    return f"{_DEL_PREFIX}{key}"


def _field_of(key: str) -> str:
    """The field an (operator) key names."""
    for prefix in (_PUT_PREFIX, _DEL_PREFIX):
        if key.startswith(prefix):
            return key[len(prefix) :]
    if key.startswith(_JOIN_PREFIX):
        return key[len(_JOIN_PREFIX) :].split(":", 1)[0]
    return key


def _drop_field(base: _Overlay, field: str, *, keep_plain: bool = False) -> None:
    """Removes every key of ``field`` from ``base`` (its plain key too, unless
    ``keep_plain``)."""
    for key in [k for k in base if _field_of(k) == field]:
        if not (keep_plain and key == field):
            del base[key]


def _join_by_key(base: List[Dict[str, Any]], overlay: List[Dict[str, Any]], on: str) -> None:
    by_key = {item[on]: item for item in base if isinstance(item, dict) and on in item}
    for item in overlay:
        match = by_key.get(item[on]) if isinstance(item, dict) and on in item else None
        if match is None:
            base.append(copy.deepcopy(item))
            continue
        for k, v in item.items():
            if k != on:
                match[k] = copy.deepcopy(v)


def _join(base: _Overlay, key: str, value: object, field: str) -> None:
    _drop_field(base, field, keep_plain=True)
    on = key[len(_JOIN_PREFIX) :].split(":", 1)
    if len(on) != 2 or not on[1]:
        raise ValueError(f"malformed JOIN key: `{key}`, expected format from JOIN(field, on=key)")
    if not isinstance(value, list):
        raise TypeError(f"JOIN requires a list value, got {type(value).__name__} for field `{field}`")
    if not all(isinstance(item, dict) for item in value):
        raise TypeError(
            f"JOIN requires a list of dicts as overlay value, but `{field}` overlay contains non-dict items"
        )
    if field not in base:
        base[field] = copy.deepcopy(value)
        return
    existing = base[field]
    if not isinstance(existing, list):
        raise TypeError(f"JOIN requires base[`{field}`] to be a list, got {type(existing).__name__}")
    if not all(isinstance(item, dict) for item in existing):
        raise TypeError(f"JOIN requires a list of dicts, but `{field}` contains non-dict items")
    _join_by_key(existing, value, on[1])


def _merge(base: _Overlay, key: str, value: object, *, resolve: bool) -> None:
    if key not in base:
        base[key] = list(value) if isinstance(value, tuple) else copy.deepcopy(value)
        return
    current = base[key]
    if isinstance(current, dict) and isinstance(value, dict):
        apply_overlay(current, value, _resolve=resolve)
    elif isinstance(current, list) and isinstance(value, tuple):
        base[key] = list(value)
    elif isinstance(current, list) and isinstance(value, list) and key.startswith(_JOIN_PREFIX):
        # The same JOIN stored twice merges its items by their key (TorchX's nightly).
        _, _, on = key[len(_JOIN_PREFIX) :].partition(":")
        _join_by_key(current, value, on)
    elif isinstance(current, list) and isinstance(value, list):
        current.extend(copy.deepcopy(value))
    elif isinstance(current, (dict, list)) or isinstance(value, (dict, list)):
        if type(current) is not type(value):
            raise TypeError(
                f"type mismatch for attr: `{key}`. {type(current).__qualname__} != {type(value).__qualname__}"
            )
    else:
        base[key] = value


def apply_overlay(base: _Overlay, overlay: _Overlay, *, _resolve: bool = True) -> None:
    """Merges ``overlay`` into ``base`` in place (see the module's rules). ``TypeError`` when a
    dict or list meets a value of another type, or a ``JOIN`` meets something that is not a
    list of dicts; ``ValueError`` for a malformed ``JOIN`` key. (``_resolve=False`` keeps the
    operator keys, for overlays stored to be applied later.)"""
    for key, value in overlay.items():
        field = _field_of(key)
        if _resolve:
            if key.startswith(_DEL_PREFIX):
                _drop_field(base, field)
                continue
            if key.startswith(_PUT_PREFIX):
                _drop_field(base, field)
                base[field] = copy.deepcopy(value)
                continue
            if key.startswith(_JOIN_PREFIX):
                _join(base, key, value, field)
                continue
        # The latest key of a field wins over its other spellings.
        for other in [k for k in base if k != key and _field_of(k) == field]:
            del base[other]
        _merge(base, key, value, resolve=_resolve)


def _load_overlay_file(uri: str) -> _Overlay:
    """The overlay (a dict) in the JSON or YAML file ``uri`` (a path or an fsspec URL; YAML's
    ``!!python/tuple`` makes a tuple)."""
    import json

    import fsspec

    if "://" not in uri:
        uri = f"file://{uri}"
    with fsspec.open(uri, "r") as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        import yaml

        class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # untyped PyYAML
            pass

        _Loader.add_constructor(
            "tag:yaml.org,2002:python/tuple",
            lambda loader, node: tuple(loader.construct_sequence(node)),
        )
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader with one tag added
    if not isinstance(data, dict):
        raise ValueError(f"overlay file `{uri}` must contain a dict, got {type(data).__name__}")
    return data


def _reserved(kind: str) -> None:
    if kind == _FORMAT_KEY:
        raise ValueError(f"overlay kind `{kind}` is reserved for the nested-format marker")


def _plain(value: Any, path: str, strict: bool = False) -> Any:
    """A dataclass overlay (or one inside dicts, lists and tuples) as plain data: fields that
    are ``None`` left out, enums as their values; inside a dataclass only string-keyed dicts,
    lists, tuples and primitives are allowed (``TypeError`` naming the path otherwise)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(item, f"{path}.{f.name}", strict=True)
            for f in dataclasses.fields(value)
            if (item := getattr(value, f.name)) is not None
        }
    if isinstance(value, enum.Enum):
        return _plain(value.value, path, strict)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if strict and not isinstance(key, str):
                raise TypeError(f"{path}: dataclass overlay mapping keys must be strings")
            out[key] = _plain(item, f"{path}[{key!r}]", strict)
        return out
    if isinstance(value, (list, tuple)):
        items = [_plain(item, f"{path}[{i}]", strict) for i, item in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if strict and value is not None and not isinstance(value, (str, int, float, bool)):
        raise TypeError(
            f"{path}: unsupported dataclass overlay value {type(value).__name__}; "
            "expected a primitive, enum, dataclass, dict, list, or tuple"
        )
    return value


def set_overlay(target: "AppDef | Role", namespace: str, kind: str, overlay: Any) -> None:
    """Stores ``overlay`` as ``target.metadata[namespace][kind]``, merged (operators kept) into
    what is there already. A dataclass instance (or dataclasses inside the dict) is stored as
    plain data first (as TorchX's nightly): its ``None`` fields left out, enums as values."""
    _reserved(kind)
    if not isinstance(overlay, dict) and (not dataclasses.is_dataclass(overlay) or isinstance(overlay, type)):
        raise TypeError("overlay must be a dict or dataclass instance")
    overlay = _plain(overlay, "overlay")
    # AppDef.metadata is typed as strings; overlays store dicts in it, as TorchX's.
    metadata = cast(Dict[str, Any], target.metadata)
    stored = metadata.setdefault(namespace, {})
    if not isinstance(stored, dict):
        logger.warning(
            "replacing non-dict value for namespace `%s` in metadata with nested overlay"
            " format. Previous value was: %s",
            namespace,
            type(stored).__name__,
        )
        stored = metadata[namespace] = {}
    stored[_FORMAT_KEY] = True
    existing = stored.get(kind)
    if not isinstance(existing, dict):
        existing = stored[kind] = {}
    apply_overlay(existing, overlay, _resolve=False)


def get_overlay(target: "AppDef | Role", namespace: str, kind: str, *, flat_fallback: bool = True) -> _Overlay:
    """The ``kind`` overlay of ``target.metadata[namespace]`` (loaded from a file if the value
    is a path or URL), ``{}`` if there is none. With ``flat_fallback``, a namespace that is not
    in the nested format and holds a single overlay is that overlay (with a warning)."""
    _reserved(kind)
    value = target.metadata.get(namespace)
    if value is None:
        return {}
    if isinstance(value, str):
        value = _load_overlay_file(value)
    if not isinstance(value, dict):
        return {}
    found = value.get(kind)
    if isinstance(found, dict):
        return found
    kinds = [k for k in value if k != _FORMAT_KEY]
    if value.get(_FORMAT_KEY):
        if kinds:
            logger.debug(
                "overlay kind `%s` not found in namespace `%s` (available kinds: %s)",
                kind,
                namespace,
                kinds,
            )
        return {}
    if not flat_fallback:
        return {}
    several_kinds = len(value) > 1 and all(isinstance(v, dict) for v in value.values())
    if value and not several_kinds:
        logger.warning(
            "overlay kind `%s` not found in namespace `%s` (available kinds: %s). Treating"
            ' `metadata["%s"]` as a flat overlay. Migrate to'
            ' `torchx.specs.overlays.set_overlay(target, "%s", "%s", overlay)` for the nested'
            " format",
            kind,
            namespace,
            kinds,
            namespace,
            namespace,
            kind,
        )
        return value
    return {}


def validate_overlay(
    overlay: _Overlay,
    *,
    blocklist: Optional[List[str]] = None,
    forbidden_keys: Optional[Set[str]] = None,
    overlay_name: str = "overlay",
    suggestion: str = "",
) -> None:
    """``ValueError`` if ``overlay`` sets a field of ``blocklist`` (fields the role sets
    itself) or one of ``forbidden_keys`` (fields that belong to another overlay)."""
    if blocklist:
        disallowed = [_field_of(k) for k in overlay if _field_of(k) in blocklist]
        if disallowed:
            keys = ", ".join(f"`{overlay_name}.{k}`" for k in disallowed)
            raise ValueError(
                f"disallowed overlay attributes {keys} since they can be set directly on the role's attributes."
            )
    if forbidden_keys:
        misplaced = {_field_of(k) for k in overlay} & forbidden_keys
        if misplaced:
            message = f"{overlay_name} overlay contains misplaced keys: {misplaced}."
            raise ValueError(f"{message} {suggestion}" if suggestion else message)


@dataclass(frozen=True)
class OverlaySpec:
    """One scheduler's overlay: where it is kept (``namespace``, ``kind``) and the fields it
    may not set (``blocklist``)."""

    namespace: str
    kind: str
    blocklist: Tuple[str, ...] = ()

    def set(self, target: "AppDef | Role", overlay: _Overlay) -> None:
        """Validates ``overlay`` and stores it on ``target``."""
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        set_overlay(target, self.namespace, self.kind, overlay)

    def get(self, target: "AppDef | Role") -> _Overlay:
        """The validated overlay of ``target`` (nested format only)."""
        overlay = get_overlay(target, self.namespace, self.kind, flat_fallback=False)
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        return overlay
