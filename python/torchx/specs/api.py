"""The data of a TorchX job: plain dataclasses and enums with TorchX's names, fields and
defaults. Rules that the Rust core also applies (handle and mount grammars, macro substitution,
the ``torchx status`` text) are called through ``torchx._rs``, so each has one implementation.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Dict,
    Generic,
    List,
    Optional,
    TypeVar,
    Union,
)

from torchx import _native
from torchx._record import FACTORY as _FACTORY, Record as _Record
from torchx.specs._handles import (
    AppHandle as AppHandle,
    MalformedAppHandleException as MalformedAppHandleException,
    ParsedAppHandle as ParsedAppHandle,
    UnknownAppException as UnknownAppException,
    UnknownSchedulerException as UnknownSchedulerException,
    make_app_handle as make_app_handle,
    parse_app_handle as parse_app_handle,
)
from torchx.specs._mounts import (
    BindMount as BindMount,
    DeviceMount as DeviceMount,
    MountType as MountType,
    VolumeMount as VolumeMount,
    Workspace as Workspace,
    parse_mounts as parse_mounts,
)
from torchx.specs._overrides import (
    _NO_OVERRIDE,
    _OVERRIDES_LOCK_KEY,
    _overrides_resolution_lock,
    _resolve_awaitable,
    _ResolvedOverride,
)
from torchx.specs._runopts import (
    CfgVal as CfgVal,
    InvalidRunConfigException as InvalidRunConfigException,
    cases as cases,
    get_type_name as get_type_name,
    runopt as runopt,
    runopts as runopts,
)

if TYPE_CHECKING:
    import pathlib

# Sentinels, as TorchX spells them.
ALL: str = "all"
MISSING: str = "<MISSING>"
NONE: str = "<NONE>"
# A value no one knows (e.g. a scheduler that does not report it).
UNKNOWN: str = "<UNKNOWN>"


def TORCHX_HOME(*subdir_paths: str) -> "pathlib.Path":
    """TorchX's dot-directory (``$TORCHX_HOME``, else ``~/.torchx``), or ``subdir_paths``
    under it; created if missing."""
    import os
    import pathlib

    home = pathlib.Path(os.getenv("TORCHX_HOME", str(pathlib.Path.home() / ".torchx")))
    path = home / os.path.sep.join(subdir_paths)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(init=False, repr=False, eq=False)
class Resource(_Record):
    """Resource requirements of a ``Role``: logical CPUs, GPUs, memory in MB, scheduler
    capabilities (e.g. the instance type) and named devices with their counts."""

    cpu: int
    gpu: int
    memMB: int
    capabilities: Dict[str, Any] = field(default_factory=dict)
    devices: Dict[str, int] = field(default_factory=dict)
    # Metadata that no scheduler reads (0.8): e.g. the named resource that made it.
    tags: Dict[str, object] = field(default_factory=dict)

    def __init__(
        self,
        cpu: int,
        gpu: int,
        memMB: int,
        capabilities: Dict[str, Any] = _FACTORY,
        devices: Dict[str, int] = _FACTORY,
        tags: Dict[str, object] = _FACTORY,
    ) -> None:
        self.cpu = cpu
        self.gpu = gpu
        self.memMB = memMB
        self.capabilities = {} if capabilities is _FACTORY else capabilities
        self.devices = {} if devices is _FACTORY else devices
        self.tags = {} if tags is _FACTORY else tags

    def is_fractional(self) -> bool:
        """Whether a registered named resource made this as a slice of a whole host."""
        from torchx.plugins._resource_tags import resource_tags

        return bool(self.tags.get(resource_tags.IS_FRACTIONAL, False))

    def get_resource_name(self) -> Optional[str]:
        """The registered named resource that made this, if one did."""
        from torchx.plugins._resource_tags import resource_tags

        name = self.tags.get(resource_tags.RESOURCE_NAME)
        return None if name is None else str(name)

    @staticmethod
    def copy(original: "Resource", **capabilities: Any) -> "Resource":
        """A copy of ``original`` with ``capabilities`` added (they win over the original's)."""
        merged = dict(original.capabilities)
        merged.update(capabilities)
        return Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities=merged,
            devices=dict(original.devices),
            tags=dict(original.tags),
        )


# "Nothing specified": what a Role has until given a resource.
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


def _null_resource() -> Resource:
    return NULL_RESOURCE


class macros:
    """Placeholders substituted in ``Role.args``, ``Role.env`` values and ``Role.metadata``
    when a scheduler renders a role (``string.Template`` syntax: ``${name}``, ``$$``)."""

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @dataclass(init=False, repr=False, eq=False)
    class Values(_Record):
        """The values of the macros for one replica."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def __init__(
            self, img_root: str, app_id: str, replica_id: str, rank0_env: str, base_img_root: str = "DEPRECATED"
        ) -> None:
            self.img_root = img_root
            self.app_id = app_id
            self.replica_id = replica_id
            self.rank0_env = rank0_env
            self.base_img_root = base_img_root

        def apply(self, role: "Role") -> "Role":
            """A copy of ``role`` with the macros in its args, env values and metadata (at
            any depth of dicts and lists) substituted; it shares ``role``'s overrides."""
            role = _copy_sharing_overrides(role)
            role.args = [self.substitute(arg) for arg in role.args]
            role.env = {key: self.substitute(value) for key, value in role.env.items()}
            role.metadata = self._apply_nested(role.metadata)
            return role

        def _apply_nested(self, value: Any) -> Any:
            if isinstance(value, dict):
                for k, v in value.items():
                    value[k] = self._apply_nested(v)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    value[i] = self._apply_nested(v)
            elif isinstance(value, str):
                return self.substitute(value)
            return value

        def substitute(self, arg: str) -> str:
            """``string.Template(arg).safe_substitute(**asdict(self))``."""
            return _native.ext.substitute(arg, {k: str(v) for k, v in asdict(self).items()})


class RetryPolicy(str, Enum):
    """What a failed replica restarts: itself (``REPLICA``), its role (``ROLE``; some
    schedulers), or the whole app (``APPLICATION``, every scheduler). (0.7.0's ``HOT_SPARE``
    is gone in 0.8, and no scheduler here honoured it.)"""

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


@dataclass(init=False, repr=False, eq=False)
class Role(_Record):
    """A set of identical replicas of one program (e.g. trainers, parameter servers).

    ``overrides`` (0.8) maps a field name to a producer of its value (a callable, or an
    awaitable): the field reads as the produced value, produced once, on first read."""

    name: str
    image: str
    min_replicas: Optional[int] = None
    base_image: Optional[str] = None  # deprecated, as in TorchX
    entrypoint: str = MISSING
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=_null_resource)
    port_map: Dict[str, int] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)
    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = field(default_factory=list)
    workspace: Optional[Workspace] = None
    overrides: Dict[str, Any] = field(default_factory=dict)
    #: Wall-clock limit of one attempt: seconds, or ``"90s"``, ``"30m"``, ``"4h"``, ``"1d2h"``.
    time_limit: Optional[Union[int, str]] = None
    #: ``"SIG@SECONDS"``: the signal sent that long before the time limit (default ``USR1@90``).
    checkpoint_signal: Optional[str] = None
    #: The exit code that asks for a requeue (default 75); requeues do not spend max_retries.
    requeue_exit_code: Optional[int] = None
    #: Requeues allowed after the requeue code or a preemption (default 100).
    max_requeues: Optional[int] = None
    #: Where ``TORCHX_CHECKPOINT_DIR`` points in every attempt (container schedulers: a path on
    #: one of the role's mounts; local_cwd and slurm default to one next to the job's logs).
    checkpoint_dir: Optional[str] = None
    #: A replica with no progress (output, or :func:`torchx.recovery.heartbeat`) this long is
    #: hung: its stacks are captured and its attempt stopped. Seconds, or ``"10m"``.
    hang_timeout: Optional[Union[int, str]] = None

    def __init__(
        self,
        name: str,
        image: str,
        min_replicas: Optional[int] = None,
        base_image: Optional[str] = None,
        entrypoint: str = MISSING,
        args: List[str] = _FACTORY,
        env: Dict[str, str] = _FACTORY,
        num_replicas: int = 1,
        max_retries: int = 0,
        retry_policy: RetryPolicy = RetryPolicy.APPLICATION,
        resource: Resource = _FACTORY,
        port_map: Dict[str, int] = _FACTORY,
        metadata: Dict[str, Any] = _FACTORY,
        mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = _FACTORY,
        workspace: Optional[Workspace] = None,
        overrides: Dict[str, Any] = _FACTORY,
        time_limit: Optional[Union[int, str]] = None,
        checkpoint_signal: Optional[str] = None,
        requeue_exit_code: Optional[int] = None,
        max_requeues: Optional[int] = None,
        checkpoint_dir: Optional[str] = None,
        hang_timeout: Optional[Union[int, str]] = None,
    ) -> None:
        self.name = name
        self.image = image
        self.min_replicas = min_replicas
        self.base_image = base_image
        self.entrypoint = entrypoint
        self.args = [] if args is _FACTORY else args
        self.env = {} if env is _FACTORY else env
        self.num_replicas = num_replicas
        self.max_retries = max_retries
        self.retry_policy = retry_policy
        self.resource = _null_resource() if resource is _FACTORY else resource
        self.port_map = {} if port_map is _FACTORY else port_map
        self.metadata = {} if metadata is _FACTORY else metadata
        self.mounts = [] if mounts is _FACTORY else mounts
        self.workspace = workspace
        self.overrides = {} if overrides is _FACTORY else overrides
        self.time_limit = time_limit
        self.checkpoint_signal = checkpoint_signal
        self.requeue_exit_code = requeue_exit_code
        self.max_requeues = max_requeues
        self.checkpoint_dir = checkpoint_dir
        self.hang_timeout = hang_timeout

    def __getattribute__(self, attrname: str) -> Any:
        if attrname == "overrides" or attrname.startswith("__"):
            return object.__getattribute__(self, attrname)
        try:
            overrides = object.__getattribute__(self, "overrides")
        except AttributeError:  # during __init__
            return object.__getattribute__(self, attrname)
        value = overrides.get(attrname, _NO_OVERRIDE)
        if value is _NO_OVERRIDE:
            return object.__getattribute__(self, attrname)
        if isinstance(value, _ResolvedOverride):
            return value.value
        with _overrides_resolution_lock(overrides):
            value = overrides[attrname]
            if isinstance(value, _ResolvedOverride):
                return value.value
            import inspect

            result = _resolve_awaitable(attrname, value) if inspect.isawaitable(value) else value()
            overrides[attrname] = _ResolvedOverride(result)
            return result

    def pre_proc(self, scheduler: str, dryrun_info: Any) -> Any:
        """A hook subclasses override to adjust a scheduler's request for this role; called
        for each role, in order, by ``submit_dryrun``. Returns the (adjusted) request info."""
        return dryrun_info


_T = TypeVar("_T")


def _copy_sharing_overrides(obj: _T) -> _T:
    """A deep copy of a Role, or of an AppDef, whose roles share the originals' ``overrides``
    dicts: they may hold producers that cannot be copied (futures), and an override resolved
    through either owner is then resolved for both."""
    roles: List[Role] = list(obj.roles) if isinstance(obj, AppDef) else [obj]  # type: ignore[list-item]
    detached = [role.overrides for role in roles]
    if not any(key != _OVERRIDES_LOCK_KEY for overrides in detached for key in overrides):
        return copy.deepcopy(obj)  # nothing to share: the copy gets its own (empty) dicts
    for role in roles:
        role.overrides = {}
    try:
        clone = copy.deepcopy(obj)
    finally:
        for role, overrides in zip(roles, detached, strict=True):
            role.overrides = overrides
    clones: List[Role] = list(clone.roles) if isinstance(clone, AppDef) else [clone]  # type: ignore[list-item]
    for role, overrides in zip(clones, detached, strict=True):
        role.overrides = overrides
    return clone


@dataclass(init=False, repr=False, eq=False)
class AppDef(_Record):
    """A distributed application: a name and its roles."""

    name: str
    roles: List[Role] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)

    def __init__(self, name: str, roles: List[Role] = _FACTORY, metadata: Dict[str, str] = _FACTORY) -> None:
        self.name = name
        self.roles = [] if roles is _FACTORY else roles
        self.metadata = {} if metadata is _FACTORY else metadata

    def _find_role(self, name: object) -> Optional[Role]:
        return next((role for role in self.roles if role.name == name), None)

    def get_role(self, name: str) -> Role:
        """The first role named ``name`` (the object in ``roles``, not a copy).

        Raises ``KeyError`` naming the roles the app has when none is named ``name``.
        """
        role = self._find_role(name)
        if role is None:
            names = ", ".join(r.name for r in self.roles) or "none"
            raise KeyError(f"app `{self.name}` has no role named `{name}`; available roles: {names}")
        return role

    # Lookup is by role name: without this, ``for role in app`` would call ``__getitem__(0)``.
    __iter__: ClassVar[None] = None

    def __getitem__(self, name: str) -> Role:
        """Same as :py:meth:`get_role`."""
        return self.get_role(name)

    def __contains__(self, name: object) -> bool:
        """Whether a role is named ``name`` (a ``Role`` object is never "in" an app)."""
        return self._find_role(name) is not None


class AppState(int, Enum):
    """The state of an app (and of each replica: ``ReplicaState`` is the same enum)."""

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{self.name} ({self.value})"


ReplicaState = AppState

_TERMINAL_STATES = (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)


def is_terminal(state: AppState) -> bool:
    return state in _TERMINAL_STATES


def is_started(state: AppState) -> bool:
    return state in _TERMINAL_STATES or state == AppState.RUNNING


@dataclass(init=False, repr=False, eq=False)
class ReplicaStatus(_Record):
    """The status of one replica of a role."""

    id: int
    state: ReplicaState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    # The address to reach it at (0.8): its hostname unless a scheduler knows better.
    hostaddr: Optional[str] = None
    #: Its attempts, oldest first, where the scheduler records them: ``attempt``, ``started``,
    #: ``ended``, ``exit_code``, ``signal`` and ``reason`` (``succeeded``, ``failed``,
    #: ``timeout``, ``requeued``, ``preempted``, ``node_failure``, ``cancelled``; ``None``
    #: while running).
    attempts: List[Dict[str, Any]] = field(default_factory=list)

    def __init__(
        self,
        id: int,
        state: ReplicaState,
        role: str,
        hostname: str,
        structured_error_msg: str = NONE,
        hostaddr: Optional[str] = None,
        attempts: List[Dict[str, Any]] = _FACTORY,
    ) -> None:
        self.id = id
        self.state = state
        self.role = role
        self.hostname = hostname
        self.structured_error_msg = structured_error_msg
        self.hostaddr = hostaddr
        self.attempts = [] if attempts is _FACTORY else attempts
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.hostaddr is None:
            self.hostaddr = self.hostname


@dataclass(init=False, repr=False, eq=False)
class RoleStatus(_Record):
    """The statuses of a role's replicas."""

    role: str
    replicas: List[ReplicaStatus]

    def __init__(self, role: str, replicas: List[ReplicaStatus]) -> None:
        self.role = role
        self.replicas = replicas

    def to_json(self) -> Dict[str, Any]:
        def replica(r: ReplicaStatus) -> Dict[str, Any]:
            d = asdict(r)
            if not d["attempts"]:
                del d["attempts"]
            return d

        return {"role": self.role, "replicas": [replica(r) for r in self.replicas]}


@dataclass(init=False, repr=False, eq=False)
class AppStatus(_Record):
    """What a scheduler says about an app: ``format()`` is the text of ``torchx status``."""

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles: List[RoleStatus] = field(default_factory=list)

    def __init__(
        self,
        state: AppState,
        num_restarts: int = 0,
        msg: str = "",
        structured_error_msg: str = NONE,
        ui_url: Optional[str] = None,
        roles: List[RoleStatus] = _FACTORY,
    ) -> None:
        self.state = state
        self.num_restarts = num_restarts
        self.msg = msg
        self.structured_error_msg = structured_error_msg
        self.ui_url = ui_url
        self.roles = [] if roles is _FACTORY else roles

    def is_terminal(self) -> bool:
        return is_terminal(self.state)

    def __repr__(self) -> str:
        # TorchX's YAML rendering: fields sorted, the state as ``FAILED (5)``, a JSON
        # structured error message expanded into YAML.
        import json

        import yaml

        fields = asdict(self)
        error = fields.pop("structured_error_msg")
        if error != NONE:
            try:
                error = json.loads(error)
            except ValueError:
                pass  # a reply file is the job's text, not always JSON: shown as it is
        fields["structured_error_msg"] = error
        fields["state"] = repr(fields["state"])
        return str(yaml.dump({"AppStatus": fields}))

    def to_json(self, filter_roles: Optional[List[str]] = None) -> Dict[str, Any]:
        """The status as ``torchx status --json`` prints it (TorchX's ``to_json``)."""
        wanted = set(filter_roles or [])
        return {
            "state": str(self.state),
            "num_restarts": self.num_restarts,
            "roles": [r.to_json() for r in self.roles if not wanted or r.role in wanted],
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "url": self.ui_url,
        }

    def _format_error_message(self, msg: str, header: str, width: int = 80) -> str:
        """The interesting part of ``msg`` (an RPC or nested exception), wrapped at
        ``width`` with ``header`` before the first line."""
        assert len(header) < width
        return _native.ext.format_error_message(msg, header, width)

    def raise_for_status(self) -> None:
        """Raises ``AppStatusError`` unless the app SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def format(self, filter_roles: Optional[List[str]] = None) -> str:
        """The text ``torchx status`` prints, for every role or only ``filter_roles``."""
        roles = [
            {
                "role": r.role,
                "replicas": [
                    {
                        "id": rep.id,
                        "state": AppState(rep.state).name,
                        "role": rep.role,
                        "hostname": rep.hostname,
                        "structured_error_msg": rep.structured_error_msg,
                    }
                    for rep in r.replicas
                ],
            }
            for r in self.roles
        ]
        return _native.ext.format_status(
            AppState(self.state).name,
            self.num_restarts,
            self.msg,
            self.structured_error_msg,
            self.ui_url,
            roles,
            list(filter_roles or []),
        )


class AppStatusError(Exception):
    """Raised by ``AppStatus.raise_for_status`` when the app did not succeed."""

    def __init__(self, status: AppStatus, *args: object) -> None:
        super().__init__(*args)
        self.status = status


_Request = TypeVar("_Request")


class AppDryRunInfo(Generic[_Request]):
    """A scheduler's request for an app, not submitted yet: ``request`` is the scheduler's own
    object; ``repr()`` shows it as the scheduler renders it."""

    def __init__(self, request: Any, fmt: Any = repr) -> None:
        self.request = request
        self._fmt = fmt
        #: The AppDef the request was made for (set by ``submit_dryrun``/``Runner.dryrun``).
        self.app: Optional[AppDef] = None
        #: The resolved run config: the scheduler's own object, as the nightly has it.
        self.cfg: Dict[str, CfgVal] = {}
        self._scheduler: Optional[str] = None

    # TorchX 0.7's names of ``app`` and ``cfg``, which its clients (NeMo-Run) still set.
    @property
    def _app(self) -> Optional[AppDef]:
        return self.app

    @_app.setter
    def _app(self, app: Optional[AppDef]) -> None:
        self.app = app

    @property
    def _cfg(self) -> Dict[str, CfgVal]:
        return self.cfg

    @_cfg.setter
    def _cfg(self, cfg: Dict[str, CfgVal]) -> None:
        self.cfg = cfg

    def __repr__(self) -> str:
        return str(self._fmt(self.request))


# TorchX defines these here: their reprs, pickles and `__module__` say so.
for _moved in (
    MalformedAppHandleException,
    ParsedAppHandle,
    UnknownAppException,
    UnknownSchedulerException,
    make_app_handle,
    parse_app_handle,
    BindMount,
    DeviceMount,
    MountType,
    VolumeMount,
    Workspace,
    parse_mounts,
    InvalidRunConfigException,
    cases,
    get_type_name,
    runopt,
    runopts,
):
    _moved.__module__ = __name__
