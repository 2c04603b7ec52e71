"""How a Role's ``overrides`` resolve: each once, under a lock its dict carries, awaitables
from whatever loop they are bound to."""

from __future__ import annotations

import _thread
from typing import Any, Dict

_NO_OVERRIDE: object = object()

# The key in a Role's `overrides` dict holding the lock that makes each override resolve once
# (per dict: a slow producer on one role never stalls reads of another).
_OVERRIDES_LOCK_KEY: str = "<overrides resolution lock>"

_lock_minting = _thread.allocate_lock()


class _OverridesLock:
    """The re-entrant lock kept under ``_OVERRIDES_LOCK_KEY`` (copies of the dict share it)."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        self.lock = _thread.RLock()

    def __deepcopy__(self, memo: Dict[int, object]) -> "_OverridesLock":
        return self


def _overrides_resolution_lock(overrides: Dict[str, Any]) -> Any:
    holder = overrides.get(_OVERRIDES_LOCK_KEY)
    if holder is None:
        with _lock_minting:
            holder = overrides.setdefault(_OVERRIDES_LOCK_KEY, _OverridesLock())
    return holder.lock


class _ResolvedOverride:
    """An override's value once produced (so a value that is itself callable is never
    called again)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __call__(self) -> object:
        return self.value


def _resolve_awaitable(attrname: str, value: Any) -> object:
    """The result of awaiting ``value`` from synchronous code, whatever loop it is bound to and
    whatever loop runs in this thread (a loop running here cannot be blocked on: an error)."""
    import asyncio
    import concurrent.futures

    async def wait(aw: Any) -> object:
        return await aw

    bound = value.get_loop() if hasattr(value, "get_loop") else None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if bound is not None and bound is running:
        raise RuntimeError(
            f"override `{attrname}` is bound to the event loop currently running in this"
            " thread; `await` it instead of accessing the attribute synchronously"
        )
    if bound is not None and bound.is_running():
        return asyncio.run_coroutine_threadsafe(wait(value), bound).result()
    if running is None:
        if bound is not None:
            return bound.run_until_complete(value)
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(value)
        finally:
            loop.close()
    # A loop runs in this thread: resolve on another thread.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        if bound is not None:
            return pool.submit(bound.run_until_complete, value).result()
        return pool.submit(lambda: asyncio.run(wait(value))).result()
