"""Arrays and sweeps for ``Runner``: many tasks of one component known by one group handle,
``<scheduler>://<session>/~<group id>``, the same groups ``torchx run --array/--sweep`` makes
(their records are shared). A builtin scheduler submits them natively where it can (one Slurm
job array, ...); a scheduler written in Python gets one submission per task."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Protocol, Sequence, Union

from torchx import _native
from torchx.specs import (
    AppDryRunInfo,
    AppState,
    AppStatus,
    is_terminal,
    make_app_handle,
    parse_app_handle,
)

if TYPE_CHECKING:
    from torchx.schedulers.api import Scheduler
    from torchx.specs import AppDef, CfgVal, Workspace


class GroupRunner(Protocol):
    """What a group asks of ``torchx.runner.Runner`` (which passes itself: this module sits
    below it)."""

    _component_defaults: Dict[str, Dict[str, str]]

    @property
    def name(self) -> str: ...

    def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Union[Workspace, str, None] = None,
        parent_run_id: Optional[str] = None,
    ) -> AppDryRunInfo[Any]: ...

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str: ...

    def status(self, app_handle: str) -> Optional[AppStatus]: ...

    def cancel(self, app_handle: str) -> None: ...

    def _scheduler(self, scheduler: str) -> Scheduler[Any]: ...


# How often a capped group's unfinished tasks are asked about (Python schedulers).
_CAP_POLL = 0.2


@dataclass
class GroupTask:
    """One task of a group: its index, its sweep point, its app handle (``None`` if it could
    not be submitted, then ``error`` says why) and its state."""

    index: int
    params: Dict[str, str]
    handle: Optional[str]
    state: AppState
    error: Optional[str] = None


@dataclass
class GroupSpec:
    """What ``Runner.run_component`` was asked for: ``array`` (``"N"``, ``"A-B[:STEP]"``, each
    with ``%K``), or a sweep's grid (``{"lr": [0.1, 0.01]}``) or file (JSON lines or CSV),
    capped by ``max_concurrent``."""

    array: Optional[str] = None
    sweep: Mapping[str, Sequence[object]] = field(default_factory=dict)
    sweep_file: Optional[str] = None
    max_concurrent: Optional[int] = None

    def is_group(self) -> bool:
        return self.array is not None or bool(self.sweep) or self.sweep_file is not None

    def sweep_args(self) -> List[str]:
        """The grid as ``torchx run --sweep`` arguments (``KEY=V1,V2``)."""
        out = []
        for key, values in self.sweep.items():
            texts = [str(v) for v in values]
            bad = next((t for t in texts if "," in t), None)
            if bad is not None:
                raise ValueError(
                    f"sweep value {bad!r} of {key!r} holds a comma: give such points in a "
                    "sweep_file (JSON lines or CSV)"
                )
            out.append(f"{key}={','.join(texts)}")
        return out


def run_group(
    runner: GroupRunner,
    component: str,
    component_args: Union[List[str], Dict[str, Any]],
    scheduler: str,
    cfg: Optional[Mapping[str, CfgVal]],
    workspace: Union[Workspace, str, None],
    parent_run_id: Optional[str],
    spec: GroupSpec,
) -> str:
    """Builds and dry-runs the component once per task (``${array_index}`` and
    ``${sweep.KEY}`` substituted in its arguments, the task's variables in every role's env),
    submits the tasks as one group and returns its handle."""
    from torchx.components._builtin import build
    from torchx.schedulers._rust import RustRequest, RustScheduler

    keys = list(component_args) if isinstance(component_args, dict) else []
    texts = [str(component_args[k]) for k in keys] if isinstance(component_args, dict) else list(component_args)
    plan = _native.ext.group_plan(texts, spec.array, spec.sweep_args(), spec.sweep_file, spec.max_concurrent)
    infos: List[AppDryRunInfo[Any]] = []
    for task in plan["tasks"]:
        args: Union[List[str], Dict[str, Any]] = (
            dict(zip(keys, task["args"], strict=True)) if keys else list(task["args"])
        )
        app = build(component, args, runner._component_defaults.get(component))
        for role in app.roles:
            role.env.update(task["env"])
        infos.append(runner.dryrun(app, scheduler, cfg, workspace, parent_run_id))
    tasks = [{"index": t["index"], "params": t["params"]} for t in plan["tasks"]]
    about = {
        "component": component,
        "args": texts,
        "spec": plan["spec"],
        "max_concurrent": plan["max_concurrent"],
        "tasks": tasks,
    }
    sched = runner._scheduler(scheduler)
    requests = [i.request for i in infos]
    if isinstance(sched, RustScheduler) and all(isinstance(r, RustRequest) for r in requests):
        handles = [r._handle for r in requests if isinstance(r, RustRequest)]
        record = _native.ext.schedule_group(runner.name, handles, about)
    else:
        record = _schedule_each(runner, infos, about)
    return make_app_handle(record["scheduler"], record["session"], record["group_id"])


def _schedule_each(runner: GroupRunner, infos: List[AppDryRunInfo[Any]], about: Dict[str, Any]) -> Dict[str, Any]:
    """A Python scheduler's group: one submission per task, at most ``max_concurrent``
    unfinished at once, the record saved after each."""
    import secrets

    first = infos[0]
    name = first._app.name if first._app is not None else "group"
    record: Dict[str, Any] = {
        "group_id": f"~{name}-{secrets.token_hex(6)}",
        "scheduler": first._scheduler,
        "session": runner.name,
        "name": name,
        "created": time.time(),
        "spec": about["spec"],
        "max_concurrent": about["max_concurrent"],
        "tasks": [],
        "argv": [],
    }
    cap: Optional[int] = about["max_concurrent"]
    unfinished: List[str] = []
    for task, info in zip(about["tasks"], infos, strict=True):
        while cap is not None and len(unfinished) >= cap:
            unfinished = [h for h in unfinished if not _is_over(runner.status(h))]
            if len(unfinished) >= cap:
                time.sleep(_CAP_POLL)
        handle: Optional[str] = None
        error: Optional[str] = None
        try:
            handle = runner.schedule(info)
            unfinished.append(handle)
        except Exception as e:  # recorded, as the CLI's groups do: one bad task is not all
            error = str(e)
        record["tasks"].append({**task, "handle": handle, "error": error})
        _native.ext.save_group(record)
    return record


def _is_over(status: Optional[AppStatus]) -> bool:
    return status is None or status.is_terminal()


def find(handle: str) -> Optional[Dict[str, Any]]:
    """The record of the group ``handle`` names; ``None`` for an app's handle (a malformed one
    is TorchX's ``MalformedAppHandleException``)."""
    from torchx.runner._named import named

    if not parse_app_handle(handle).app_id.startswith("~"):
        return None
    return named(handle)[1]


def _is_builtin(runner: GroupRunner, record: Dict[str, Any]) -> bool:
    from torchx.schedulers._rust import RustScheduler

    return isinstance(runner._scheduler(record["scheduler"]), RustScheduler)


def tasks(runner: GroupRunner, record: Dict[str, Any]) -> List[GroupTask]:
    """Each task with its state: a builtin scheduler is asked about all at once (a native
    array's in two Slurm calls), a Python one task by task."""
    if _is_builtin(runner, record):
        names = _native.ext.group_states(record)
    else:
        names = []
        for t in record["tasks"]:
            status = runner.status(t["handle"]) if t["handle"] else None
            names.append("FAILED" if t["handle"] is None else status.state.name if status else "UNKNOWN")
    return [
        GroupTask(t["index"], dict(t.get("params", {})), t["handle"], AppState[n], t.get("error"))
        for t, n in zip(record["tasks"], names, strict=True)
    ]


def status(runner: GroupRunner, record: Dict[str, Any]) -> AppStatus:
    """The group as one status: its state from its tasks' (RUNNING while any runs, SUCCEEDED
    only if all did), their counts as the message."""
    states = [t.state.name for t in tasks(runner, record)]
    counts: Dict[str, int] = {}
    for s in sorted(states):
        counts[s] = counts.get(s, 0) + 1
    counted = ", ".join(f"{s} {n}" for s, n in counts.items())
    return AppStatus(
        state=AppState[_native.ext.group_state(states)],
        msg=f"{len(states)} tasks: {counted}",
    )


def cancel(runner: GroupRunner, record: Dict[str, Any]) -> None:
    """Cancels every unfinished task."""
    if _is_builtin(runner, record):
        _native.ext.cancel_group(record)
        return
    for t in tasks(runner, record):
        if t.handle is not None and not is_terminal(t.state):
            runner.cancel(t.handle)


def delete(runner: GroupRunner, record: Dict[str, Any]) -> None:
    """Deletes every task, then the group's record."""
    if _is_builtin(runner, record):
        _native.ext.delete_group(record)
        return
    raise NotImplementedError(
        f"deleting a group of the Python scheduler {record['scheduler']!r}: delete its tasks "
        "(Runner.group_tasks) one by one"
    )
