"""TorchX's ``Runner``: submits AppDefs and components to schedulers and follows them by app
handle. It drives ``Scheduler`` objects only through the scheduler API, so a Python scheduler
and a builtin (the Rust core's) look the same to it."""

from __future__ import annotations

import os
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

if TYPE_CHECKING:  # annotations only: importing datetime costs every program
    from datetime import datetime

    from torchx.progress import Progress
    from torchx.runner import groups, pipelines, planning

from torchx.runner.events import log_event
from torchx.schedulers import SchedulerFactory, get_scheduler_factories
from torchx.schedulers.api import ListAppResponse, Scheduler, Stream, call_validate
from torchx.settings import (
    ENV_TORCHX_INTERNAL_SESSION_ID,
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
)
from torchx.specs import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppStatus,
    CfgVal,
    Role,
    UnknownAppException,
    UnknownSchedulerException,
    Workspace,
    macros,
    make_app_handle,
    parse_app_handle,
    runopts,
)
from torchx.specs.api import _copy_sharing_overrides
from torchx.util.session import get_session_id_or_create_new


def get_configured_trackers() -> Dict[str, Optional[str]]:
    """Tracker name → config for a launch: ``[torchx:tracker]`` of ``.torchxconfig`` (or
    ``$TORCHX_TRACKERS``), each with ``[tracker:<name>] config`` (or
    ``$TORCHX_TRACKER_<NAME>_CONFIG``); the CLI's rule, from the core."""
    from torchx import _native

    return dict(_native.ext.configured_trackers())


class Runner:
    """Runs apps on schedulers by name; a context manager that closes its schedulers."""

    def __init__(
        self,
        name: str = "",
        scheduler_factories: Optional[Mapping[str, SchedulerFactory]] = None,
        component_defaults: Optional[Dict[str, Dict[str, str]]] = None,
        scheduler_params: Optional[Dict[str, object]] = None,
    ) -> None:
        self._name = name
        if scheduler_factories is None:
            scheduler_factories = get_scheduler_factories()
        self._scheduler_factories = scheduler_factories
        self._scheduler_params: Dict[str, Any] = {
            **self._scheduler_params_from_env(),
            **(scheduler_params or {}),
        }
        self._scheduler_instances: Dict[str, Scheduler[Any]] = {}
        self._apps: Dict[AppHandle, AppDef] = {}
        self._component_defaults = component_defaults or {}

    @staticmethod
    def _scheduler_params_from_env() -> Dict[str, str]:
        # As TorchX: every TORCHX_* variable becomes a scheduler factory argument.
        return {
            key.lower()[len("torchx_") :]: value
            for key, value in os.environ.items()
            if key.lower().startswith("torchx_")
        }

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def close(self) -> None:
        """Closes every scheduler this runner created."""
        for scheduler in self._scheduler_instances.values():
            scheduler.close()
        self._scheduler_instances.clear()

    @property
    def name(self) -> str:
        return self._name

    def run_component(
        self,
        component: str,
        component_args: Union[List[str], Dict[str, Any]],
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Union[Workspace, str, None] = None,
        parent_run_id: Optional[str] = None,
        *,
        array: Optional[str] = None,
        sweep: Optional[Mapping[str, Sequence[object]]] = None,
        sweep_file: Optional[str] = None,
        max_concurrent: Optional[int] = None,
        after: Sequence[str] = (),
    ) -> AppHandle:
        """Builds ``component`` from its arguments and runs it; returns the app handle.
        ``after`` holds it back until those jobs ended as required (see ``dryrun``).

        With ``array`` (``"8"``, ``"0-99%8"``, ``"1-9:2"``), ``sweep`` (a grid:
        ``{"lr": [0.1, 0.01], "bs": [32, 64]}``) or ``sweep_file`` (JSON lines or CSV), runs
        one task per index or point as one group (``max_concurrent`` caps a sweep) and returns
        the group's handle, which ``status``, ``wait``, ``cancel``, ``delete`` and
        ``group_tasks`` take. Each task's arguments may say ``${array_index}`` and
        ``${sweep.KEY}``; its env has ``TORCHX_ARRAY_INDEX``, ``TORCHX_ARRAY_SIZE`` and
        ``TORCHX_SWEEP_<KEY>``.

        ``scheduler="auto:slurm,local_cwd"`` plans the job on each (see ``plan``) and runs it
        on the first whose plan is ``ok``."""
        from torchx.runner import groups, planning

        names = planning.auto_schedulers(scheduler)
        if names is not None:
            if not isinstance(component_args, list):
                raise ValueError("scheduler='auto:...' takes component_args as a list of strings")
            ws = workspace if isinstance(workspace, str) else None
            scheduler = planning.choose(planning.plan(component, component_args, names, cfg, ws))
            cfg = planning.cfg_for(scheduler, cfg)
        spec = groups.GroupSpec(array, sweep or {}, sweep_file, max_concurrent)
        if spec.is_group():
            if after:
                raise ValueError("after= with a group: give the dependency to each job instead")
            return groups.run_group(self, component, component_args, scheduler, cfg, workspace, parent_run_id, spec)
        if max_concurrent is not None:
            raise ValueError("max_concurrent caps a sweep or an array: give one")
        dryrun_info = self.dryrun_component(
            component, component_args, scheduler, cfg, workspace, parent_run_id, after=after
        )
        return self.schedule(dryrun_info)

    def dryrun_component(
        self,
        component: str,
        component_args: Union[List[str], Dict[str, Any]],
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Union[Workspace, str, None] = None,
        parent_run_id: Optional[str] = None,
        *,
        after: Sequence[str] = (),
    ) -> AppDryRunInfo[Any]:
        """``dryrun`` of the AppDef that ``component`` builds from ``component_args``."""
        from torchx.components._builtin import build

        app = build(component, component_args, self._component_defaults.get(component))
        return self.dryrun(app, scheduler, cfg, workspace, parent_run_id, after=after)

    @overload
    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = ...,
        workspace: Union[Workspace, str, None] = ...,
        parent_run_id: Optional[str] = ...,
        *,
        dryrun: Literal[True],
    ) -> AppDryRunInfo[Any]: ...

    @overload
    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = ...,
        workspace: Union[Workspace, str, None] = ...,
        parent_run_id: Optional[str] = ...,
        *,
        dryrun: Literal[False] = ...,
    ) -> AppHandle: ...

    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Union[Workspace, str, None] = None,
        parent_run_id: Optional[str] = None,
        *,
        dryrun: bool = False,
        after: Sequence[str] = (),
    ) -> Union[AppHandle, AppDryRunInfo[Any]]:
        """Runs ``app`` on ``scheduler`` and returns the app handle; with ``dryrun=True``
        returns the request instead, submitting nothing. ``after``: see ``dryrun``.
        ``scheduler="auto:slurm,local_cwd"`` plans the app on each (see ``plan``) and runs it
        on the first whose plan is ``ok`` (``cfg`` keys may say ``S.key`` for scheduler S)."""
        from torchx.runner import planning

        names = planning.auto_schedulers(scheduler)
        if names is not None:
            ws = workspace if isinstance(workspace, str) else None
            scheduler = planning.choose(planning.plan_app(app, names, cfg, ws))
            cfg = planning.cfg_for(scheduler, cfg)
        info = self.dryrun(app, scheduler, cfg, workspace, parent_run_id, after=after)
        return info if dryrun else self.schedule(info)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submits a dry run; returns the app handle."""
        if dryrun_info._scheduler is None or dryrun_info._app is None:
            raise ValueError("schedule() takes what Runner.dryrun returned")
        app_id = self._scheduler(dryrun_info._scheduler).schedule(dryrun_info)
        handle = make_app_handle(dryrun_info._scheduler, self._name, app_id)
        self._apps[handle] = dryrun_info._app
        return handle

    def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Union[Workspace, str, None] = None,
        parent_run_id: Optional[str] = None,
        *,
        after: Sequence[str] = (),
    ) -> AppDryRunInfo[Any]:
        """The scheduler's request for ``app``, not submitted. Like TorchX, it sets the job
        environment (``TORCHX_JOB_ID``, trackers, parent run) on the roles, and a ``workspace`` becomes
        role[0]'s, built by a scheduler that is a ``WorkspaceMixin``; as 0.8's, on a copy of
        ``app`` (the request's ``_app``), never on the caller's.

        ``after``: handles (``HANDLE[:ok|:notok|:any]``, as ``torchx run --after``) of jobs or
        groups that must have ended as required before the job starts (``ok``, the default:
        SUCCEEDED; ``notok``: FAILED or CANCELLED; ``any``: any end). local_cwd and slurm hold
        it (see the README); another scheduler refuses. ``LookupError`` for a dependency no
        scheduler knows."""
        for dep in after:
            handle = dep.rsplit(":", 1)[0] if dep.rsplit(":", 1)[-1] in ("ok", "notok", "any") else dep
            if self.status(handle) is None:
                raise LookupError(f"after={dep!r}: no scheduler knows {handle}")
        app = _copy_sharing_overrides(app)  # 0.8: never the caller's AppDef
        if not app.roles:
            raise ValueError(f"No roles for app: {app.name}. Did you forget to add roles to AppDef?")
        parent_run_id = os.environ.get(ENV_TORCHX_PARENT_RUN_ID, parent_run_id)
        session_id = get_session_id_or_create_new()
        trackers = get_configured_trackers()
        for role in app.roles:
            if not role.entrypoint:
                raise ValueError(
                    f"No entrypoint for role: {role.name}. Did you forget to call role.runs(entrypoint, args, env)?"
                )
            if role.num_replicas <= 0:
                raise ValueError(
                    f"Non-positive replicas for role: {role.name}. Did you forget to set role.num_replicas?"
                )
            role.env[ENV_TORCHX_JOB_ID] = make_app_handle(scheduler, self._name, macros.app_id)
            role.env[ENV_TORCHX_INTERNAL_SESSION_ID] = session_id
            if parent_run_id:
                role.env[ENV_TORCHX_PARENT_RUN_ID] = parent_run_id
            if trackers:
                role.env[ENV_TORCHX_TRACKERS] = ",".join(trackers)
            for tracker, config in trackers.items():
                if config:
                    # Imported on use: the trackers' module loads the plugin registry.
                    from torchx.tracker.api import tracker_config_env_var_name

                    role.env[tracker_config_env_var_name(tracker)] = config
        cfg = cfg or {}
        with log_event(
            "dryrun",
            scheduler,
            cfg=cfg,
            workspace=workspace if isinstance(workspace, str) or workspace is None else str(workspace),
        ):
            sched = self._scheduler(scheduler)
            resolved_cfg = sched.run_opts().resolve(cfg)
            sched._pre_build_validate(app, scheduler, resolved_cfg)
            self._build_workspace(sched, app, workspace, resolved_cfg)
            call_validate(sched, app, scheduler, resolved_cfg)
            dryrun_info = _submit_dryrun_after(sched, app, resolved_cfg, after)
            dryrun_info._scheduler = scheduler
            return dryrun_info

    @staticmethod
    def _build_workspace(
        sched: Scheduler[Any],
        app: AppDef,
        workspace: Union[Workspace, str, None],
        cfg: Mapping[str, CfgVal],
    ) -> None:
        """As 0.8's: a ``workspace`` argument becomes role[0]'s (replacing its own), then a
        ``WorkspaceMixin`` scheduler builds every role that has a workspace. The core's
        schedulers plan role workspaces in ``submit_dryrun`` and build them in ``schedule``."""
        from torchx.schedulers._rust import RustScheduler

        def give_role_0() -> None:
            if workspace:
                app.roles[0].workspace = Workspace.from_str(workspace) if isinstance(workspace, str) else workspace

        # A core scheduler (DockerScheduler is also a DockerWorkspaceMixin) plans its images in
        # the dry run without building them.
        if isinstance(sched, RustScheduler):
            give_role_0()
            return
        from torchx.workspace import WorkspaceMixin

        if isinstance(sched, WorkspaceMixin):
            give_role_0()
            sched.build_workspaces(app.roles, cfg)

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        return self._scheduler(scheduler).run_opts()

    def cfg_from_str(self, scheduler: str, *cfg_literal: str) -> Dict[str, CfgVal]:
        """The run config of ``k=v,...`` literals for ``scheduler`` (later ones win)."""
        opts = self.scheduler_run_opts(scheduler)
        cfg: Dict[str, CfgVal] = {}
        for literal in cfg_literal:
            cfg.update(opts.cfg_from_str(literal))
        return cfg

    def scheduler_backends(self) -> List[str]:
        return list(self._scheduler_factories)

    def status(self, app_handle: AppHandle) -> Optional[AppStatus]:
        """The app's status; ``None`` if its scheduler does not know it. For a group's handle,
        the group's state from its tasks' and their counts as the message; for a pipeline's,
        the pipeline's state and its steps' counts."""
        from torchx.runner import groups, pipelines
        from torchx.runner._named import named

        kind, group = named(app_handle)
        if kind == "pipeline":
            return pipelines.status(app_handle)
        if group is not None:
            return groups.status(self, group)
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        desc = scheduler.describe(app_id)
        if desc is None:
            self._apps.pop(app_handle, None)
            return None
        return AppStatus(
            state=desc.state,
            num_restarts=desc.num_restarts,
            msg=desc.msg,
            structured_error_msg=desc.structured_error_msg,
            ui_url=desc.ui_url,
            roles=desc.roles_statuses,
        )

    def wait(
        self,
        app_handle: AppHandle,
        wait_interval: float = 10,
        timeout: Optional[float] = None,
        progress: Optional[Callable[[Progress], None]] = None,
    ) -> Optional[AppStatus]:
        """Polls ``status`` every ``wait_interval`` seconds until the app ends; ``None`` if it
        is unknown. With ``timeout``, raises ``TimeoutError`` once that many seconds passed.
        For a group, ``progress`` is called after every look with its tasks' ``Progress``."""
        from torchx.progress import Progress
        from torchx.runner import groups, pipelines
        from torchx.runner._named import named

        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        kind, group = named(app_handle) if progress is not None else ("app", None)
        pipeline = kind == "pipeline"
        while True:
            if progress is not None and pipeline:
                states = [s.state for s in pipelines.steps(app_handle)]
                progress(Progress.of(states, time.monotonic() - started))
            if progress is not None and group is not None:
                states = [t.state for t in groups.tasks(self, groups.find(app_handle) or group)]
                progress(Progress.of(states, time.monotonic() - started))
            status = self.status(app_handle)
            if status is None or status.is_terminal():
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{app_handle} did not finish within {timeout}s")
            pause = wait_interval
            if deadline is not None:
                pause = max(0.0, min(pause, deadline - time.monotonic()))
            time.sleep(pause)

    def cancel(self, app_handle: AppHandle) -> None:
        """Cancels the app (nothing happens for an unknown one), every task of a group, or
        every step of a pipeline."""
        from torchx.runner import groups, pipelines
        from torchx.runner._named import named

        kind, group = named(app_handle)
        if kind == "pipeline":
            return pipelines.cancel(app_handle)
        if group is not None:
            return groups.cancel(self, group)
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        scheduler.cancel(app_id)

    def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of ``cancel``."""
        self.cancel(app_handle)

    def delete(self, app_handle: AppHandle) -> None:
        """Deletes the app and what its scheduler keeps of it (a group: every task, then the
        group; a pipeline: every step, then the pipeline)."""
        from torchx.runner import groups, pipelines
        from torchx.runner._named import named

        kind, group = named(app_handle)
        if kind == "pipeline":
            return pipelines.delete(app_handle)
        if group is not None:
            return groups.delete(self, group)
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        scheduler.delete(app_id)

    def run_pipeline(self, source: pipelines.PipelineSource, scheduler: Optional[str] = None) -> AppHandle:
        """Runs a pipeline: ``source`` is a pipeline file (YAML or JSON, as ``torchx run
        ./pipe.yaml`` takes) or its content, ``{"name": ..., "steps": [...]}``; ``scheduler``
        is where steps that name none run (default: the configured one). Every step is
        dry-run first (a bad file or step raises ``ValueError``, and nothing runs). Returns
        the pipeline's handle, which ``status``, ``wait``, ``cancel``, ``delete`` and
        ``pipeline_steps`` take."""
        from torchx.runner import pipelines

        return pipelines.run(source, scheduler)

    def plan(
        self,
        component: str,
        component_args: List[str],
        schedulers: Sequence[str],
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
    ) -> List["planning.PlanRow"]:
        """Checks the job on each scheduler without queueing anything, as ``torchx plan``
        does: one row each with a verdict (``ok``, ``fails``, ``unknown``), every check with
        what to change, and when it would start where the scheduler can tell. ``cfg`` keys
        may say ``S.key`` for scheduler S only."""
        from torchx.runner import planning

        return planning.plan(component, component_args, schedulers, cfg, workspace)

    def pipeline_steps(self, pipeline_handle: AppHandle) -> List[pipelines.PipelineStep]:
        """Each step of the pipeline (name, scheduler, state, job handle, why)."""
        from torchx.runner import pipelines

        return pipelines.steps(pipeline_handle)

    def group_tasks(self, group_handle: AppHandle) -> List[groups.GroupTask]:
        """Each task of the group (index, sweep point, app handle, state)."""
        from torchx.runner import groups

        group = groups.find(group_handle)
        if group is None:
            raise ValueError(f"{group_handle} is an app's handle, not a group's")
        return groups.tasks(self, group)

    def describe(self, app_handle: AppHandle) -> Optional[AppDef]:
        """The app: as this runner submitted it, else as its scheduler knows it (``None`` if
        unknown)."""
        app = self._apps.get(app_handle)
        if app is not None:
            return app
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        desc = scheduler.describe(app_id)
        if desc is None:
            return None
        return AppDef(name=app_id, roles=desc.roles)

    @overload
    def build_workspace(
        self, app_or_role: Role, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None
    ) -> Optional[str]: ...

    @overload
    def build_workspace(
        self, app_or_role: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None
    ) -> Dict[Tuple[str, Workspace], str]: ...

    def build_workspace(
        self, app_or_role: Union[AppDef, Role], scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None
    ) -> Union[Dict[Tuple[str, Workspace], str], str, None]:
        """Builds the roles' workspaces as a submission to ``scheduler`` would (images pushed
        where jobs pull them) and returns what they were built into, without submitting and
        without changing ``app_or_role``: build once, then ``pin_workspace_images`` onto as
        many apps as you submit. For an ``AppDef``, ``{(image, workspace): built image}`` of
        its roles with a workspace (the pair as authored, so it pins onto another ``AppDef``);
        for a ``Role``, its built image or ``None``. Empty (``None``) where ``scheduler`` has
        nothing to prebuild (its jobs read the workspace directory itself), or where a
        builder changed more of a role than its image (it is rebuilt on submit; a warning
        says so)."""
        import copy

        from torchx.schedulers._rust import RustScheduler
        from torchx.workspace.api import WorkspaceMixin

        authored = list(app_or_role.roles) if isinstance(app_or_role, AppDef) else [app_or_role]
        sched = self._scheduler(scheduler)
        roles = copy.deepcopy(authored)
        if isinstance(sched, RustScheduler):
            images = sched.build_workspace_images(AppDef(name="build", roles=roles), cfg or {})
            for role, image in zip(roles, images, strict=True):
                role.image = image
        elif isinstance(sched, WorkspaceMixin):
            sched.build_workspaces(roles, sched.run_opts().resolve(cfg or {}))
        built: Dict[Tuple[str, Workspace], str] = {}
        rebuilt = set()
        for before, after in zip(authored, roles, strict=True):
            if not before.workspace or after.image == before.image:
                continue
            key = (before.image, before.workspace)
            after_but_image = copy.copy(after)
            after_but_image.image, after_but_image.workspace = before.image, before.workspace
            if after_but_image != before:
                import logging

                logging.getLogger(__name__).warning(
                    "role `%s` cannot reuse its build: the `%s` workspace builder changed more "
                    "than `image`, so the workspace is built again on each submit",
                    before.name,
                    scheduler,
                )
                rebuilt.add(key)
                continue
            built[key] = after.image
        for key in rebuilt:
            built.pop(key, None)
        if isinstance(app_or_role, Role):
            return built.get((app_or_role.image, app_or_role.workspace)) if app_or_role.workspace else None
        return built

    def describe_native(self, app_handle: AppHandle) -> Optional[AppDryRunInfo[Any]]:
        """The scheduler-native request of a submitted app, read back from its scheduler (the
        read-side twin of ``dryrun``; unlike ``describe`` it keeps what has no ``AppDef``
        equivalent). ``None`` if the scheduler cannot read it back or the app no longer
        exists."""
        scheduler, scheduler_backend, app_id = self._scheduler_app_id(app_handle)
        info = scheduler.describe_native(app_id)
        if info is not None:
            info._scheduler = scheduler_backend
        return info

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """The log lines of replica ``k`` of ``role_name``; ``UnknownAppException`` if the app
        does not exist."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        if not scheduler.exists(app_id):
            raise UnknownAppException(app_handle)
        return scheduler.log_iter(app_id, role_name, k, regex, since, until, should_tail, streams=streams)

    def list(self, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> List[ListAppResponse]:
        """The apps ``scheduler`` knows, with their handles; ``cfg`` (0.8) reaches schedulers
        that route listings by it (one whose ``list`` takes no config gets none)."""
        sched = self._scheduler(scheduler)
        with log_event("list", scheduler):
            apps = sched.list(cfg) if _takes_cfg(sched.list) else sched.list()  # type: ignore[call-arg]
        for app in apps:
            app.app_handle = make_app_handle(scheduler, self._name, app.app_id)
        return apps

    def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        sched = self._scheduler_instances.get(scheduler)
        if sched is None:
            factory = self._scheduler_factories.get(scheduler)
            if factory is None:
                raise UnknownSchedulerException(scheduler, list(self._scheduler_factories))
            sched = factory(self._name, **self._scheduler_params)
            self._scheduler_instances[scheduler] = sched
        return sched

    def _scheduler_app_id(self, app_handle: AppHandle) -> Tuple[Scheduler[Any], str, str]:
        scheduler_backend, _, app_id = parse_app_handle(app_handle)
        return self._scheduler(scheduler_backend), scheduler_backend, app_id

    def __repr__(self) -> str:
        return f"Runner(name={self._name}, schedulers={self._scheduler_factories}, apps={self._apps})"


def _takes_cfg(list_fn: Any) -> bool:
    """Whether a scheduler's ``list`` accepts a config (0.8's) or none (0.7.0's)."""
    import inspect

    try:
        return bool(inspect.signature(list_fn).parameters)
    except (TypeError, ValueError):
        return True


def get_runner(
    name: Optional[str] = None,
    component_defaults: Optional[Dict[str, Dict[str, str]]] = None,
    **scheduler_params: Any,
) -> Runner:
    """A ``Runner`` over every scheduler of ``torchx.schedulers.get_scheduler_factories()``;
    ``name`` is the session name in app handles (default ``torchx``)."""
    return Runner(
        name=name or "torchx",
        scheduler_factories=get_scheduler_factories(),
        component_defaults=component_defaults,
        scheduler_params=scheduler_params,
    )


def _submit_dryrun_after(
    sched: Scheduler[Any], app: AppDef, cfg: Mapping[str, Any], after: Sequence[str]
) -> AppDryRunInfo[Any]:
    """``sched.submit_dryrun``, holding the job back until ``after`` (a builtin scheduler
    renders the dependencies; a Python one cannot)."""
    if not after:
        return sched.submit_dryrun(app, cfg)
    from torchx.errors import UnsupportedError
    from torchx.schedulers._rust import RustScheduler, waiting_for

    if not isinstance(sched, RustScheduler):
        raise UnsupportedError(
            f"{sched.backend}: after={list(after)!r}: a scheduler written in Python cannot hold a job until others end"
        )
    with waiting_for(after):
        return sched.submit_dryrun(app, cfg)
