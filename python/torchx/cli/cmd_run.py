"""The public helpers of TorchX's ``torchx.cli.cmd_run`` that scripts call: the arguments of a
run as data (``TorchXRunArgs``), from JSON or from parsed command-line arguments. The ``torchx
run`` command itself is the native binary's."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from torchx.specs import CfgVal

MISSING_COMPONENT_ERROR_MSG = "missing component name, either provide it from the CLI or in .torchxconfig"

LOCAL_SCHEDULER_WARNING_MSG = (
    "`local` scheduler is deprecated and will be removed in the near future,"
    " please use other variants of the local scheduler (e.g. `local_cwd`)"
)


@dataclass
class TorchXRunArgs:
    """What ``torchx run`` runs: the component and its arguments, the scheduler and its
    options, and how to follow the app."""

    component_name: str
    scheduler: str
    scheduler_args: Dict[str, Any]
    scheduler_cfg: Dict[str, CfgVal] = field(default_factory=dict)
    dryrun: bool = False
    wait: bool = False
    log: bool = False
    workspace: str = ""
    parent_run_id: Optional[str] = None
    tee_logs: bool = False
    component_args: Dict[str, Any] = field(default_factory=dict)
    component_args_str: List[str] = field(default_factory=list)


def torchx_run_args_from_json(json_data: Dict[str, Any]) -> TorchXRunArgs:
    """``TorchXRunArgs`` of a JSON object; ``ValueError`` naming the missing required fields or
    the fields a run does not have. An empty ``workspace`` is the current directory."""
    names = [f.name for f in fields(TorchXRunArgs)]
    required = {f.name for f in fields(TorchXRunArgs) if f.default is MISSING and f.default_factory is MISSING}
    missing = sorted(required - json_data.keys())
    if missing:
        raise ValueError(f"The following required fields are missing: {', '.join(missing)}")
    extra = sorted(set(json_data) - set(names))
    if extra:
        raise ValueError(
            f"The following fields are not part of the run command: {', '.join(extra)}.",
            "Please check your JSON and try launching again.",
        )
    args = TorchXRunArgs(**json_data)
    if args.workspace == "":
        args.workspace = str(Path.cwd())
    return args


def torchx_run_args_from_argparse(
    args: argparse.Namespace,
    component_name: str,
    component_args: List[str],
    scheduler_cfg: Dict[str, CfgVal],
) -> TorchXRunArgs:
    """``TorchXRunArgs`` of ``torchx run``'s parsed options."""
    return TorchXRunArgs(
        component_name=component_name,
        scheduler=args.scheduler,
        scheduler_args={},
        scheduler_cfg=scheduler_cfg,
        dryrun=args.dryrun,
        wait=args.wait,
        log=args.log,
        workspace=args.workspace,
        parent_run_id=args.parent_run_id,
        tee_logs=args.tee_logs,
        component_args_str=component_args,
    )


__all__ = [
    "LOCAL_SCHEDULER_WARNING_MSG",
    "MISSING_COMPONENT_ERROR_MSG",
    "TorchXRunArgs",
    "torchx_run_args_from_argparse",
    "torchx_run_args_from_json",
]
