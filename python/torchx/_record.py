"""What the package's dataclasses share so that making them costs little at import time.

``@dataclass`` writes a class's ``__init__``, ``__repr__`` and ``__eq__`` as source text and
compiles each as the class is made: for the records every script imports (``torchx.specs``,
the scheduler API, the runner's event) that was a third of ``import torchx.specs``. So those
records are ``@dataclass(init=False, repr=False, eq=False)`` subclasses of ``Record``, with
their ``__init__`` written out (a field made by a factory defaults to ``FACTORY``); they behave
as the generated ones (``python/tests/test_specs.py::test_records_behave_as_dataclass_makes_them``)."""

from __future__ import annotations

import _thread
from dataclasses import fields
from typing import Any


class _Factory:
    """The default of a field its ``default_factory`` makes, shown as ``@dataclass`` shows it."""

    def __repr__(self) -> str:
        return "<factory>"


#: The default of a field made by a factory: ``self.x = [] if x is FACTORY else x``.
FACTORY: Any = _Factory()

_repr_running: set[tuple[int, int]] = set()


class Record:
    """The ``__repr__`` and ``__eq__`` that ``@dataclass`` writes, once for every record."""

    __slots__ = ()

    def __repr__(self) -> str:
        key = (id(self), _thread.get_ident())
        if key in _repr_running:
            return "..."
        _repr_running.add(key)
        try:
            shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)  # type: ignore[arg-type]
        finally:
            _repr_running.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)


def _compared(record: object) -> tuple[object, ...]:
    return tuple(getattr(record, f.name) for f in fields(record) if f.compare)  # type: ignore[arg-type]
