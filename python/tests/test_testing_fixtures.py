"""``torchx.testing.fixtures`` (the nightly ships it; ``DistributedTestCase`` is tested in
``test_distributed.py``, with real PyTorch)."""

from __future__ import annotations

import os
import subprocess

from torchx.testing.fixtures import IS_MACOS, TestWithTmpDir, write_shell_script


class TmpDirFixtureTest(TestWithTmpDir):
    def test_files_trees_and_scripts(self) -> None:
        self.create_dir_tree("out", {"README.md": "hi", "pkg": {"__init__.py": "", "v.py": "1.0"}})
        self.assertDirTree("out", {"README.md": "hi", "pkg": {"__init__.py": "", "v.py": "1.0"}})
        with self.assertRaises(AssertionError):
            self.assertDirTree("out", {"README.md": "other", "pkg": {"__init__.py": "", "v.py": "1.0"}})
        with self.assertRaises(AssertionError):
            self.assertDirTree("out", {"README.md": "hi"})
        self.mkdir("empty")
        self.assertDirIsEmpty("empty")
        self.assertDirIsEmpty(self.tmpdir / "empty")
        with self.assertRaises(AssertionError):
            self.assertDirIsEmpty("out")
        script = self.write_shell_script("bin/hello.sh", ["echo hello", "echo world"])
        assert script == self.tmpdir / "bin" / "hello.sh"
        assert subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout == "hello\nworld\n"
        assert self.read("bin/hello.sh")[0] == "#! /bin/bash\n"
        self.write("a/b.txt", ["x\n", "y\n"])
        assert self.read("a/b.txt") == ["x\n", "y\n"]


def test_module_level_write_shell_script(tmp_path: "os.PathLike[str]") -> None:
    path = write_shell_script(str(tmp_path), "s.sh", ["exit 3"])
    assert os.access(path, os.X_OK)
    assert subprocess.run([path]).returncode == 3
    assert isinstance(IS_MACOS, bool)


def test_the_0_7_module_is_the_same() -> None:
    import torchx.test.fixtures as old
    import torchx.testing.fixtures as new

    assert old.TestWithTmpDir is new.TestWithTmpDir
