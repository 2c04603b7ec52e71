"""Test fixtures and helpers for projects that build on TorchX, shipped in the package (as
TorchX's nightly ships them): ``torchx.testing.fixtures`` and ``torchx.testing.distributed``."""
