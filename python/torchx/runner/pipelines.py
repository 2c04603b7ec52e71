"""Pipelines for ``Runner``: steps on their own schedulers, each run once the steps it runs
after ended as it requires, known by one handle ``pipeline://<session>/<id>``. They are the
pipelines of ``torchx run ./pipe.yaml`` (the same file format, the same records). A pipeline
is started by the ``torchx`` command of this environment, whose detached holder submits the
steps; its status, steps, cancel and delete are the core's, through the extension."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Union

from torchx import _native
from torchx.runner._cli import raise_for as _raise_for, torchx as _torchx
from torchx.specs import AppState, AppStatus

#: What ``Runner.run_pipeline`` takes: a pipeline file's path, or its content (a mapping with
#: ``name`` and ``steps``).
PipelineSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]

SCHEME = "pipeline://"


@dataclass
class PipelineStep:
    """One step of a pipeline: its name, scheduler, state, job handle (``None`` until it is
    submitted, or if it never runs) and why it waits or did not run."""

    name: str
    scheduler: str
    state: AppState
    handle: Optional[str]
    msg: str


def is_pipeline(handle: str) -> bool:
    """Whether ``handle`` names a pipeline."""
    return handle.startswith(SCHEME)


def run(source: PipelineSource, scheduler: Optional[str] = None) -> str:
    """Checks every step (a bad file or step raises ``ValueError`` and nothing runs), records
    the pipeline, starts its holder and returns the pipeline's handle."""
    args = ["run", "--detach", "--json"]
    if scheduler is not None:
        args += ["--scheduler", scheduler]
    if isinstance(source, Mapping):
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="torchx-pipeline-", delete=False) as f:
            json.dump(dict(source), f)
        try:
            done = _torchx([*args, f.name])
        finally:
            os.unlink(f.name)
    else:
        done = _torchx([*args, os.fspath(source)])
    _raise_for(done)
    handle: str = json.loads(done.stdout)["handle"]
    return handle


def status(handle: str) -> Optional[AppStatus]:
    """The pipeline's state, its steps' counts as the message; ``None`` if it is not recorded
    here."""
    found = _native.ext.pipeline_status(handle)
    if found is None:
        return None
    state, msg = found
    return AppStatus(state=AppState[state], msg=msg)


def steps(handle: str) -> List[PipelineStep]:
    """Each step of the pipeline with its state."""
    found = _native.ext.pipeline_steps(handle)
    if found is None:
        raise ValueError(f"{handle}: no such pipeline is recorded here")
    return [
        PipelineStep(name=name, scheduler=scheduler, state=AppState[state], handle=job, msg=msg)
        for name, scheduler, state, job, msg in found
    ]


def cancel(handle: str) -> None:
    """No step starts any more; every submitted step not yet over is cancelled (nothing
    happens for a pipeline not recorded here)."""
    _native.ext.cancel_pipeline(handle)


def delete(handle: str) -> None:
    """Cancels the pipeline, deletes its steps' jobs where their schedulers can, and forgets
    it."""
    if not _native.ext.delete_pipeline(handle):
        raise ValueError(f"{handle}: no such pipeline is recorded here")
