"""A test case that runs a function on several local processes under ``torch.distributed``
(TorchX's ``torchx.testing.distributed``; importing it imports PyTorch)."""

from __future__ import annotations

from typing import Callable, Dict, TypeVar

from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from torchx.testing.fixtures import TestWithTmpDir

Ret = TypeVar("Ret")


class DistributedTestCase(TestWithTmpDir):
    """``self.run_ddp(world_size, fn)(*args)`` runs ``fn(*args)`` on ``world_size`` local
    processes (torchelastic, c10d on a free port) and returns each rank's result; ``fn`` must
    initialise the process group itself (e.g. ``dist.init_process_group("gloo")``)."""

    def run_ddp(self, world_size: int, fn: Callable[..., Ret]) -> Callable[..., Dict[int, Ret]]:
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=world_size,
            rdzv_backend="c10d",
            rdzv_endpoint="localhost:0",
            max_restarts=0,
            monitor_interval=0.01,
        )
        launch: Callable[..., Dict[int, Ret]] = elastic_launch(config, entrypoint=fn)
        return launch
