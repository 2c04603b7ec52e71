"""The public helper of TorchX's ``torchx.cli.cmd_status`` that scripts call. The ``torchx
status`` command itself is the native binary's."""

from __future__ import annotations

from typing import List, Optional


def parse_list_arg(arg: str) -> Optional[List[str]]:
    """``"a,b"`` as ``["a", "b"]``; None for an empty argument."""
    return arg.split(",") if arg else None


__all__ = ["parse_list_arg"]
