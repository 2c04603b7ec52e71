"""Mounts and workspaces of a role (re-exported by ``torchx.specs.api``, where TorchX defines
them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import (
    Dict,
    List,
    Optional,
    Union,
)

from torchx import _native
from torchx._record import Record as _Record


class MountType(str, Enum):
    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@dataclass(init=False, repr=False, eq=False)
class BindMount(_Record):
    """A host path mounted into the replica."""

    src_path: str
    dst_path: str
    read_only: bool = False

    def __init__(self, src_path: str, dst_path: str, read_only: bool = False) -> None:
        self.src_path = src_path
        self.dst_path = dst_path
        self.read_only = read_only


@dataclass(init=False, repr=False, eq=False)
class VolumeMount(_Record):
    """A named volume (a PVC on Kubernetes) mounted into the replica."""

    src: str
    dst_path: str
    read_only: bool = False

    def __init__(self, src: str, dst_path: str, read_only: bool = False) -> None:
        self.src = src
        self.dst_path = dst_path
        self.read_only = read_only


@dataclass(init=False, repr=False, eq=False)
class DeviceMount(_Record):
    """A host device exposed to the replica, with cgroup permissions (``rwm``)."""

    src_path: str
    dst_path: str
    permissions: str = "rwm"

    def __init__(self, src_path: str, dst_path: str, permissions: str = "rwm") -> None:
        self.src_path = src_path
        self.dst_path = dst_path
        self.permissions = permissions


@dataclass(init=False, repr=False, eq=False)
class Workspace(_Record):
    """Local project directories to mirror into a job (``{local_path: remote_subdir}``; an
    empty subdir is the workspace root), as TorchX's ``specs.Workspace``."""

    projects: Dict[str, str]

    def __init__(self, projects: Dict[str, str]) -> None:
        self.projects = projects

    def __bool__(self) -> bool:
        return bool(self.projects)

    def __hash__(self) -> int:
        return hash(frozenset(self.projects.items()))

    def is_unmapped_single_project(self) -> bool:
        """One project, copied to the workspace root."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    def merge_into(self, outdir: str) -> None:
        """Copies each project into ``{outdir}/{remote_subdir}``."""
        import pathlib
        import shutil

        for src, dst in self.projects.items():
            target = pathlib.Path(outdir) / dst
            if pathlib.Path(src).is_file():
                shutil.copy2(src, target)
            else:
                shutil.copytree(src, target, dirs_exist_ok=True)

    @staticmethod
    def from_str(workspace: Optional[str]) -> "Workspace":
        """``"path"`` (one project at the root) or a YAML mapping ``{path: subdir}``."""
        if not workspace:
            return Workspace({})
        import yaml

        projects = yaml.safe_load(workspace)
        if isinstance(projects, str):
            return Workspace({projects: ""})
        return Workspace({str(k): "" if v is None else str(v) for k, v in projects.items()})

    def __str__(self) -> str:
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(k if not v else f"{k}:{v}" for k, v in self.projects.items())


def parse_mounts(opts: List[str]) -> List[Union[BindMount, VolumeMount, DeviceMount]]:
    """TorchX's mount grammar: ``type=bind,src=/a,dst=/b[,readonly]``,
    ``type=volume,src=name,dst=/b[,readonly]``, ``type=device,src=/dev/x[,dst=..][,perm=rw]``;
    several mounts may follow each other in one list; a leading ``~`` in a bind source is the
    home directory. ``KeyError`` for an unknown, misplaced or missing option, ``ValueError``
    for a bad value."""
    import os

    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = []
    for m in _native.ext.parse_mounts(list(opts), os.path.expanduser("~")):
        kind = m.pop("type")
        if kind == "bind":
            mounts.append(BindMount(**m))
        elif kind == "volume":
            mounts.append(VolumeMount(**m))
        else:
            mounts.append(DeviceMount(**m))
    return mounts
