"""The exceptions of the core's errors, one class per kind. Each subclasses the builtin TorchX
code already catches for it (``ValueError`` for bad input, ``LookupError`` for what does not
exist, ``NotImplementedError``, ``TimeoutError``, else ``RuntimeError``), carries ``kind`` (the
core's stable name, as in ``torchx ... --json`` errors) and has the core's cause, when there is
one, as ``__cause__``."""

from __future__ import annotations

from typing import Dict, Type


class TorchXError(Exception):
    """The base of the core's errors."""

    kind: str = "backend"


class InvalidArgumentError(TorchXError, ValueError):
    """A malformed argument: component arguments, app handles, mounts, ``-j``, names."""

    kind = "invalid_argument"


class InvalidSpecError(TorchXError, ValueError):
    """A job spec (AppDef/Role) no scheduler could run."""

    kind = "invalid_spec"


class InvalidConfigError(TorchXError, ValueError):
    """Bad run options or configuration files."""

    kind = "invalid_config"


class NotFoundError(TorchXError, LookupError):
    """An app, component, scheduler, role or file that does not exist."""

    kind = "not_found"


class UnsupportedError(TorchXError, NotImplementedError):
    """What the scheduler cannot do."""

    kind = "unsupported"


class BackendError(TorchXError, RuntimeError):
    """The scheduler's backend (a process, a cluster, an API) failed."""

    kind = "backend"


class AlreadyExistsError(BackendError):
    """The backend already has what was to be created (a name clash)."""

    kind = "already_exists"


class PermissionDeniedError(BackendError):
    """The backend refused the caller: no or wrong credentials, or no permission."""

    kind = "permission_denied"


class UnavailableError(BackendError):
    """The backend cannot be reached or is not answering (worth retrying later)."""

    kind = "unavailable"


class TimeoutExpiredError(TorchXError, TimeoutError):
    """A wait ran out of time."""

    kind = "timeout"


#: The class of each kind name (the core raises through this table).
BY_KIND: Dict[str, Type[TorchXError]] = {
    cls.kind: cls
    for cls in (
        InvalidArgumentError,
        InvalidSpecError,
        InvalidConfigError,
        NotFoundError,
        UnsupportedError,
        BackendError,
        AlreadyExistsError,
        PermissionDeniedError,
        UnavailableError,
        TimeoutExpiredError,
    )
}

__all__ = [
    "AlreadyExistsError",
    "BY_KIND",
    "BackendError",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidSpecError",
    "NotFoundError",
    "PermissionDeniedError",
    "TimeoutExpiredError",
    "TorchXError",
    "UnavailableError",
    "UnsupportedError",
]
