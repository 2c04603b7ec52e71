"""Test fixtures for code that uses TorchX (TorchX's ``torchx.test.fixtures``)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import unittest
from pathlib import Path
from typing import Iterable, List, Union

IS_CI: bool = os.getenv("CI", "false").lower() == "true"


class TestWithTmpDir(unittest.TestCase):
    """A fresh temporary directory per test, ``self.tmpdir``, removed afterwards; with helpers
    to write files and shell scripts in it."""

    def setUp(self) -> None:
        self.tmpdir: Path = Path(tempfile.mkdtemp(prefix=f"torchx-{type(self).__name__}-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def touch(self, filepath: str) -> Path:
        """Creates the empty file ``tmpdir/filepath`` (and its parent directories)."""
        f = self.tmpdir / filepath
        f.parent.mkdir(parents=True, exist_ok=True)
        f.touch()
        return f

    def write(self, filepath: str, content: Iterable[str]) -> Path:
        """Writes ``content`` (lines as given) to ``tmpdir/filepath``."""
        f = self.touch(filepath)
        with open(f, "w") as out:
            out.writelines(content)
        return f

    def write_shell_script(self, script_path: str, content: List[str]) -> Path:
        """An executable bash script ``tmpdir/script_path`` with the lines ``content``."""
        f = self.write(script_path, ["#!/bin/bash\n", *(f"{line}\n" for line in content)])
        f.chmod(f.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return f

    def read(self, filepath: Union[str, Path]) -> List[str]:
        """The lines of ``tmpdir/filepath``."""
        with open(self.tmpdir / filepath) as f:
            return f.readlines()
