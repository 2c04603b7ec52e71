"""The ``local_cwd`` scheduler (the Rust core's), as TorchX's
``torchx.schedulers.local_scheduler``: replicas are local processes, run in the current
directory (``CWDImageProvider``, the default) or in the directory a role's image names
(``LocalDirectoryImageProvider``, TorchX's ``local_dir``)."""

from __future__ import annotations

import copy
import os
from typing import Any, List, Mapping, Optional, Type

from torchx.schedulers._rust import RustScheduler, typed_opts_getattr
from torchx.specs import AppDef, AppDryRunInfo, Role, is_terminal


class ImageProvider:
    """Where a role's replicas run: ``get_cwd(image)`` (None: the submitting directory)."""

    def __init__(self, cfg: Optional[Mapping[str, Any]] = None) -> None:
        pass

    def fetch(self, image: str) -> str:
        return image

    def get_cwd(self, image: str) -> Optional[str]:
        return None

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return role.entrypoint


class CWDImageProvider(ImageProvider):
    """Ignores the image: replicas run in the current directory."""

    def fetch(self, image: str) -> str:
        return os.getcwd()

    def get_cwd(self, image: str) -> Optional[str]:
        return None


class LocalDirectoryImageProvider(ImageProvider):
    """The image is a local directory (it must exist): replicas run there, with it on their
    PATH (after the inherited PATH, or before it with ``prepend_cwd``)."""

    def fetch(self, image: str) -> str:
        if not os.path.isdir(image):
            raise ValueError(f"Invalid image name: {image}, does not exist or is not a directory")
        return image

    def get_cwd(self, image: str) -> Optional[str]:
        return os.path.abspath(image)


def _join_path(*parts: Optional[str]) -> str:
    return os.pathsep.join(p for p in parts if p)


class LocalScheduler(RustScheduler):
    """``local_cwd`` with TorchX's local-scheduler arguments. As TorchX's, :meth:`close` (a
    Runner leaving its ``with`` block) cancels the apps this scheduler object started that are
    still running; jobs started by the CLI, or by a Runner that is never closed, live on."""

    def __init__(
        self,
        session_name: str,
        image_provider_class: Type[ImageProvider] = CWDImageProvider,
        cache_size: int = 100,
        extra_paths: Optional[List[str]] = None,
        **kwargs: Any,
    ) -> None:
        if cache_size <= 0:
            raise ValueError(f"cache size must be greater than zero, got {cache_size}")
        super().__init__("local_cwd", session_name, **kwargs)
        self._image_provider_class = image_provider_class
        self._extra_paths = list(extra_paths or [])
        self._started: List[str] = []

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        app_id = super().schedule(dryrun_info)
        self._started.append(app_id)
        return app_id

    def close(self) -> None:
        started, self._started = self._started, []
        for app_id in started:
            try:
                desc = self.describe(app_id)
                if desc is not None and not is_terminal(desc.state):
                    self._cancel_existing(app_id)
            except Exception:  # close must not raise: the app is gone or cannot be reached
                pass

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
        # The request is rendered from a copy: the caller's AppDef stays as given.
        if self._extra_paths:
            app = copy.deepcopy(app)
            for role in app.roles:
                role.env["PATH"] = _join_path(*self._extra_paths, role.env.get("PATH"))
        return super()._submit_dryrun(app, cfg)

    def _submit_cwd(self, app: AppDef) -> Optional[str]:
        provider = self._image_provider_class({})
        dirs = set()
        for role in app.roles:
            provider.fetch(role.image)
            dirs.add(provider.get_cwd(role.image))
        if len(dirs) > 1:
            raise ValueError(
                "local_cwd runs every role of an app in one directory, but the roles' images"
                f" name several: {sorted(str(d) for d in dirs)}"
            )
        return dirs.pop() if dirs else None


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: Optional[List[str]] = None,
    image_provider_class: Type[ImageProvider] = CWDImageProvider,
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
