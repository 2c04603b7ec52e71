"""Pipelines for ``Runner``: steps on their own schedulers, each run once the steps it runs
after ended as it requires, known by one handle ``pipeline://<session>/<id>``. They are the
pipelines of ``torchx run ./pipe.yaml`` (the same file format, the same records): this module
asks the ``torchx`` command of this environment, whose detached holder submits the steps."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Union

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


def _status_json(handle: str) -> Optional[Mapping[str, Any]]:
    done = _torchx(["status", "--json", handle])
    if done.returncode == 4:
        return None
    _raise_for(done)
    result: Mapping[str, Any] = json.loads(done.stdout)
    return result


def status(handle: str) -> Optional[AppStatus]:
    """The pipeline's state, its steps' counts as the message; ``None`` if it is not recorded
    here."""
    record = _status_json(handle)
    if record is None:
        return None
    counts = ", ".join(f"{state} {n}" for state, n in record["counts"].items())
    return AppStatus(state=AppState[record["state"]], msg=f"{len(record['steps'])} steps: {counts}")


def steps(handle: str) -> List[PipelineStep]:
    """Each step of the pipeline with its state."""
    record = _status_json(handle)
    if record is None:
        raise ValueError(f"{handle}: no such pipeline is recorded here")
    return [
        PipelineStep(
            name=s["name"],
            scheduler=s["scheduler"],
            state=AppState[s["state"]],
            handle=s["handle"],
            msg=s["msg"],
        )
        for s in record["steps"]
    ]


def cancel(handle: str) -> None:
    """No step starts any more; every submitted step not yet over is cancelled (nothing
    happens for a pipeline not recorded here)."""
    done = _torchx(["cancel", handle])
    if done.returncode != 4:
        _raise_for(done)


def delete(handle: str) -> None:
    """Cancels the pipeline, deletes its steps' jobs where their schedulers can, and forgets
    it."""
    _raise_for(_torchx(["delete", handle]))
