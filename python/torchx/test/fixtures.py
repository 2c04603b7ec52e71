"""Test fixtures for code that uses TorchX: TorchX 0.7's ``torchx.test.fixtures``, the same as
``torchx.testing.fixtures``, where the nightly ships them."""

from torchx.testing.fixtures import IS_CI, IS_MACOS, TestWithTmpDir, write_shell_script

__all__ = ["IS_CI", "IS_MACOS", "TestWithTmpDir", "write_shell_script"]
