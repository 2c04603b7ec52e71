"""Small file helpers, as TorchX's ``torchx.util.io``."""

from __future__ import annotations


def read_conf_file(path: str) -> str:
    """The text of the file at ``path``."""
    with open(path, "r") as f:
        return f.read()
