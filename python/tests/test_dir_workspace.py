"""``torchx.workspace.dir_workspace`` and ``walk_workspace``: a role runs from a copy of its
workspace, without what ``.torchxignore`` (``.dockerignore`` rules) leaves out."""

from pathlib import Path
from typing import List

import fsspec
import pytest
from torchx.specs import Role
from torchx.workspace.api import walk_workspace
from torchx.workspace.dir_workspace import DirWorkspaceMixin, TmpDirWorkspaceMixin


def _project(root: Path) -> Path:
    ws = root / "proj"
    for rel in ["a.py", "data/x.log", "data/keep.log", "build/out.o", "sub/deep/b.py"]:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(rel)
    (ws / ".torchxignore").write_text("# generated files\nbuild\n*/*.log\n!data/keep.log\n")
    return ws


def _files(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_dir_workspace_copies_what_is_not_ignored(tmp_path: Path) -> None:
    ws = _project(tmp_path)
    job_dir = tmp_path / "job"
    role = Role("r", "img")
    DirWorkspaceMixin().build_workspace_and_update_role(role, str(ws), {"job_dir": str(job_dir)})
    assert role.image == str(job_dir)
    assert _files(job_dir) == [".torchxignore", "a.py", "data/keep.log", "sub/deep/b.py"]
    with pytest.raises(FileExistsError):  # job_dir must be new
        DirWorkspaceMixin().build_workspace_and_update_role(role, str(ws), {"job_dir": str(job_dir)})


def test_without_job_dir_nothing_is_copied(tmp_path: Path) -> None:
    role = Role("r", "img")
    DirWorkspaceMixin().build_workspace_and_update_role(role, str(_project(tmp_path)), {})
    assert role.image == "img"


def test_tmp_dir_workspace(tmp_path: Path) -> None:
    role = Role("r", "img")
    TmpDirWorkspaceMixin().build_workspace_and_update_role(role, str(_project(tmp_path)), {})
    assert "torchx_workspace" in role.image and "a.py" in _files(Path(role.image))


def test_walk_workspace_skips_ignored_directories(tmp_path: Path) -> None:
    ws = _project(tmp_path)
    fs = fsspec.filesystem("file")
    dirs = [d for d, _, _ in walk_workspace(fs, str(ws))]
    assert not any(d.endswith("/build") for d in dirs)
    assert any(d.endswith("/sub/deep") for d in dirs)
