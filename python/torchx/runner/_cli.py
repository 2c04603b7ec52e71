"""The ``torchx`` command of this environment, for what the Python API asks of it (pipelines,
plans): run it, and turn its failure into TorchX's exception types."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import subprocess


def torchx(args: Sequence[str]) -> "subprocess.CompletedProcess[str]":
    import subprocess

    from torchx._bin import find_torchx_bin

    binary = find_torchx_bin()
    if binary is None:
        raise RuntimeError("pipelines and plans need the `torchx` command of this package, and none was found")
    return subprocess.run([binary, *args], capture_output=True, text=True, check=False)


def raise_for(done: "subprocess.CompletedProcess[str]") -> None:
    if done.returncode == 0:
        return
    message = done.stderr.strip().removeprefix("torchx: error: ")
    if done.returncode in (2, 3, 4):
        raise ValueError(message)
    raise RuntimeError(message)
