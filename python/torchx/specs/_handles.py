"""App handles and the errors about them (re-exported by ``torchx.specs.api``, where TorchX
defines them)."""

from __future__ import annotations

from typing import (
    List,
    NamedTuple,
    Optional,
)

from torchx import _native

AppHandle = str


class MalformedAppHandleException(Exception):
    """An app handle that is not ``{scheduler}://{session_name}/{app_id}``."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(f"{app_handle} is not of the form: <scheduler_backend>://<session_name>/<app_id>")


class UnknownSchedulerException(KeyError):
    """A scheduler name no factory has (0.8 raises it where 0.7.0 raised a ``KeyError``:
    it is both)."""

    def __init__(self, scheduler_backend: str, known: Optional[List[str]] = None) -> None:
        choices = f"one of: {known}" if known is not None else "one of the available schedulers"
        super().__init__(f"Scheduler backend: {scheduler_backend} does not exist. Use {choices}")

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownAppException(Exception):
    """An app the scheduler does not know (never submitted, or removed)."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"Unknown app = {app_handle}. Did you forget to call session.run()?"
            f" Otherwise, the app may have already finished and been removed from the"
            f" scheduler's data plane"
        )


class ParsedAppHandle(NamedTuple):
    scheduler_backend: str
    session_name: str
    app_id: str


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """``{scheduler}://{session_name}/{app_id}`` → its parts; the session may be empty."""
    try:
        scheduler, session, app_id = _native.ext.parse_app_handle(app_handle)
    except ValueError:
        raise MalformedAppHandleException(app_handle) from None
    return ParsedAppHandle(scheduler, session, app_id)


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> str:
    return f"{scheduler_backend}://{session_name}/{app_id}"
