"""Usage events of the Runner API (TorchX's ``torchx.runner.events``): each call is recorded
on the ``torchx.runner.events`` logger (a debug record with its duration and outcome), where a
handler may collect them."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, Dict, Optional, Type

_LOGGER = "torchx.runner.events"


class log_event:
    """``with log_event("run", scheduler, app_id): ...`` records one event for the call."""

    def __init__(
        self,
        api: str,
        scheduler: Optional[str] = None,
        app_id: Optional[str] = None,
        app_image: Optional[str] = None,
        runcfg: Optional[str] = None,
        workspace: Optional[str] = None,
    ) -> None:
        self.event: Dict[str, Any] = {
            "api": api,
            "scheduler": scheduler or "",
            "app_id": app_id,
            "app_image": app_image,
            "runcfg": runcfg,
            "workspace": workspace,
        }
        self._start = 0.0

    def __enter__(self) -> "log_event":
        self._start = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        # Without `logging` imported nobody can have set up a handler for the events: skip
        # the (costly) import.
        logging = sys.modules.get("logging")
        if logging is None:
            return
        events = logging.getLogger(_LOGGER)
        if events.isEnabledFor(logging.DEBUG):
            import json

            self.event["duration_ms"] = round((time.perf_counter() - self._start) * 1000, 3)
            if exc is not None:
                self.event["exception_type"] = type(exc).__name__
                self.event["exception_message"] = str(exc)
            events.debug(json.dumps(self.event, default=str))
