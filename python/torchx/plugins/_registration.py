"""``register``: the decorators that mark plugin factories, and the helpers that derive a
named resource's fractional variants. Import them from :mod:`torchx.plugins`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, TypeVar, Union

from torchx.plugins._registry import NAMED_RESOURCES_ATTR, PluginType
from torchx.plugins._resource_tags import resource_tags as resource_tags

if TYPE_CHECKING:
    from torchx.specs.api import Resource

F = TypeVar("F", bound=Callable[..., object])

Fractionals = Union[Callable[..., Dict[float, str]], Dict[float, str]]

# The share of a whole host a fractional named resource asks for.
WHOLE: float = 1.0
HALF: float = 0.5
QUARTER: float = 0.25
EIGHTH: float = 0.125
SIXTEENTH: float = 0.0625


def powers_of_two_gpus(resource: Any) -> Dict[float, str]:
    """``{fraction: gpu count}`` for every power-of-two slice of ``resource``'s GPUs
    (8 GPUs: ``{1.0: "8", 0.5: "4", 0.25: "2", 0.125: "1"}``). ``ValueError`` unless its GPU
    count is a positive power of two."""
    gpus = resource.gpu
    if gpus <= 0:
        raise ValueError(f"resource must have gpu > 0 to generate power-of-two slices (got {gpus})")
    if gpus & (gpus - 1):
        raise ValueError(f"resource.gpu must be a power of two to generate slices (got {gpus})")
    slices: Dict[float, str] = {}
    fraction = WHOLE
    while int(gpus * fraction) > 0:
        slices[fraction] = str(int(gpus * fraction))
        fraction /= 2
    return slices


def halve_mem_down_to(*, minGiB: int) -> Callable[..., Dict[float, str]]:
    """A ``fractionals`` callable: ``{fraction: GiB}`` halving the resource's memory from the
    whole down to ``minGiB`` (64 GiB, ``minGiB=8``: ``{1.0: "64", 0.5: "32", 0.25: "16",
    0.125: "8"}``). It raises ``ValueError`` for memory that is not whole GiB, or a ``minGiB``
    below the odd part of the memory (halving past it leaves fractions of a GiB)."""

    def slices(resource: Any) -> Dict[float, str]:
        mem_mb = resource.memMB
        if mem_mb <= 0:
            raise ValueError(f"resource must have memMB > 0 to generate memory slices (got {mem_mb})")
        if mem_mb % 1024:
            raise ValueError(f"resource.memMB must be a whole number of GiB (got {mem_mb} MB)")
        gib = mem_mb // 1024
        odd = gib
        while odd % 2 == 0:
            odd //= 2
        if minGiB < odd:
            raise ValueError(
                f"`minGiB` must be >= the odd part of `memGiB` ({odd}) because halving"
                f" {gib} GiB below {odd} produces non-integer GiB values (got minGiB={minGiB})"
            )
        out: Dict[float, str] = {}
        fraction = WHOLE
        while int(gib * fraction) >= minGiB:
            out[fraction] = str(int(gib * fraction))
            fraction /= 2
        return out

    return slices


def _default_name(fn: Any, plugin_type: PluginType) -> str:
    """The function's name; but a scheduler factory with the conventional, uninformative name
    ``create_scheduler`` (as in the documented ``torchx_plugins/schedulers/my_backend.py``
    skeleton) is named after its module: ``my_backend``."""
    if plugin_type is PluginType.SCHEDULER and fn.__name__ == "create_scheduler":
        return str(fn.__module__).rsplit(".", 1)[-1]
    return str(fn.__name__)


def _mark(fn: Any, plugin_type: PluginType, name: str) -> None:
    fn._plugin_type = plugin_type
    fn._plugin_name = name


class register:
    """Marks a function as a plugin factory of ``type`` named ``name`` (default: the
    function's name); :class:`~torchx.plugins.PluginRegistry` collects marked functions from
    the ``torchx_plugins.<group>`` modules. Use the class methods::

        @register.scheduler()
        def my_backend(session_name: str, **kwargs) -> Scheduler: ...
    """

    def __init__(self, type: PluginType, name: Optional[str] = None) -> None:
        self._type = type
        self._name = name

    def __call__(self, fn: F) -> F:
        _mark(fn, self._type, self._name or _default_name(fn, self._type))
        return fn

    @classmethod
    def scheduler(cls, name: Optional[str] = None) -> "register":
        """A ``create_scheduler(session_name, **kwargs) -> Scheduler`` factory."""
        return cls(PluginType.SCHEDULER, name=name)

    @classmethod
    def tracker(cls, name: Optional[str] = None) -> "register":
        """A tracker factory (``create(config) -> TrackerBase``)."""
        return cls(PluginType.TRACKER, name=name)

    @classmethod
    def event_handler(cls, name: Optional[str] = None) -> "register":
        """A ``logging.Handler`` factory for the runner's events, named after its destination
        (``get_logging_handler(destination)``)."""
        return cls(PluginType.EVENT_HANDLER, name=name)

    @classmethod
    def named_resource(
        cls,
        name: Optional[str] = None,
        aliases: Optional[List[str]] = None,
        fractionals: Optional[Fractionals] = None,
    ) -> "_register_named_resource":
        """A ``() -> Resource`` factory, also registered under each of ``aliases``. With
        ``fractionals`` (a ``{fraction: suffix}`` dict, or a callable deriving one from the
        whole resource, e.g. :func:`powers_of_two_gpus`) the function takes a ``fractional``
        argument and each slice is registered as ``<name>_<suffix>``."""
        return _register_named_resource(name=name, aliases=aliases, fractionals=fractionals)


class _register_named_resource(register):
    """``register.named_resource``: besides marking the factories, it tags what they return
    (``resource_tags``), defines aliases and fractional slices as module attributes, and keeps
    the module's ``NAMED_RESOURCES`` dict (the pre-0.8 shape) up to date."""

    def __init__(
        self,
        name: Optional[str] = None,
        aliases: Optional[List[str]] = None,
        fractionals: Optional[Fractionals] = None,
    ) -> None:
        super().__init__(PluginType.NAMED_RESOURCE, name=name)
        self._aliases = list(aliases or [])
        self._fractionals = fractionals

    def _slices(self, whole: "Resource") -> Dict[float, str]:
        if isinstance(self._fractionals, dict):
            return dict(self._fractionals)
        assert self._fractionals is not None
        return self._fractionals(whole)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:  # type: ignore[override]
        module = sys.modules[fn.__module__]
        name = self._name or fn.__name__
        table: Dict[str, Any] = module.__dict__.setdefault(NAMED_RESOURCES_ATTR, {})

        def add(reg_name: str, factory: Any, attribute: bool) -> None:
            if reg_name in table:
                raise ValueError(f"duplicate named resource `{reg_name}` in module `{module.__name__}`")
            if attribute:
                if hasattr(module, reg_name):
                    raise AttributeError(f"`{reg_name}()` already exists in `{module.__name__}`")
                setattr(module, reg_name, factory)
            factory.__module__ = fn.__module__
            _mark(factory, PluginType.NAMED_RESOURCE, reg_name)
            table[reg_name] = factory

        def tagged(resource: Any, tag_name: str, fractional: bool) -> Any:
            resource.tags[resource_tags.RESOURCE_NAME] = tag_name
            resource.tags[resource_tags.IS_FRACTIONAL] = fractional
            return resource

        def base(*args: Any, **kwargs: Any) -> Any:
            return tagged(fn(*args, **kwargs), name, False)

        base.__qualname__ = fn.__qualname__
        base.__name__ = fn.__name__
        base.__doc__ = fn.__doc__
        add(name, base, attribute=name != fn.__name__)

        for alias in self._aliases:

            def alias_factory(*args: Any, **kwargs: Any) -> Any:
                return base(*args, **kwargs)

            alias_factory.__qualname__ = alias_factory.__name__ = alias
            alias_factory._plugin_base_name = name  # type: ignore[attr-defined]
            alias_factory._plugin_is_alias = True  # type: ignore[attr-defined]
            add(alias, alias_factory, attribute=True)

        # Only with fractionals is the function called here (to size the whole host).
        if self._fractionals:
            for fraction, suffix in self._slices(fn()).items():
                slice_name = f"{name}_{suffix}"

                def slice_factory(_fraction: float = fraction, _name: str = slice_name) -> Any:
                    return tagged(fn(_fraction), _name, _fraction != WHOLE)

                slice_factory.__qualname__ = slice_factory.__name__ = slice_name
                slice_factory._plugin_base_name = name  # type: ignore[attr-defined]
                add(slice_name, slice_factory, attribute=True)
        return base
