"""The builtin schedulers: ``Scheduler`` subclasses whose every operation is the Rust core's
(the same code the ``torchx`` CLI runs), so a job started here is the CLI's job too."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:  # annotations only: importing datetime costs every program
    from datetime import datetime

    from torchx._rs import AttemptInfo

from torchx import _native
from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    RoleStatus,
    runopts,
)
from torchx.specs._json import app_to_json, role_from_json


def _opt_type(name: str) -> Any:
    """The Python type of a run option, from the core's type name."""
    return {
        "str": str,
        "int": int,
        "float": float,
        "bool": bool,
        "typing.List[str]": List[str],
        "typing.Dict[str, str]": Dict[str, str],
    }[name]


def builtin_opts(backend: str, class_name: str, module: str) -> Any:
    """A ``StructuredOpts`` dataclass of builtin scheduler ``backend``'s run options (the core's
    schema, so Python and the CLI take the same options): one field per option, named as the
    option (``-`` as ``_``, the option's spelling kept as ``cfg_key``), typed, with the option's
    default (``Optional`` and ``None`` when it has none) and help."""
    from dataclasses import field, make_dataclass

    from torchx.schedulers._structured_opts import StructuredOpts

    schema = _native.ext.run_opts(backend)
    required, optional = [], []
    for o in schema:
        name = o["name"].replace("-", "_").replace(".", "_")
        meta = {"help": o["help"], "cfg_key": o["name"]}
        tp = _opt_type(o["type"])
        if o["required"]:
            required.append((name, tp, field(metadata=meta)))
        elif o["default"] is None:
            optional.append((name, Optional[tp], field(default=None, metadata=meta)))
        elif isinstance(o["default"], (list, dict)):
            default = o["default"]

            def fresh(d: Any = default) -> Any:
                return copy.deepcopy(d)

            optional.append((name, tp, field(default_factory=fresh, metadata=meta)))
        else:
            optional.append((name, tp, field(default=o["default"], metadata=meta)))
    cls = make_dataclass(class_name, required + optional, bases=(StructuredOpts,))
    cls.__module__ = module
    cls.__doc__ = f"The run options of the builtin `{backend}` scheduler (typed)."
    return cls


def typed_opts_getattr(backend: str, names: Tuple[str, ...], module: str) -> Any:
    """A module ``__getattr__`` that serves ``backend``'s typed options class (``builtin_opts``)
    under each of ``names``: made on first use, then kept as module attributes."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import sys

        cls = builtin_opts(backend, names[0], module)
        for alias in names:
            setattr(sys.modules[module], alias, cls)
        return cls

    return __getattr__


class RustRequest:
    """A builtin scheduler's request: ``.request`` of its ``AppDryRunInfo``. The request as
    data is ``to_json()``; what is scheduled is the request as rendered, so it cannot be
    changed from Python (``schedule`` refuses one whose data was altered)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.data = handle.request()

    def to_json(self) -> Any:
        return self.data

    def materialize(self) -> str:
        """The batch script (Slurm's, LSF's), as TorchX's ``SlurmBatchRequest.materialize()``."""
        script = self.data.get("script") if isinstance(self.data, dict) else None
        if not isinstance(script, str):
            raise TypeError("this scheduler's request has no batch script to materialize")
        return script

    def __repr__(self) -> str:
        return str(self._handle.render())


class NativeRequest:
    """A submitted app's request read back from its scheduler (``describe_native``): the data
    the scheduler holds (``to_json()``); ``resource``, as TorchX's Kubernetes requests, is the
    Volcano Job or AppWrapper where there is one. It cannot be scheduled."""

    def __init__(self, data: Any) -> None:
        self.data = data

    @property
    def resource(self) -> Any:
        data = self.data if isinstance(self.data, dict) else {}
        if data.get("kind") == "AppWrapper":
            return data
        objects = data.get("objects") or [None]
        return objects[0] if data.get("mode") == "volcano" else None

    def to_json(self) -> Any:
        return self.data

    def __repr__(self) -> str:
        import json

        return json.dumps(self.data, indent=2, sort_keys=True)


# Schedulers that run whatever resources a role asks for (or none), as TorchX's local and
# Slurm/LSF schedulers: they skip the "role has a resource" check.
_NO_RESOURCE_CHECK = {"local_cwd", "local_docker", "slurm", "lsf"}


# The dependencies (``Runner.dryrun(after=)``) of the dry run under way in this context:
# ``submit_dryrun`` keeps TorchX's signature, so they travel beside it.
_AFTER: contextvars.ContextVar[Sequence[str]] = contextvars.ContextVar("torchx_after", default=())


@contextlib.contextmanager
def waiting_for(after: Sequence[str]) -> Iterator[None]:
    """Within it, a builtin scheduler's dry runs hold the job until ``after`` ended."""
    token = _AFTER.set(tuple(after))
    try:
        yield
    finally:
        _AFTER.reset(token)


class RustScheduler(Scheduler[Mapping[str, Any]]):
    """A builtin scheduler of the Rust core, by name."""

    #: The core scheduler this object drives (its ``backend`` unless a subclass renamed that,
    #: as TorchX subclasses do: NeMo-Run's local scheduler calls itself ``local``).
    _core: str = ""
    _schema: Optional[List[Dict[str, Any]]] = None

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None) -> None:
        if self._core not in _NO_RESOURCE_CHECK:
            super()._validate(app, scheduler, cfg)

    def __init__(self, backend: str, session_name: str, **_: Any) -> None:
        super().__init__(backend, session_name)
        self._core = backend
        if backend == "local_cwd":
            _point_supervisor_at_torchx()

    def _opt_schema(self) -> List[Dict[str, Any]]:
        """The core's run options of this scheduler (fixed: read once)."""
        if self._schema is None:
            self._schema = _native.ext.run_opts(self._core)
        return self._schema

    def run_opts(self) -> runopts:
        """The core's run options, which list the workspace's among them."""
        return self._run_opts()

    def _run_opts(self) -> runopts:
        opts = runopts()
        for o in self._opt_schema():
            required = bool(o["required"])
            opts.add(
                o["name"],
                type_=_opt_type(o["type"]),
                help=o["help"],
                default=None if required else o["default"],
                required=required,
            )
        return opts

    def _local_workspaces(self, app: AppDef) -> AppDef:
        """``app``, or a copy whose fsspec workspace projects (``memory://``, ``s3://``: the
        notebook's ``%%workspacefile`` workspace) are copied to local directories, which the
        core reads; the copies live as long as this scheduler object."""
        if not any(role.workspace for role in app.roles):
            return app
        from torchx.workspace.api import copy_to_dir, is_remote

        if not any(role.workspace and any(map(is_remote, role.workspace.projects)) for role in app.roles):
            return app
        import shutil
        import tempfile
        import weakref

        from torchx.specs import Workspace

        app = copy.deepcopy(app)
        for role in app.roles:
            if not role.workspace:
                continue
            projects = {}
            for src, dst in role.workspace.projects.items():
                if is_remote(src):
                    local = tempfile.mkdtemp(prefix="torchx-workspace-")
                    weakref.finalize(self, shutil.rmtree, local, True)
                    copy_to_dir(src, local)
                    src = local
                projects[src] = dst
            role.workspace = Workspace(projects)
        return app

    def _workspaces_as_torchx(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDef:
        """``app`` with TorchX's handling of a workspace its scheduler runs in place (clients
        such as Monarch rely on it): local_cwd, and slurm without ``job_dir``, ignore one that is
        not the current directory, with a warning (the CLI refuses it); slurm with ``job_dir``
        copies it at dry-run time, so it is snapshotted now (a client may remove it before
        ``schedule``). Other schedulers: ``app`` unchanged."""
        if self._core not in ("local_cwd", "slurm") or not any(role.workspace for role in app.roles):
            return app
        if cfg.get("workspace_type") == "docker":
            return app  # slurm's docker builder: built into an image, as on the other schedulers
        import shutil
        import tempfile
        import warnings
        import weakref

        from torchx.specs import Workspace

        app = copy.deepcopy(app)
        if self._core == "slurm" and cfg.get("job_dir"):
            for role in app.roles:
                if not role.workspace:
                    continue
                projects = {}
                for src, dst in role.workspace.projects.items():
                    snapshot = tempfile.mkdtemp(prefix="torchx-workspace-")
                    weakref.finalize(self, shutil.rmtree, snapshot, True)
                    if os.path.isdir(src):
                        shutil.copytree(src, snapshot, symlinks=True, dirs_exist_ok=True)
                        projects[snapshot] = dst
                    else:
                        projects[shutil.copy2(src, snapshot)] = dst
                role.workspace = Workspace(projects)
            return app
        here = os.path.realpath(self._submit_cwd(app) or os.getcwd())
        for role in app.roles:
            ws = role.workspace
            if not ws:
                continue
            in_place = ws.is_unmapped_single_project() and os.path.realpath(next(iter(ws.projects))) == here
            if not in_place:
                where = "job_dir is not set" if self._core == "slurm" else "it runs jobs in place"
                warnings.warn(
                    f"{self.backend}: the workspace `{ws}` of role `{role.name}` is ignored ({where}: "
                    f"the job runs in the current directory, {here}), as TorchX ignores it",
                    UserWarning,
                    stacklevel=3,
                )
                role.workspace = None
        return app

    @classmethod
    def _opts_type(cls) -> Optional[type]:
        """The typed options of the builtin scheduler this class is (each builtin's module
        serves them as ``Opts``), as the nightly types local_cwd's, Docker's, Kubernetes' and
        Slurm's."""
        for klass in cls.__mro__:
            module = klass.__module__
            if module.startswith("torchx.schedulers.") and module != __name__:
                return getattr(sys.modules[module], "Opts", None)
        return super()._opts_type()

    def _known_cfg(self, cfg: Mapping[str, Any]) -> Dict[str, Any]:
        """``cfg`` without the options this scheduler does not have (ignored, as TorchX)."""
        names = {o["name"] for o in self._opt_schema()}
        return {k: v for k, v in cfg.items() if v is not None and k in names}

    def build_workspace_images(self, app: AppDef, cfg: Mapping[str, Any]) -> List[str]:
        """Builds (and pushes, where jobs pull them) the workspace images of ``app``'s roles as
        a submission would, without submitting; each role's image afterwards."""
        app = self._local_workspaces(app)
        return _native.ext.build_workspace(self._core, app_to_json(app), self._known_cfg(cfg), self._submit_cwd(app))

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Any]:
        # The core is handed a copy where a workspace had to change; the roles of `app` are
        # what the dry run returns.
        submitted = self._workspaces_as_torchx(self._local_workspaces(app), cfg)
        handle = _native.ext.submit_dryrun(
            self._core,
            self.session_name,
            app_to_json(submitted),
            self._known_cfg(cfg),
            self._submit_cwd(submitted),
            list(_AFTER.get()),
        )
        # As TorchX's workspace step: a role whose workspace was planned into an image now
        # runs that image (built, and pushed, by ``schedule``).
        for role, image in zip(app.roles, handle.role_images(), strict=True):
            if image != role.image:
                role.image, role.workspace = image, None
        return AppDryRunInfo(RustRequest(handle), repr)

    def submit(self, app: AppDef, cfg: Mapping[str, Any], workspace: Optional[str] = None) -> str:
        if workspace:
            from torchx.specs import Workspace

            # The core plans it in the dry run and builds it in schedule, as the Runner's.
            app.roles[0].workspace = Workspace.from_str(workspace)
        return self.schedule(self.submit_dryrun(app, cfg))

    def _submit_cwd(self, app: AppDef) -> Optional[str]:
        """The directory the job is submitted from (None: the current one)."""
        return None

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        request = dryrun_info.request
        if not isinstance(request, RustRequest):
            raise TypeError(f"{self.backend} cannot schedule a {type(request).__name__}")
        if request.data != request._handle.request():
            raise ValueError(
                f"{self.backend}: the dry run's request was changed after submit_dryrun; "
                "changing a builtin scheduler's request is not supported: change the AppDef "
                "or the run options and dry-run again"
            )
        return _native.ext.schedule(request._handle)

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        d = _native.ext.describe(self._core, app_id)
        if d is None:
            return None
        return DescribeAppResponse(
            app_id=d.app_id,
            state=AppState[d.state],
            num_restarts=d.num_restarts,
            msg=d.msg,
            structured_error_msg=d.structured_error_msg,
            ui_url=d.ui_url,
            roles_statuses=[
                RoleStatus(
                    role=rs.role,
                    replicas=[
                        ReplicaStatus(
                            id=r.id,
                            state=AppState[r.state],
                            role=r.role,
                            hostname=r.hostname,
                            structured_error_msg=r.structured_error_msg,
                            attempts=[_attempt(a) for a in r.attempts],
                        )
                        for r in rs.replicas
                    ],
                )
                for rs in d.roles_statuses
            ],
            roles=[role_from_json(r) for r in d.roles],
        )

    def describe_native(self, app_id: str) -> Optional[AppDryRunInfo[Any]]:
        data = _native.ext.describe_native(self._core, app_id)
        if data is None:
            return None
        return AppDryRunInfo(NativeRequest(data), repr)

    def list(self) -> List[ListAppResponse]:
        return [
            ListAppResponse(app_id=a.app_id, state=AppState[a.state], name=a.name) for a in _native.ext.list(self._core)
        ]

    def _cancel_existing(self, app_id: str) -> None:
        _native.ext.cancel(self._core, app_id)

    def _delete_existing(self, app_id: str) -> None:
        _native.ext.delete(self._core, app_id)

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
        # As TorchX's schedulers: each line keeps its newline (the extension's lines do). The
        # extension hands out chunks of lines: chain's C loop flattens them.
        from itertools import chain

        return chain.from_iterable(
            _native.ext.log_iter(
                self._core,
                app_id,
                role_name,
                k,
                regex,
                since.timestamp() if since else None,
                until.timestamp() if until else None,
                should_tail,
                Stream(streams).value if streams else None,
            )
        )


def _attempt(a: AttemptInfo) -> Dict[str, Any]:
    """An attempt as ``ReplicaStatus.attempts`` holds it."""
    return {
        "attempt": a.attempt,
        "started": a.started,
        "ended": a.ended,
        "exit_code": a.exit_code,
        "signal": a.signal,
        "reason": a.reason,
    }


def _point_supervisor_at_torchx() -> None:
    """local_cwd's supervisors are the ``torchx`` executable: the one installed with this
    package (``$TORCHX_SUPERVISOR`` wins), handed to the core (this process's environment is
    left alone)."""
    if os.environ.get("TORCHX_SUPERVISOR"):
        return
    from torchx._bin import find_torchx_bin

    found = find_torchx_bin()
    if found:
        _native.ext.use_supervisor(found)
