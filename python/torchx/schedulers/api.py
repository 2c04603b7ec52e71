"""TorchX's scheduler API: the ``Scheduler`` base class every scheduler (builtin or a Python
plugin) implements, and the responses it returns."""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    FrozenSet,
    Generic,
    Iterable,
    List,
    Mapping,
    Optional,
    TypeVar,
    cast,
    get_args,
    get_origin,
)

if TYPE_CHECKING:  # annotations only: importing datetime costs every program
    from datetime import datetime

    from torchx.schedulers._structured_opts import StructuredOpts

from torchx._record import FACTORY, Record
from torchx.specs import (
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    AppState,
    Role,
    RoleStatus,
    runopts,
)

T = TypeVar("T")

__all__ = [
    "DescribeAppResponse",
    "ListAppResponse",
    "Scheduler",
    "Stream",
    "StructuredOpts",
    "filter_regex",
    "split_lines",
]


class Stream(str, Enum):
    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


@dataclass(init=False, repr=False, eq=False)
class DescribeAppResponse(Record):
    """What a scheduler knows about an app."""

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles_statuses: List[RoleStatus] = field(default_factory=list)
    roles: List[Role] = field(default_factory=list)

    def __init__(
        self,
        app_id: str = "<NOT_SET>",
        state: AppState = AppState.UNSUBMITTED,
        num_restarts: int = -1,
        msg: str = NONE,
        structured_error_msg: str = NONE,
        ui_url: Optional[str] = None,
        roles_statuses: List[RoleStatus] = FACTORY,
        roles: List[Role] = FACTORY,
    ) -> None:
        self.app_id = app_id
        self.state = state
        self.num_restarts = num_restarts
        self.msg = msg
        self.structured_error_msg = structured_error_msg
        self.ui_url = ui_url
        self.roles_statuses = [] if roles_statuses is FACTORY else roles_statuses
        self.roles = [] if roles is FACTORY else roles


@dataclass(init=False, repr=False, eq=False)
class ListAppResponse(Record):
    """One app of ``Scheduler.list()`` (``Runner.list`` fills in the handle)."""

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = ""

    def __init__(self, app_id: str, state: AppState, app_handle: str = "<NOT_SET>", name: str = "") -> None:
        self.app_id = app_id
        self.state = state
        self.app_handle = app_handle
        self.name = name

    def __hash__(self) -> int:
        return hash((self.app_id, self.app_handle, self.state))


def _is_structured_opts(tp: Any) -> bool:
    # By name, so that checking does not import StructuredOpts' machinery.
    return isinstance(tp, type) and any(
        k.__name__ == "StructuredOpts" and k.__module__ == "torchx.schedulers._structured_opts" for k in tp.__mro__
    )


class Scheduler(abc.ABC, Generic[T]):
    """A job scheduler backend. Subclasses implement ``schedule``, ``_submit_dryrun``,
    ``describe``, ``list`` and ``_cancel_existing`` (and optionally ``_run_opts``,
    ``_delete_existing``, ``log_iter``, ``_validate``); the public methods wrap them."""

    #: What the scheduler does not honour, as names of the native CLI's capabilities
    #: (``describe_replicas``, ``list``, ``cancel``, ``delete``, ``logs``, ``log_streams``,
    #: ``log_since_until``, ``log_tail``, ``mounts``, ``retries``, ``multi_role``). Not in
    #: TorchX: the CLI refuses the operations listed here (list, cancel, delete, logs, one
    #: stream's logs) without calling the scheduler, and its conformance suite checks the rest.
    unsupported_capabilities: ClassVar[FrozenSet[str]] = frozenset()

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name

    def close(self) -> None:
        """Releases what the scheduler holds; must not raise, may be called twice."""

    def submit(self, app: AppDef, cfg: Mapping[str, Any], workspace: Optional[str] = None) -> str:
        """Dry-runs and schedules ``app``; returns the app id. A ``workspace`` is built for
        role[0] by the scheduler's ``WorkspaceMixin`` (mostly for tests: prefer the Runner)."""
        resolved_cfg = self.run_opts().resolve(cfg)
        if workspace:
            from torchx.workspace import WorkspaceMixin

            if not isinstance(self, WorkspaceMixin):
                # 0.8's error (it asserted before).
                raise ValueError(f"scheduler `{self.backend}` does not support workspaces (it is not a WorkspaceMixin)")
            self.build_workspace_and_update_role(app.roles[0], workspace, resolved_cfg)
        return self.schedule(self.submit_dryrun(app, resolved_cfg))

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Submits a dry run's request; returns the app id."""

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Any]:
        """The request ``schedule`` would send: options resolved, then ``_submit_dryrun``,
        then each role's ``pre_proc`` hook, in role order."""
        resolved_cfg = self._resolve_cfg(cfg)
        dryrun_info = self._submit_dryrun(app, resolved_cfg)
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info.app = app
        dryrun_info.cfg = resolved_cfg  # type: ignore[assignment]
        return dryrun_info

    @classmethod
    def _opts_type(cls) -> Optional[type]:
        """The ``StructuredOpts`` subclass named in ``Scheduler[...]``, if any (the nightly's:
        ``_submit_dryrun`` and the dry run's ``cfg`` get that type; otherwise a dict, as 0.7)."""
        for klass in cls.__mro__:
            for base in getattr(klass, "__orig_bases__", ()):
                if get_origin(base) is Scheduler:
                    args = get_args(base)
                    return args[0] if args and _is_structured_opts(args[0]) else None
        return None

    def _resolve_cfg(self, cfg: Mapping[str, Any]) -> T:
        """``cfg`` with the run options' defaults, as this scheduler's options type."""
        resolved = self.run_opts().resolve(cfg)
        opts_type = type(self)._opts_type()
        return cast(T, resolved if opts_type is None else opts_type.from_cfg(resolved))  # type: ignore[attr-defined]

    def _submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[Any]:
        raise NotImplementedError()

    def run_opts(self) -> runopts:
        """The run options this scheduler accepts (with its workspace's, as TorchX's, for a
        ``WorkspaceMixin``; the core's schedulers list those among their own)."""
        opts = self._run_opts()
        from torchx.workspace.api import WorkspaceMixin

        if isinstance(self, WorkspaceMixin):
            opts.update(self.workspace_opts())
        return opts

    def _run_opts(self) -> runopts:
        return runopts()

    @abc.abstractmethod
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """What the scheduler knows about the app; ``None`` if it does not know it."""

    def describe_native(self, app_id: str) -> Optional[AppDryRunInfo[Any]]:
        """The scheduler-native request of a submitted app, read back from the scheduler (the
        read-side twin of ``submit_dryrun``); ``None`` if this scheduler cannot read it back
        (the default) or the app no longer exists."""
        return None

    @abc.abstractmethod
    def list(self) -> List[ListAppResponse]:
        """The apps this scheduler knows."""

    def exists(self, app_id: str) -> bool:
        return self.describe(app_id) is not None

    @abc.abstractmethod
    def _cancel_existing(self, app_id: str) -> None:
        """Cancels an app known to exist."""

    def cancel(self, app_id: str) -> None:
        """Cancels the app if it exists; does nothing otherwise."""
        if self.exists(app_id):
            self._cancel_existing(app_id)

    def delete(self, app_id: str) -> None:
        """Deletes the app (cancelling it first) if it exists; does nothing otherwise."""
        if self.exists(app_id):
            self._delete_existing(app_id)

    def _delete_existing(self, app_id: str) -> None:
        self._cancel_existing(app_id)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """The log lines of replica ``k`` of ``role_name``."""
        raise NotImplementedError(f"{self.__class__.__qualname__} does not support application log iteration")

    def _pre_build_validate(self, app: AppDef, scheduler: str, cfg: T) -> None:
        """Checks made before any workspace is built (none by default)."""

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[T] = None) -> None:
        """Checks that ``app`` fits this scheduler (``ValueError`` otherwise), after the
        workspace is built; ``cfg`` is the resolved run configuration (TorchX 0.8 passes it,
        0.7 does not: either override works, see ``call_validate``)."""
        for role in app.roles:
            if role.resource == NULL_RESOURCE:
                raise ValueError(
                    f"No resource for role: {role.name} (image: {role.image})."
                    " Did you forget to attach resource to the role"
                )


def call_validate(sched: Scheduler[Any], app: AppDef, scheduler: str, cfg: Any) -> None:
    """Calls ``sched._validate`` as its class defines it: with ``cfg`` (TorchX 0.8's
    signature), or without (0.7's, which subclasses written for it override)."""
    import inspect

    try:
        params = list(inspect.signature(sched._validate).parameters.values())
    except (TypeError, ValueError):
        params = []
    takes_cfg = len(params) >= 3 or any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
    if takes_cfg:
        sched._validate(app, scheduler, cfg)
    else:
        sched._validate(app, scheduler)


def filter_regex(regex: str, data: Iterable[str]) -> Iterable[str]:
    """The items of ``data`` in which ``regex`` matches (``re.search``)."""
    r = re.compile(regex)
    return filter(lambda datum: r.search(datum), data)


def split_lines(text: str) -> List[str]:
    """``text`` split after each ``\\n``, keeping the newlines."""
    lines = []
    while text:
        idx = text.find("\n")
        if idx < 0:
            lines.append(text)
            break
        lines.append(text[: idx + 1])
        text = text[idx + 1 :]
    return lines


def split_lines_iterator(chunks: Iterable[str]) -> Iterable[str]:
    """Each chunk split with ``split_lines``, in order."""
    for chunk in chunks:
        yield from split_lines(chunk)


def __getattr__(name: str) -> Any:
    # StructuredOpts (and its ast/inspect machinery) loads only for schedulers that use it.
    if name == "StructuredOpts":
        from torchx.schedulers._structured_opts import StructuredOpts

        return StructuredOpts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
