"""Unique app ids, as TorchX's ``torchx.schedulers.ids``: ``make_unique(name)`` is
``{name}-{random id}``, the id a valid Kubernetes name part.

When the native CLI hosts a Python scheduler, its dry run pins the id to the one the CLI drew
(``pinned``), so the dry run is deterministic and ``schedule`` submits the app the dry run
showed."""

from __future__ import annotations

import contextlib
import contextvars
import os
import random
import struct
from typing import Iterator, Optional

START_CANDIDATES: str = "bcdfghjklmnpqrstvwxz"
END_CANDIDATES: str = START_CANDIDATES + "012345679"

_PINNED: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("torchx_unique_id", default=None)


@contextlib.contextmanager
def pinned(unique: Optional[str]) -> Iterator[None]:
    """Within the block, ``make_unique`` appends ``unique`` instead of a random id (no-op for
    ``None``)."""
    token = _PINNED.set(unique)
    try:
        yield
    finally:
        _PINNED.reset(token)


def make_unique(name: str, string_length: int = 0) -> str:
    """``{name}-{id}``: a random 64-bit id, or a random one of ``string_length`` characters."""
    unique = _PINNED.get()
    if unique is not None:
        suffix = unique if string_length == 0 else (unique * string_length)[:string_length]
    else:
        suffix = random_id() if string_length == 0 else get_len_random_id(string_length)
    return f"{name}-{suffix}"


def random_uint64() -> int:
    """A random unsigned 64-bit integer (from ``os.urandom``)."""
    value: int = struct.unpack("!Q", os.urandom(8))[0]
    return value


def random_id(max_length: Optional[int] = None) -> str:
    """A random 64-bit number spelled in a Kubernetes-safe alphabet, starting with a letter;
    at most ``max_length`` characters when given (empty for one of 0 or less)."""
    if max_length is not None and max_length <= 0:
        return ""
    out = ""
    v = random_uint64()
    while v > 0:
        candidates = START_CANDIDATES if not out else END_CANDIDATES
        v, char = divmod(v, len(candidates))
        out += candidates[char]
        if max_length is not None and len(out) >= max_length:
            break
    return out


def get_len_random_id(string_length: int) -> str:
    """A random id of ``string_length`` characters in the same alphabet."""
    return "".join(random.choice(START_CANDIDATES if i == 0 else END_CANDIDATES) for i in range(string_length))
