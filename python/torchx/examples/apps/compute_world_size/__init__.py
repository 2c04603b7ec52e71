"""Compute world size: a "hello world" of PyTorch Distributed that validates a scheduler's
distributed setup without training anything: it initializes the process group and all-reduces
one tensor, whose sum is the world size. Run it with the builtin ``dist.ddp`` component::

    torchx run -s local_cwd dist.ddp -j 2x2 -m torchx.examples.apps.compute_world_size.main

``main`` reads ``config/defaults.yaml`` and takes Hydra-style overrides (``main.backend=nccl``,
``main.throws=true``); ``module.util.compute_world_size`` is in a sub-package so that the example
also exercises workspaces that copy a whole project.
"""
