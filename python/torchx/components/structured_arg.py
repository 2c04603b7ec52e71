"""Structured component arguments, as TorchX's ``torchx.components.structured_arg``: one
human-friendly argument that carries several values (``--name experiment/run``,
``-j {nnodes}x{nproc_per_node}``), parsed the same way by every component that uses them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from torchx import specs


@dataclass
class StructuredNameArgument:
    """``{experiment_name}/{run_name}``."""

    experiment_name: str
    run_name: str

    def __str__(self) -> str:
        return f"{self.experiment_name or ''}/{self.run_name}"

    @staticmethod
    def parse_from(
        name: str,
        m: Optional[str] = None,
        script: Optional[str] = None,
        default_experiment_name: str = "default-experiment",
    ) -> "StructuredNameArgument":
        """Experiment and run names from ``name`` (``exp/run``, ``exp/``, ``/run``, ``run`` or
        ``/``); an empty run name is the main module's last part or the script's stem.
        ``ValueError`` unless exactly one of ``m`` and ``script`` is given."""
        if not m and not script:
            raise ValueError("No main module or script specified. Specify either a main module or a script path")
        if m and script:
            raise ValueError(
                "Both main module and script set. Specify exactly one of: main module or script, but not both"
            )
        experiment, sep, run = name.partition("/")
        if not sep:
            experiment, run = "", name
        if not run:
            run = m.rpartition(".")[2] if m else Path(script or "").stem
        return StructuredNameArgument(experiment or default_experiment_name, run)


@dataclass
class StructuredJArgument:
    """``{nnodes}x{nproc_per_node}``."""

    nnodes: int
    nproc_per_node: int

    def __str__(self) -> str:
        return f"{self.nnodes}x{self.nproc_per_node}"

    @staticmethod
    def parse_from(h: str, j: str) -> "StructuredJArgument":
        """Nodes and processes per node from ``j`` for host type ``h`` (a named resource).
        ``-j N`` uses the host's GPU count as ``nproc_per_node`` (``ValueError`` for a host
        without GPUs); ``-j NxP`` warns when ``P`` differs from the GPU count."""
        parts = j.split("x")
        num_gpus = specs.resource(h=h).gpu
        if len(parts) == 1:
            nnodes = int(parts[0])
            if num_gpus <= 0:
                raise ValueError(
                    f"nproc_per_node cannot be inferred from GPU count. `{h}` is not a GPU"
                    f" instance. You must specify `-j $NNODESx$NPROCS_PER_NODE`"
                    f" (e.g. `-j {nnodes}x8`)"
                )
            nproc_per_node = num_gpus
        elif len(parts) == 2:
            nnodes, nproc_per_node = int(parts[0]), int(parts[1])
            if nproc_per_node != num_gpus:
                warnings.warn(
                    f"In `-j {j}` you specified nproc_per_node={nproc_per_node} which does not"
                    f" equal the number of GPUs on a {h}: {num_gpus}. This may lead to"
                    " under-utilization or an error. If this was intentional, ignore this"
                    f" warning. Otherwise set `-j {nnodes}` to auto-set nproc_per_node to the"
                    " number of GPUs on the host.",
                    stacklevel=2,
                )
        else:
            raise ValueError(f"Invalid format for `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j 1x8`). Given: {j}")
        return StructuredJArgument(nnodes=nnodes, nproc_per_node=nproc_per_node)
