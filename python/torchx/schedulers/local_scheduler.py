"""The ``local_cwd`` scheduler (the Rust core's), as TorchX's
``torchx.schedulers.local_scheduler``: replicas are local processes, run in the current
directory (``CWDImageProvider``, the default) or in the directory a role's image names
(``LocalDirectoryImageProvider``, TorchX's ``local_dir``)."""

from __future__ import annotations

import abc
import copy
import logging
import os
import warnings
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from torchx.schedulers._local_processes import (
    COMBINED_LOG,
    ENV_CUDA_VISIBLE_DEVICES,
    NA,
    STDERR_LOG,
    STDOUT_LOG,
    AppId,
    AppName,
    LogIterator,
    PopenProtocol,
    PopenRequest,
    ProcessLauncher,
    ReplicaParam,
    RoleName,
    _join_PATH,
    _LocalAppDef,
    _LocalReplica,  # noqa: F401  (TorchX's name, imported from here by subclasses)
)
from torchx.schedulers._rust import RustScheduler, typed_opts_getattr
from torchx.schedulers.api import DescribeAppResponse, Stream, filter_regex, split_lines_iterator
from torchx.schedulers.ids import make_unique  # noqa: F401  (TorchX imports it from here)
from torchx.specs import AppDef, AppDryRunInfo, AppState, Role, is_terminal

log: logging.Logger = logging.getLogger(__name__)


class ImageProvider(abc.ABC):
    """Where and how a role's replicas run on this host (TorchX's contract): ``fetch`` the image
    (its root directory), the replicas' working directory (``get_cwd``) and command
    (``get_entrypoint``, ``get_replica_param``)."""

    def __init__(self, cfg: Optional[Mapping[str, Any]] = None) -> None:
        pass

    def fetch_role(self, role: Role) -> str:
        """``fetch(role.image)``; a provider may also change the role here."""
        return self.fetch(role.image)

    @abc.abstractmethod
    def fetch(self, image: str) -> str:
        """Makes ``image`` available here; its root directory ("" if there is none)."""

    def get_replica_param(
        self,
        img_root: str,
        role: Role,
        stdout: Optional[str] = None,
        stderr: Optional[str] = None,
        combined: Optional[str] = None,
    ) -> ReplicaParam:
        """The process of one replica of ``role`` (``img_root``: what ``fetch`` returned)."""
        return ReplicaParam(
            [self.get_entrypoint(img_root, role), *role.args],
            role.env,
            stdout,
            stderr,
            combined,
            self.get_cwd(role.image),
        )

    def get_cwd(self, image: str) -> Optional[str]:
        """The replicas' working directory (None: this process's)."""
        return None

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return os.path.join(img_root, role.entrypoint)


class CWDImageProvider(ImageProvider):
    """Ignores the image: replicas run in the current directory."""

    def fetch(self, image: str) -> str:
        return os.getcwd()

    def get_cwd(self, image: str) -> Optional[str]:
        return os.getcwd()

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return role.entrypoint


class LocalDirectoryImageProvider(ImageProvider):
    """The image is a local directory (it must exist): replicas run there, with it on their
    PATH (after the inherited PATH, or before it with ``prepend_cwd``)."""

    def fetch(self, image: str) -> str:
        if not os.path.isdir(image):
            raise ValueError(f"Invalid image name: {image}, does not exist or is not a directory")
        return image

    def get_cwd(self, image: str) -> Optional[str]:
        return image

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return role.entrypoint


class LocalScheduler(ProcessLauncher, RustScheduler):
    """``local_cwd`` with TorchX's local-scheduler arguments and hooks.

    Apps go through the core (supervised replicas, retries, a ledger every process sees) unless
    a subclass dry-runs them into a :class:`PopenRequest` with ``_to_popen_request``: those run
    as this process's children, kept in ``self._apps``, exactly as in TorchX
    (``_local_processes``). ``describe``, ``log_iter``, ``_cancel_existing`` and ``close`` act
    on whichever path an app took. As TorchX's, :meth:`close` (a Runner leaving its ``with``
    block) stops the apps this object started that still run; jobs started by the CLI, or by a
    Runner that is never closed, live on."""

    _core = "local_cwd"
    _apps: Dict[AppId, _LocalAppDef] = {}  # replaced per object; read-only default
    _cache_size = 100
    _extra_paths: List[str] = []
    _base_log_dir: Optional[str] = None
    _created_tmp_log_dir = False

    def __init__(
        self,
        session_name: str,
        image_provider_class: Callable[[Any], ImageProvider] = CWDImageProvider,
        cache_size: int = 100,
        extra_paths: Optional[List[str]] = None,
        **kwargs: Any,
    ) -> None:
        if cache_size <= 0:
            raise ValueError("cache size must be greater than zero")
        super().__init__("local_cwd", session_name, **kwargs)
        self._apps = {}
        self._image_provider_class = image_provider_class
        self._cache_size = cache_size
        self._extra_paths = list(extra_paths or [])
        self._base_log_dir = None
        self._created_tmp_log_dir = False
        self._started: List[str] = []

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None) -> None:
        pass  # TorchX's local scheduler runs roles without a resource

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Any]:
        # The request is rendered from a copy: the caller's AppDef stays as given.
        if self._extra_paths:
            app = copy.deepcopy(app)
            for role in app.roles:
                role.env["PATH"] = _join_PATH(*self._extra_paths, role.env.get("PATH"))
        return super()._submit_dryrun(app, cfg)

    def _submit_cwd(self, app: AppDef) -> Optional[str]:
        provider = self._image_provider_class({})
        dirs = set()
        for role in app.roles:
            provider.fetch(role.image)
            cwd = provider.get_cwd(role.image)
            dirs.add(os.path.abspath(cwd) if cwd else None)
        if len(dirs) > 1:
            raise ValueError(
                "local_cwd runs every role of an app in one directory, but the roles' images"
                f" name several: {sorted(str(d) for d in dirs)}"
            )
        return dirs.pop() if dirs else None

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        if isinstance(dryrun_info.request, PopenRequest):
            return self._schedule_popen(dryrun_info.request)
        app_id = super().schedule(dryrun_info)
        if "_started" in self.__dict__:
            self._started.append(app_id)
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id in self._apps:
            return self._describe_popen(app_id)
        return super().describe(app_id)

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
        if app_id not in self._apps:
            return super().log_iter(app_id, role_name, k, regex, since, until, should_tail, streams)
        if since or until:
            warnings.warn(
                "Since and/or until times specified for LocalScheduler.log_iter."
                " These will be ignored and all log lines will be returned",
                stacklevel=2,
            )
        lines: Iterable[str] = split_lines_iterator(
            LogIterator(app_id, self._log_file(app_id, role_name, k, streams), self)
        )
        return filter_regex(regex, lines) if regex else lines

    def _cancel_existing(self, app_id: str) -> None:
        if app_id in self._apps:
            app = self._apps[app_id]
            app.close()
            app.state = AppState.CANCELLED
            return
        super()._cancel_existing(app_id)

    def close(self) -> None:
        self._close_popen()
        started, self._started = self.__dict__.get("_started", []), []
        for app_id in started:
            try:
                desc = RustScheduler.describe(self, app_id)
                if desc is not None and not is_terminal(desc.state):
                    RustScheduler._cancel_existing(self, app_id)
            except Exception:  # close must not raise: the app is gone or cannot be reached
                pass

    def __del__(self) -> None:
        # As TorchX: this process's own replica processes do not outlive the scheduler object.
        try:
            self._close_popen()
        except Exception as e:
            log.warning("could not stop the local apps of a LocalScheduler being deleted: %s", e)


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: Optional[List[str]] = None,
    image_provider_class: Callable[[Any], ImageProvider] = CWDImageProvider,
    **kwargs: Any,
) -> LocalScheduler:
    """``local_cwd``. ``cache_size`` must be positive as in TorchX (finished jobs are kept in
    the ledger, not in memory); ``extra_paths`` are prepended to each replica's PATH."""
    return LocalScheduler(
        session_name,
        image_provider_class=image_provider_class,
        cache_size=cache_size,
        extra_paths=extra_paths,
        **kwargs,
    )


# The typed run options (TorchX 0.8's ``StructuredOpts`` of this scheduler), made from the core's
# option schema on first use.
__getattr__ = typed_opts_getattr("local_cwd", ("Opts", "LocalOpts"), __name__)

__all__ = [
    "COMBINED_LOG",
    "ENV_CUDA_VISIBLE_DEVICES",
    "NA",
    "STDERR_LOG",
    "STDOUT_LOG",
    "AppId",
    "AppName",
    "CWDImageProvider",
    "ImageProvider",
    "LocalDirectoryImageProvider",
    "LocalScheduler",
    "LogIterator",
    "PopenProtocol",
    "PopenRequest",
    "ReplicaParam",
    "RoleName",
    "create_scheduler",
]
