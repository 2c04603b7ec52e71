"""Plugin discovery: the ``torchx_plugins.<group>`` namespace packages and the (deprecated)
entry points, read once per group and kept, with every failure recorded as a
:class:`RegistrationError` instead of raised. Import these from :mod:`torchx.plugins`."""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import logging
import os
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Set, Union, overload

from torchx.util import entrypoints

logger: logging.Logger = logging.getLogger(__name__)

# The module attribute holding a module's named resources (the pre-0.8 registration shape).
NAMED_RESOURCES_ATTR: str = "NAMED_RESOURCES"

Factory = Callable[..., Any]


class PluginType(str, enum.Enum):
    """A kind of plugin; its value is the kind's entry-point group."""

    SCHEDULER = "torchx.schedulers"
    NAMED_RESOURCE = "torchx.named_resources"
    TRACKER = "torchx.tracker"
    EVENT_HANDLER = "torchx.event_handlers"


class PluginSource(enum.IntFlag):
    """Where plugins are looked for (``TORCHX_PLUGINS_SOURCE`` is its integer value)."""

    NONE = 0
    NAMESPACE_PKG = 1
    ENTRYPOINT = 2


@dataclasses.dataclass(frozen=True)
class RegistrationError:
    """Something discovery could not use: a module that failed to import (``name`` and
    ``plugin_type`` are None), or a plugin that was skipped (a duplicate, a plugin of another
    type, a name also registered by an entry point)."""

    module: str
    error: str
    name: Optional[str] = None
    plugin_type: Optional[str] = None


def _namespace_of(plugin_type: PluginType) -> str:
    return "torchx_plugins." + plugin_type.value[len("torchx.") :]


def _normalized(value: Any) -> Any:
    """A structural form of ``value`` for comparing plugin results across distributions:
    enums by type name and value, dataclasses and containers member-wise, other objects by
    their repr."""
    if isinstance(value, enum.Enum):
        return ("enum", type(value).__name__, value.value)
    if value is None or type(value) in (str, int, float, bool, bytes):
        return value
    if isinstance(value, int):  # int subclasses: generated enums that are not enum.Enum
        return ("enum", type(value).__name__, int(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple((f.name, _normalized(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, dict):
        return tuple(sorted((repr(_normalized(k)), _normalized(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((_normalized(x) for x in value), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(_normalized(x) for x in value)
    try:
        pairs = list(value)
    except TypeError:
        return repr(value)
    if pairs and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
        return (type(value).__name__, tuple((n, _normalized(x)) for n, x in pairs))
    return repr(value)


_RESOURCE_FIELDS = ("cpu", "gpu", "memMB", "capabilities", "devices", "tags")


def _resource_form(resource: Any) -> Any:
    from torchx.plugins._resource_tags import resource_tags

    tags = dict(resource.tags)
    # An absent fractional tag means "not fractional": an explicit False is no difference.
    if not tags.get(resource_tags.IS_FRACTIONAL, False):
        tags.pop(resource_tags.IS_FRACTIONAL, None)
    return tuple(_normalized(getattr(resource, f)) for f in _RESOURCE_FIELDS[:-1]) + (_normalized(tags),)


def _same_plugin(a: Any, b: Any, plugin_type: PluginType) -> bool:
    """Whether two registrations of one name are the same plugin: the same object, or, for
    named resources (pure and cheap to call), factories giving equal resources. Schedulers and
    trackers are not called during discovery, so two of them are never the same."""
    if a is b:
        return True
    if plugin_type is not PluginType.NAMED_RESOURCE:
        return False
    try:
        ra, rb = a(), b()
        if all(hasattr(r, f) for r in (ra, rb) for f in _RESOURCE_FIELDS):
            return bool(_resource_form(ra) == _resource_form(rb))
        return bool(_normalized(ra) == _normalized(rb))
    except Exception:
        return False


class PluginRegistry:
    """The plugins of each :class:`PluginType`, discovered on first :meth:`get` and kept.
    ``plugin_sources`` chooses the channels (namespace packages, entry points, or both). When a
    name is registered by both, the entry point wins and the collision is recorded."""

    def __init__(
        self,
        *,
        plugin_sources: PluginSource = PluginSource.NAMESPACE_PKG | PluginSource.ENTRYPOINT,
    ) -> None:
        self._plugin_sources = plugin_sources
        self._cache: Dict[PluginType, Dict[str, Factory]] = {}
        self._errors: List[RegistrationError] = []

    def reads_entry_points(self) -> bool:
        """Whether the (deprecated) entry points are one of this registry's channels."""
        return PluginSource.ENTRYPOINT in self._plugin_sources

    @staticmethod
    def _namespace_for_type(pt: PluginType) -> str:
        """``torchx_plugins.schedulers`` for ``PluginType.SCHEDULER``, and so on."""
        return _namespace_of(pt)

    def _record(self, error: RegistrationError) -> None:
        logger.warning(
            "torchx plugin %s%s: %s",
            f"`{error.name}` in " if error.name else "",
            f"`{error.module}`",
            error.error,
        )
        self._errors.append(error)

    # -- discovery --------------------------------------------------------------------------

    # Structural comparison of plugin values (see `_normalized`).
    _normalize_value = staticmethod(_normalized)

    def _collect_plugins_from_module(
        self,
        module: ModuleType,
        fqn: str,
        expected: Optional[PluginType],
        found: Dict[str, Factory],
    ) -> None:
        """Adds to ``found`` the marked callables defined in ``module`` (named ``fqn``; ones it
        imported are skipped), recording those of another type than ``expected`` and
        same-name registrations of a different plugin."""
        for attr in dir(module):
            obj = getattr(module, attr, None)
            kind = getattr(obj, "_plugin_type", None)
            if not callable(obj) or kind is None or getattr(obj, "__module__", None) != fqn:
                continue
            name = getattr(obj, "_plugin_name", attr)
            if expected is not None and kind != expected:
                kind_name = kind.name.lower()
                self._record(
                    RegistrationError(
                        module=fqn,
                        name=name,
                        plugin_type=kind_name,
                        error=f"is a {kind_name} but is under the {expected.name.lower()}"
                        f" namespace — use @register.{expected.name.lower()}() or move to"
                        f" `{_namespace_of(kind)}`",
                    )
                )
            elif name not in found:
                found[name] = obj
            elif not _same_plugin(found[name], obj, kind):
                self._record(
                    RegistrationError(
                        module=fqn,
                        name=name,
                        plugin_type=(expected or kind).name.lower(),
                        error="duplicate — already discovered with a DIFFERENT value, keeping first occurrence",
                    )
                )

    def _scan(self, package: ModuleType, expected: Optional[PluginType], found: Dict[str, Factory]) -> None:
        """Imports every public module under ``package`` (recursively, implicit namespace
        sub-packages included) and collects its plugins; a module that fails to import is
        recorded and skipped."""
        prefix = package.__name__
        try:
            children = list(pkgutil.iter_modules(package.__path__))
        except Exception as e:
            self._record(RegistrationError(module=prefix, error=f"failed to scan `{prefix}`: {e}"))
            return
        seen: Set[str] = set()
        for child in children:
            seen.add(child.name)
            if not child.name.startswith("_"):
                self._visit(f"{prefix}.{child.name}", expected, found)
        # Directories without __init__.py (implicit namespace packages) that hold modules.
        for root in list(package.__path__):
            directory = Path(root)
            if not directory.is_dir():
                continue
            for sub in sorted(directory.iterdir()):
                if (
                    sub.is_dir()
                    and not sub.name.startswith(("_", "."))
                    and sub.name.isidentifier()
                    and sub.name not in seen
                    and any(sub.glob("*.py"))
                ):
                    seen.add(sub.name)
                    self._visit(f"{prefix}.{sub.name}", expected, found)

    def _visit(self, fqn: str, expected: Optional[PluginType], found: Dict[str, Factory]) -> None:
        try:
            module = importlib.import_module(fqn)
        except Exception as e:
            self._record(RegistrationError(module=fqn, error=f"{type(e).__name__}: {e}"))
            return
        self._collect_plugins_from_module(module, fqn, expected, found)
        if hasattr(module, "__path__"):
            self._scan(module, expected, found)

    def _find_namespace_plugins(self, namespace: str, expected_type: Optional[PluginType] = None) -> Dict[str, Factory]:
        """The plugins of every module under package ``namespace``; an uninstalled namespace
        has none (and is no error)."""
        try:
            package = importlib.import_module(namespace)
        except ModuleNotFoundError as e:
            # The namespace (or torchx_plugins itself) not installed: no plugins, no error.
            if e.name and (namespace == e.name or namespace.startswith(e.name + ".")):
                return {}
            self._record(RegistrationError(module=namespace, error=f"{type(e).__name__}: {e}"))
            return {}
        except Exception as e:
            self._record(RegistrationError(module=namespace, error=f"{type(e).__name__}: {e}"))
            return {}
        found: Dict[str, Factory] = {}
        if hasattr(package, "__path__"):
            self._scan(package, expected_type, found)
        return found

    def _find(self, plugin_type: PluginType) -> Dict[str, Factory]:
        plugins: Dict[str, Factory] = {}
        if PluginSource.NAMESPACE_PKG in self._plugin_sources:
            plugins = self._find_namespace_plugins(_namespace_of(plugin_type), plugin_type)
        if PluginSource.ENTRYPOINT in self._plugin_sources:
            group = plugin_type.value
            by_entry_point = entrypoints.load_group(group) or {}
            namespace = _namespace_of(plugin_type)
            for name in sorted(by_entry_point.keys() & plugins.keys()):
                self._record(
                    RegistrationError(
                        module=getattr(plugins[name], "__module__", namespace),
                        name=name,
                        plugin_type=plugin_type.name.lower(),
                        error=f"registered via both a `{group}` entry point and the"
                        f" `{namespace}` namespace package — the entry point wins; remove one"
                        " of the registrations",
                    )
                )
            plugins.update(by_entry_point)
        return plugins

    # -- the public API -----------------------------------------------------------------------

    def get(self, plugin_type: PluginType) -> Dict[str, Factory]:
        """``name -> factory`` of ``plugin_type`` (discovered on the first call, then kept)."""
        if plugin_type not in self._cache:
            self._cache[plugin_type] = self._find(plugin_type)
        return self._cache[plugin_type]

    @overload
    def info(self) -> Dict[PluginType, Dict[str, Factory]]: ...

    @overload
    def info(self, plugin_type: PluginType) -> Dict[str, Factory]: ...

    def info(
        self, plugin_type: Optional[PluginType] = None
    ) -> Union[Dict[PluginType, Dict[str, Factory]], Dict[str, Factory]]:
        """A copy of one type's plugins, or of every type's (discovering them all)."""
        if plugin_type is not None:
            return dict(self.get(plugin_type))
        return {pt: dict(self.get(pt)) for pt in PluginType}

    def clear(self) -> None:
        """Forgets what was discovered, here and in the :func:`registry` singleton."""
        self._cache.clear()
        self._errors.clear()
        registry.cache_clear()

    @property
    def errors(self) -> List[RegistrationError]:
        """The errors of the discovery done so far (it discovers nothing itself)."""
        return list(self._errors)

    def load_errors(self, plugin_type: Optional[PluginType] = None) -> List[RegistrationError]:
        """Discovers ``plugin_type`` (every type when None), then returns its errors: those of
        modules under its namespace and of plugins of that type."""
        types = [plugin_type] if plugin_type is not None else list(PluginType)
        for pt in types:
            self.get(pt)
        if plugin_type is None:
            return list(self._errors)
        namespace = _namespace_of(plugin_type)
        kind = plugin_type.name.lower()
        return [
            e
            for e in self._errors
            if e.plugin_type == kind or e.module == namespace or e.module.startswith(namespace + ".")
        ]

    def to_dict(self) -> Dict[str, Any]:
        """Every type's plugins (aliases and fractional slices under their base) and errors,
        as plain data: ``{"scheduler": [...], "named_resource": [...], "tracker": [...],
        "errors": [{"module", "error"}]}``."""
        everything = self.info()
        data: Dict[str, Any] = {}
        for pt in PluginType:
            group = everything[pt]
            aliases: Dict[str, List[str]] = {}
            slices: Dict[str, List[str]] = {}
            for name, fn in group.items():
                base = getattr(fn, "_plugin_base_name", None)
                if base is not None:
                    into = aliases if getattr(fn, "_plugin_is_alias", False) else slices
                    into.setdefault(base, []).append(name)
            items: List[Dict[str, Any]] = []
            for name, fn in group.items():
                if getattr(fn, "_plugin_base_name", None) is not None:
                    continue
                entry: Dict[str, Any] = {
                    "name": name,
                    "module": getattr(fn, "__module__", "unknown"),
                }
                if name in aliases:
                    entry["aliases"] = aliases[name]
                if name in slices:
                    entry["fractionals"] = slices[name]
                items.append(entry)
            kind = pt.name.lower()
            items.extend(
                {"name": e.name, "module": e.module, "error": e.error} for e in self._errors if e.plugin_type == kind
            )
            data[kind] = items
        data["errors"] = [{"module": e.module, "error": e.error} for e in self._errors if e.plugin_type is None]
        return data

    def __str__(self) -> str:
        """The plugins and errors as YAML (loadable with ``yaml.safe_load``)."""

        def quoted(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        data = self.to_dict()
        lines: List[str] = []
        for key in [pt.name.lower() for pt in PluginType]:
            items = data[key]
            lines.append(f"{key}:" if items else f"{key}: []")
            for item in items:
                lines.append(f"  - name: {item['name']}")
                lines.append(f"    module: {item['module']}")
                for many in ("aliases", "fractionals"):
                    if many in item:
                        lines.append(f"    {many}: [{', '.join(item[many])}]")
                if "error" in item:
                    lines.append(f"    error: {quoted(item['error'])}")
        lines.append("errors:" if data["errors"] else "errors: []")
        for err in data["errors"]:
            lines.append(f"  - module: {err['module']}")
            lines.append(f"    error: {quoted(err['error'])}")
        return "\n".join(lines)


_ALL_SOURCES = PluginSource.NAMESPACE_PKG | PluginSource.ENTRYPOINT


def sources_from_env() -> PluginSource:
    """The channels ``TORCHX_PLUGINS_SOURCE`` names (0 none, 1 namespace packages, 2 entry
    points, 3 both; the default is 3). ``ValueError`` for any other value."""
    raw = os.environ.get("TORCHX_PLUGINS_SOURCE", str(int(_ALL_SOURCES)))
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= int(_ALL_SOURCES):
        raise ValueError(
            f"TORCHX_PLUGINS_SOURCE={raw!r} is invalid; expected one of 0 (none), 1 (namespace"
            " only), 2 (entry points only), 3 (both)."
        )
    return PluginSource(value)


@functools.lru_cache(maxsize=1)
def registry() -> PluginRegistry:
    """The process's :class:`PluginRegistry`, reading the channels ``TORCHX_PLUGINS_SOURCE``
    names (see :func:`sources_from_env`)."""
    return PluginRegistry(plugin_sources=sources_from_env())
