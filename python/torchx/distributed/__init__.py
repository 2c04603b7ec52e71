"""Helpers for distributed PyTorch programs that TorchX launches (``torchrun``/``dist.ddp``): which
rank and device this process is, setting up the process group, running a block on rank 0 first.
PyTorch is imported when a helper needs it, not with this module."""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Literal, Optional

if TYPE_CHECKING:
    import torch

Backend = Literal["nccl", "gloo", "auto"]


def _dist() -> Optional[Any]:
    """``torch.distributed`` when PyTorch is installed and its default group is initialized."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def local_rank() -> int:
    """This process's rank on its host: ``$LOCAL_RANK`` (set by torchrun), else 0 (with a
    warning when a process group exists, which suggests a launcher that did not set it)."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if _dist() is not None:
        warnings.warn(
            "The default torch.distributed process group is initialized but the `LOCAL_RANK`"
            " environment variable is not set: local_rank() returns 0. Run the script with"
            " torchrun or torchx (e.g. the dist.ddp component), or set LOCAL_RANK.",
            stacklevel=2,
        )
    return 0


def local_cuda_device() -> "torch.device":
    """``cuda:<local rank>``."""
    import torch

    return torch.device(f"cuda:{local_rank()}")


def local_device() -> "torch.device":
    """The device this process should use: its local CUDA device under an NCCL group, the CPU
    under another group; without a group, CUDA if the host has a GPU, else the CPU."""
    import torch

    from torchx.util.cuda import has_cuda_devices

    dist = _dist()
    if dist is not None:
        from torch.distributed.distributed_c10d import _get_default_group

        return local_cuda_device() if _get_default_group().name() == "nccl" else torch.device("cpu")
    return torch.device("cuda") if has_cuda_devices() else torch.device("cpu")


def rank() -> int:
    """The global rank: the process group's, else ``$RANK`` (default 0)."""
    dist = _dist()
    return int(dist.get_rank()) if dist is not None else int(os.getenv("RANK", "0"))


def world_size() -> int:
    """The number of processes: the process group's, else ``$WORLD_SIZE`` (default 1)."""
    dist = _dist()
    return int(dist.get_world_size()) if dist is not None else int(os.getenv("WORLD_SIZE", "1"))


def is_rank0() -> bool:
    return rank() == 0


def is_local_rank0() -> bool:
    return local_rank() == 0


def init_pg(backend: Backend = "auto", **kwargs: Any) -> "torch.device":
    """Initializes the default process group and returns this process's device. ``auto`` picks
    NCCL when the host has a GPU (and PyTorch has NCCL), else Gloo. Outside torchrun it makes
    a group of one (this process, a free port on localhost)."""
    import torch
    import torch.distributed as dist

    if backend == "auto":
        gpus = torch.cuda.is_available() and torch.cuda.device_count() > 0
        backend = "nccl" if gpus and dist.is_nccl_available() else "gloo"
    if dist.is_torchelastic_launched():
        dist.init_process_group(backend=backend, **kwargs)
    else:
        os.environ["MASTER_ADDR"] = "localhost"
        os.environ["MASTER_PORT"] = "0"
        dist.init_process_group(backend=backend, rank=0, world_size=1, **kwargs)
    return local_cuda_device() if backend == "nccl" else torch.device("cpu")


@contextmanager
def _first(lead: bool) -> Iterator[None]:
    dist = _dist()
    if dist is not None and not lead:
        dist.barrier()  # wait for the leader to finish the block
    try:
        yield
    finally:
        if dist is not None and lead:
            dist.barrier()  # release the others


@contextmanager
def on_rank0_first() -> Iterator[None]:
    """Runs the block on rank 0 first, then on the other ranks (e.g. a download every rank
    reads); without a process group it just runs the block."""
    with _first(is_rank0()):
        yield


@contextmanager
def on_local_rank0_first() -> Iterator[None]:
    """As :func:`on_rank0_first`, per host: local rank 0 first."""
    with _first(is_local_rank0()):
        yield


def __getattr__(name: str) -> Any:
    # `torch` and `torch.distributed` (as `dist`) are this module's attributes in TorchX (code and
    # tests patch `torchx.distributed.dist.get_rank`); here they load on first use.
    if name == "torch":
        import torch

        return torch
    if name == "dist":
        import torch.distributed

        return torch.distributed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
