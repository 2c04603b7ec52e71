"""``torchx.distributed`` with real PyTorch (CPU, gloo): ranks and devices outside and inside a
process group, and ``on_rank0_first`` ordering two real ranks. PyTorch is installed by CI
(`.ci/run` sets TORCHX_TEST_TORCH); without it these tests skip, and fail when CI promised it."""

import multiprocessing as mp
import os
import time
from typing import List

import pytest

if "torch" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
    import torch  # noqa: F401  (CI installed it: a missing PyTorch is a failure)
else:
    pytest.importorskip("torch")

import torch.distributed as dist
import torchx.distributed as tdist
from torchx.testing.distributed import DistributedTestCase


def test_without_a_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert (tdist.local_rank(), tdist.rank(), tdist.world_size()) == (0, 0, 1)
    assert tdist.is_rank0() and tdist.is_local_rank0()
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("RANK", "7")
    assert (tdist.local_rank(), tdist.rank()) == (3, 7)
    assert str(tdist.local_cuda_device()) == "cuda:3"
    assert tdist.local_device().type in ("cpu", "cuda")


def _rank(r: int, port: int, out: "mp.Queue[str]") -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r))
    dist.init_process_group("gloo", rank=r, world_size=2)
    assert tdist.rank() == r and tdist.world_size() == 2
    assert tdist.local_device().type == "cpu"
    with tdist.on_rank0_first():
        if r == 0:
            time.sleep(0.5)  # rank 1 must still wait for this
        out.put(f"rank{r}")
    dist.destroy_process_group()


def test_rank0_runs_first_in_a_real_group() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out: "mp.Queue[str]" = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, port, out)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    order: List[str] = [out.get(timeout=5) for _ in procs]
    assert order == ["rank0", "rank1"]


def test_init_pg_alone_is_a_group_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    device = tdist.init_pg("gloo")
    try:
        assert device.type == "cpu" and tdist.world_size() == 1 and tdist.is_rank0()
    finally:
        dist.destroy_process_group()


def _rank_and_arg(arg: str) -> str:
    dist.init_process_group(backend="gloo")
    try:
        return f"rank={dist.get_rank()}/{dist.get_world_size()} arg={arg}"
    finally:
        dist.destroy_process_group()


class RunDdpTest(DistributedTestCase):
    """``torchx.testing.distributed`` (the nightly ships it): each rank's result."""

    def test_each_rank_returns_its_result(self) -> None:
        got = self.run_ddp(world_size=2, fn=_rank_and_arg)("hello")
        self.assertDictEqual({0: "rank=0/2 arg=hello", 1: "rank=1/2 arg=hello"}, got)
