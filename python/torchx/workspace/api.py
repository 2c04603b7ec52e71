"""``WorkspaceMixin``: the workspace hooks a Python scheduler implements."""

from __future__ import annotations

import abc
import fnmatch
import posixpath
from typing import TYPE_CHECKING, Dict, Generic, Iterable, List, Mapping, Tuple, TypeVar

from torchx.specs import AppDef, CfgVal, Role, Workspace, runopts

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")

#: The ignore file of a workspace (``.dockerignore`` rules).
TORCHX_IGNORE = ".torchxignore"


class WorkspaceMixin(abc.ABC, Generic[T]):
    """Mixed into a ``Scheduler`` that builds workspaces: the Runner calls
    ``build_workspaces`` before the dry run, and a scheduler implements
    ``caching_build_workspace_and_update_role`` (or the older
    ``build_workspace_and_update_role``) to point each role at what it built."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)

    def workspace_opts(self) -> runopts:
        """The run options of the workspace (added to the scheduler's)."""
        return runopts()

    def build_workspaces(self, roles: List[Role], cfg: Mapping[str, CfgVal]) -> None:
        """Builds the workspace of each role that has one, updating ``role.image`` (and maybe
        ``role.env``) in place; one cache per call so roles sharing a workspace build once."""
        cache: Dict[object, object] = {}
        for i, role in enumerate(roles):
            if role.workspace:
                old = role.image
                self.caching_build_workspace_and_update_role(role, cfg, cache)
                if old != role.image:
                    import logging

                    logging.getLogger(__name__).info(
                        "role[%d]=%s now runs %s (workspace changes)", i, role.name, role.image
                    )

    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: Dict[object, object]
    ) -> None:
        """Builds ``role.workspace`` and points ``role`` at the result. The default merges a
        multi-project workspace into a temporary directory and calls
        ``build_workspace_and_update_role``."""
        workspace = role.workspace
        if not workspace:
            return
        if workspace.is_unmapped_single_project():
            self.build_workspace_and_update_role(role, str(workspace), cfg)
            return
        import tempfile

        with tempfile.TemporaryDirectory(suffix="torchx_workspace_") as outdir:
            workspace.merge_into(outdir)
            self.build_workspace_and_update_role(role, outdir, cfg)

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        """Builds the directory ``workspace`` and points ``role`` at the result (deprecated in
        TorchX in favour of ``caching_build_workspace_and_update_role``)."""
        raise NotImplementedError("implement `caching_build_workspace_and_update_role`")

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> T:
        """What ``push_images`` would push for ``app`` (updating its images' names)."""
        raise NotImplementedError("dryrun_push is not implemented")

    def push_images(self, images_to_push: T) -> None:
        """Pushes what ``dryrun_push_images`` returned."""
        raise NotImplementedError("push is not implemented")


def _ignore(path: str, patterns: Iterable[str]) -> Tuple[int, bool]:
    """(index of the last pattern matching ``path``, whether ``path`` is ignored): a pattern
    ignores what it matches, a ``!pattern`` takes it back; the last match wins."""
    last, ignored = -1, False
    if path in (".", "Dockerfile.torchx"):
        return last, ignored
    path = posixpath.normpath(path)
    for i, pattern in enumerate(patterns):
        if pattern.startswith("!") and fnmatch.fnmatch(path, pattern[1:]):
            last, ignored = i, False
        elif fnmatch.fnmatch(path, pattern):
            last, ignored = i, True
    return last, ignored


def walk_workspace(
    fs: "AbstractFileSystem",
    path: str,
    ignore_name: str = TORCHX_IGNORE,
) -> Iterable[Tuple[str, Iterable[str], Mapping[str, Mapping[str, object]]]]:
    """``fs.walk(path)`` without what the workspace's ignore file (``.dockerignore`` rules)
    excludes: ``(dir, subdirs, {file: info})`` per directory kept. Below a directory, only the
    patterns after the last one that matched it apply (as TorchX's)."""
    patterns: List[str] = []
    ignore_file = posixpath.join(path, ignore_name)
    if fs.exists(ignore_file):
        with fs.open(ignore_file, "rt") as f:
            for line in f.readlines():
                line = line.partition("#")[0].strip()
                if line and line != ".":
                    patterns.append(line)

    def rel(dir: str, name: str) -> str:
        return posixpath.join(dir, name) if dir != "." else name

    pending = [(0, path)]
    while pending:
        first, current = pending.pop()
        active = patterns[first:]
        for dir, dirs, files in fs.walk(current, detail=True, maxdepth=1):
            relpath = posixpath.relpath(dir, path)
            if _ignore(relpath, active)[1]:
                continue
            kept_dirs: List[str] = []
            starts: List[int] = []
            for d in dirs:
                index, ignored = _ignore(posixpath.join(relpath, d), active)
                if not ignored:
                    kept_dirs.append(d)
                    starts.append(first + index + 1)
            kept_files = {name: info for name, info in files.items() if not _ignore(rel(relpath, name), active)[1]}
            yield dir, kept_dirs, kept_files
            pending.extend((start, posixpath.join(dir, d)) for start, d in zip(starts, kept_dirs, strict=True))


def is_remote(workspace: str) -> bool:
    """Whether ``workspace`` is an fsspec URL of another filesystem (``memory://``,
    ``s3://``...), which the core, reading local directories, cannot use as it is."""
    return "://" in workspace and not workspace.startswith("file://")


def copy_to_dir(workspace: str, local: str) -> None:
    """Copies the tree at fsspec URL ``workspace`` into the local directory ``local``."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(workspace)
    fs.get(path.rstrip("/") + "/", local + "/", recursive=True)


def pin_workspace_images(app: AppDef, images: Mapping[Tuple[str, Workspace], str]) -> None:
    """Points each role of ``app`` at its already-built image (``Runner.build_workspace``'s
    result), so that submitting ``app`` does not build it again: a matching role gets that
    ``image`` and no ``workspace``. A role matches on its whole ``(image, workspace)`` pair (what
    the build ran on); a role without a workspace, or whose pair was not built, is left alone."""
    for role in app.roles:
        if not role.workspace:
            continue
        image = images.get((role.image, role.workspace))
        if image is not None:
            role.image = image
            role.workspace = None
