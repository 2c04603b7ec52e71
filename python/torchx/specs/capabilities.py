"""``CapabilityKey``: a typed, namespaced key of ``Resource.capabilities`` (stored under the
plain ``"<namespace>.<name>"`` string, so readers of the dict see no difference)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Optional, Type, TypeVar, overload

from torchx.specs.api import Resource

V = TypeVar("V")


@dataclass(frozen=True)
class CapabilityKey(Generic[V]):
    """``CapabilityKey("aws", "efa_enabled", bool)`` names ``capabilities["aws.efa_enabled"]``;
    :meth:`get` checks the stored value's type."""

    namespace: str
    name: str
    type: Type[V]

    @property
    def key(self) -> str:
        """The string key in ``Resource.capabilities``."""
        return f"{self.namespace}.{self.name}"

    def set(self, resource: Resource, value: V) -> None:
        """Stores ``value`` in ``resource.capabilities``."""
        resource.capabilities[self.key] = value

    @overload
    def get(self, resource: Resource) -> Optional[V]: ...

    @overload
    def get(self, resource: Resource, default: V) -> V: ...

    def get(self, resource: Resource, default: Optional[V] = None) -> Optional[V]:
        """The stored value, or ``default`` if there is none. ``TypeError`` if the value is not
        a ``type`` (a ``bool`` is not an ``int`` here)."""
        if self.key not in resource.capabilities:
            return default
        value = resource.capabilities[self.key]
        if (self.type is int and type(value) is bool) or not isinstance(value, self.type):
            raise TypeError(
                f"capability `{self.key}` expected `{self.type.__name__}`, got `{type(value).__name__}`: {value!r}"
            )
        return value
