"""The example's one collective: the world size computed by all-reducing one-hot ranks."""

from __future__ import annotations

import os
from typing import Any


def compute_world_size(cfg: Any) -> int:
    """Initializes the default process group (``cfg.main``: ``backend``, and the rank, world
    size and master address used when torchrun has not set them) and returns the world size
    computed by an all-reduce, which must equal the group's."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    main = cfg.main
    os.environ.setdefault("RANK", str(main.rank))
    os.environ.setdefault("WORLD_SIZE", str(main.world_size))
    os.environ.setdefault("MASTER_ADDR", str(main.master_addr))
    os.environ.setdefault("MASTER_PORT", str(main.master_port))

    print(f"initializing `{main.backend}` process group")
    dist.init_process_group(backend=main.backend)
    print("successfully initialized process group")
    try:
        rank, world_size = dist.get_rank(), dist.get_world_size()
        ones = F.one_hot(torch.tensor(rank), num_classes=world_size)
        dist.all_reduce(ones)
        computed = int(torch.sum(ones).item())
        print(f"rank: {rank}, actual world_size: {world_size}, computed world_size: {computed}")
        return computed
    finally:
        dist.destroy_process_group()
