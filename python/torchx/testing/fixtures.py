"""A temporary directory per test and helpers to write and check files in it (TorchX's
``torchx.testing.fixtures``; ``torchx.test.fixtures`` is the same, by its 0.7 name)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Dict, Iterable, List, Union

IS_CI: bool = os.getenv("CI", "false").lower() == "true"
IS_MACOS: bool = sys.platform == "darwin"


def write_shell_script(dir: str, name: str, content: List[str]) -> str:
    """Writes the executable bash script ``dir/name`` whose lines are ``content``; its path."""
    path = os.path.join(dir, name)
    with open(path, "w") as f:
        f.write("#! /bin/bash\n")
        f.writelines(f"{line}\n" for line in content)
        f.write("\n")
    os.chmod(path, 0o755)
    return path


class TestWithTmpDir(unittest.TestCase):
    """A fresh temporary directory per test, ``self.tmpdir``, removed afterwards; with helpers
    to write, read and check files in it (relative paths are relative to it)."""

    def setUp(self) -> None:
        self.tmpdir: Path = Path(tempfile.mkdtemp(prefix=f"torchx-{type(self).__name__}-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def _in_tmpdir(self, path: Union[str, Path]) -> Path:
        path = Path(path)
        return path if path.is_absolute() else self.tmpdir / path

    def touch(self, filepath: str) -> Path:
        """Creates the empty file ``tmpdir/filepath`` (and its parent directories)."""
        f = self.tmpdir / filepath
        f.parent.mkdir(parents=True, exist_ok=True)
        f.touch()
        return f

    def mkdir(self, dirpath: str) -> Path:
        """Creates the directory ``tmpdir/dirpath`` (and its parents)."""
        d = self.tmpdir / dirpath
        d.mkdir(parents=True, exist_ok=True)
        return d

    def write(self, filepath: str, content: Iterable[str]) -> Path:
        """Writes ``content`` (lines as given) to ``tmpdir/filepath``."""
        f = self.touch(filepath)
        with open(f, "w") as out:
            out.writelines(content)
        return f

    def write_shell_script(self, script_path: str, content: List[str]) -> Path:
        """An executable bash script ``tmpdir/script_path`` with the lines ``content``."""
        (self.tmpdir / script_path).parent.mkdir(parents=True, exist_ok=True)
        return Path(write_shell_script(str(self.tmpdir), script_path, content))

    def read(self, filepath: Union[str, Path]) -> List[str]:
        """The lines of ``tmpdir/filepath``."""
        with open(self.tmpdir / filepath) as f:
            return f.readlines()

    def assertDirIsEmpty(self, directory: Union[str, Path]) -> None:
        """``directory`` exists and holds nothing."""
        d = self._in_tmpdir(directory)
        self.assertTrue(d.is_dir(), f"{d} is not a directory")
        self.assertEqual(0, len(list(d.iterdir())), f"{d} is not empty")

    def assertDirTree(self, root: Union[str, Path], tree: Dict[str, object]) -> None:
        """``root`` holds exactly ``tree``: a dict is a directory, a string a file (whose
        stripped content it is, unless empty)."""
        d = self._in_tmpdir(root)
        self.assertTrue(d.is_dir(), f"{d} is not a directory")

        def check(current: Path, subtree: Dict[str, object]) -> None:
            self.assertSetEqual(
                set(subtree),
                {p.name for p in current.iterdir()},
                f"contents of the dir `{current}` do not match the expected",
            )
            for name, value in subtree.items():
                path = current / name
                if isinstance(value, dict):
                    self.assertTrue(path.is_dir(), f"{path} is not a directory")
                    check(path, value)
                    continue
                self.assertTrue(path.is_file(), f"{path} is not a file")
                if value != "":
                    content = path.read_text().strip()
                    self.assertEqual(
                        content, value, f"file {path} content {content!r} does not match expected {value!r}"
                    )

        check(d, tree)

    def create_dir_tree(self, root: str, tree: Dict[str, object]) -> Path:
        """Creates ``tree`` (a dict is a directory, anything else a file of its text) under
        ``tmpdir/root``; that directory."""
        d = self.tmpdir / root
        d.mkdir(parents=True, exist_ok=True)

        def make(current: Path, subtree: Dict[str, object]) -> None:
            for name, value in subtree.items():
                path = current / name
                if isinstance(value, dict):
                    path.mkdir(parents=True, exist_ok=True)
                    make(path, value)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(str(value))

        make(d, tree)
        return d
