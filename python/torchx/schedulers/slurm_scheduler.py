"""The ``slurm`` scheduler (the Rust core's), as TorchX's ``torchx.schedulers.slurm_scheduler``:
:class:`SlurmScheduler` (``SlurmScheduler(session_name)``, usable as a base class: NeMo-Run's
``SlurmTunnelScheduler`` overrides its I/O and inherits the rest) and ``SLURM_STATES``, the
core's mapping of Slurm job states."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from torchx.schedulers._rust import RustScheduler, typed_opts_getattr
from torchx.specs import AppDef

SLURM_JOB_DIRS = ".torchxslurmjobdirs"


class SlurmScheduler(RustScheduler):
    """``slurm``: one ``sbatch`` (heterogeneous for several roles) per app."""

    _core = "slurm"

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("slurm", session_name, **kwargs)

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None) -> None:
        pass  # as TorchX's: roles need no resource (the partition's defaults apply)


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    return SlurmScheduler(session_name, **kwargs)


_typed_opts = typed_opts_getattr("slurm", ("SlurmOpts", "Opts"), __name__)


def __getattr__(name: str) -> Any:
    if name == "SLURM_STATES":
        from torchx import _native
        from torchx.specs import AppState

        return {slurm: AppState[state] for slurm, state in _native.ext.slurm_states()}
    return _typed_opts(name)
