"""Usage events of the Runner API (TorchX's ``torchx.runner.events``): ``log_event`` times a
call and ``record``s a :class:`TorchxEvent` on the logger of a destination (``null`` by default:
a handler that drops it; ``console`` prints). ``logging`` is imported when an event is
recorded where a handler may see it, not when the Runner is."""

from __future__ import annotations

import _thread  # not threading: its import costs every script ~1 ms
import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Type

from torchx.runner.events.api import SourceType, TorchxEvent
from torchx.util.session import get_session_id_or_create_new

if TYPE_CHECKING:
    import logging

__all__ = ["SourceType", "TorchxEvent", "get_logging_handler", "log_event", "record"]

_events_loggers: Dict[str, "logging.Logger"] = {}
_events_loggers_lock = _thread.allocate_lock()


def get_logging_handler(destination: str = "null") -> "logging.Handler":
    from torchx.runner.events.handlers import get_logging_handler as handler

    return handler(destination)


def _get_or_create_logger(destination: str = "null") -> "logging.Logger":
    """The logger of ``destination``: one per destination, with that destination's handler,
    not propagating to the root logger (each event is handled once)."""
    import logging

    with _events_loggers_lock:
        logger = _events_loggers.get(destination)
        if logger is None:
            handler = get_logging_handler(destination)
            handler.setLevel(logging.DEBUG)
            logger = logging.getLogger(f"torchx-events-{destination}")
            logger.propagate = False
            logger.addHandler(handler)
            _events_loggers[destination] = logger
        return logger


def record(event: TorchxEvent, destination: str = "null") -> None:
    """Logs ``event`` (serialized) to ``destination``; an event that cannot be serialized is
    reported and dropped."""
    try:
        serialized = event.serialize()
    except Exception:
        import logging

        logging.getLogger(__name__).exception("failed to serialize event, will not record event")
        return
    if _dropped(destination):
        return
    _get_or_create_logger(destination).info(serialized)


def _dropped(destination: str) -> bool:
    """Whether an event to ``destination`` goes nowhere: the null handler drops it, and no
    other can be on its logger before ``logging`` is imported (importing it, ~5 ms, only to
    drop the event would slow every script)."""
    return destination == "null" and "logging" not in sys.modules


class log_event:
    """``with log_event("run", scheduler, app_id, ...): ...`` records one event for the call,
    with its CPU and wall time and the exception it raised, if any. ``cfg``: run options that
    become the event's ``runcfg`` (JSON) only if the event is recorded."""

    def __init__(
        self,
        api: str,
        scheduler: Optional[str] = None,
        app_id: Optional[str] = None,
        app_image: Optional[str] = None,
        app_metadata: Optional[Dict[str, str]] = None,
        runcfg: Optional[str] = None,
        workspace: Optional[str] = None,
        *,
        cfg: Optional[Mapping[str, object]] = None,
    ) -> None:
        self._torchx_event = TorchxEvent(
            session=get_session_id_or_create_new(),
            scheduler=scheduler or "",
            api=api,
            app_id=app_id,
            app_image=app_image,
            app_metadata=app_metadata,
            runcfg=runcfg,
            workspace=workspace,
        )
        self._cfg = cfg
        self._cpu_start = 0
        self._wall_start = 0

    def __enter__(self) -> "log_event":
        self._cpu_start = time.process_time_ns()
        self._wall_start = time.perf_counter_ns()
        self._torchx_event.start_epoch_time_usec = int(time.time() * 1_000_000)
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        event = self._torchx_event
        event.cpu_time_usec = (time.process_time_ns() - self._cpu_start) // 1000
        event.wall_time_usec = (time.perf_counter_ns() - self._wall_start) // 1000
        if _dropped("null"):
            return
        import json

        if self._cfg:
            event.runcfg = json.dumps(self._cfg, default=str)
        if tb is not None:
            import traceback

            event.raw_exception = "".join(traceback.format_exception(exc_type, exc, tb))
            last = traceback.extract_tb(tb)[-1]
            event.exception_source_location = json.dumps(
                {"filename": last.filename, "lineno": last.lineno, "name": last.name}
            )
        if exc_type is not None:
            event.exception_type = exc_type.__name__
        if exc is not None:
            event.exception_message = str(exc)
        record(event)
