"""TorchX's directory workspaces: a scheduler that mixes one in runs a role from a copy of its
workspace (the role's ``image`` becomes that directory), files the ignore file lists left out."""

from __future__ import annotations

import os
import posixpath
import shutil
from tempfile import mkdtemp
from typing import Mapping

from torchx.specs import CfgVal, Role
from torchx.workspace.api import WorkspaceMixin, walk_workspace


class TmpDirWorkspaceMixin(WorkspaceMixin[None]):
    """Copies the workspace into a new temporary directory."""

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        job_dir = mkdtemp(prefix="torchx_workspace")
        _copy_to_dir(workspace, job_dir)
        role.image = job_dir


class DirWorkspaceMixin(WorkspaceMixin[None]):
    """Copies the workspace into the new directory of the ``job_dir`` run option (nothing
    without one)."""

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        job_dir = cfg.get("job_dir")
        if job_dir is None:
            return
        if not isinstance(job_dir, str):
            raise TypeError(f"run option job_dir must be a str, got {job_dir!r}")
        os.mkdir(job_dir)  # a new directory: an existing one is an error
        _copy_to_dir(workspace, job_dir)
        role.image = job_dir


def _copy_to_dir(workspace: str, target: str) -> None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(workspace)
    for dir, _, files in walk_workspace(fs, path):
        relpath = posixpath.relpath(dir, path)
        for name, info in files.items():
            dest = posixpath.join(target, posixpath.join(relpath, name) if relpath != "." else name)
            with fs.open(info["name"], "rb") as src, fsspec.open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst)
