# Types of the extension module (crates/torchx-py): the core's rules, called from Python. The
# core's data (AppDefs, run options, requests, group records) crosses as plain values in the
# serde shape of the torchx crate (`Any` below: `dict`/`list`/`str`/`int`/`float`/`bool`/`None`);
# errors are ValueError (bad input) or the exception classes the Rust side maps its error kinds to.

import pathlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, final

__all__ = [
    "parse_app_handle",
    "parse_mounts",
    "named_resource_names",
    "named_resource",
    "format_status",
    "substitute",
    "version",
    "state_dir",
    "use_supervisor",
    "slurm_states",
    "docker_container_state",
    "build_component",
    "parse_kv",
    "parse_nnodes",
    "format_error_message",
    "torch_debug_flags",
    "builtin_component_names",
    "configured_trackers",
    "parse_ini",
    "scheduler_backends",
    "run_opts",
    "submit_dryrun",
    "schedule",
    "describe",
    "list",
    "cancel",
    "delete",
    "log_iter",
    "docker_build_workspace",
    "docker_push",
    "group_plan",
    "schedule_group",
    "save_group",
    "find_group",
    "group_states",
    "group_state",
    "cancel_group",
    "delete_group",
    "DryRun",
    "LogChunks",
    "Described",
    "RoleInfo",
    "ReplicaInfo",
    "AttemptInfo",
    "Listed",
]

# -- specs, components, config ---------------------------------------------------------------

def parse_app_handle(handle: str) -> Tuple[str, str, str]: ...
def parse_mounts(opts: List[str], home: Optional[str] = None) -> List[Dict[str, Any]]: ...
def named_resource_names() -> List[str]: ...
def named_resource(name: str) -> Dict[str, Any]: ...
def format_status(
    state: str,
    num_restarts: int,
    msg: str,
    structured_error_msg: str,
    ui_url: Optional[str],
    roles: List[Dict[str, Any]],
    filter_roles: List[str],
) -> str: ...
def substitute(template: str, values: Dict[str, str]) -> str: ...
def build_component(
    name: str, args: List[str], defaults: Optional[Dict[str, str]] = None
) -> Tuple[Optional[Dict[str, Any]], Optional[str]]: ...
def parse_kv(text: str) -> List[Tuple[str, str]]: ...
def format_error_message(msg: str, header: str, width: int) -> str: ...
def parse_nnodes(j: str) -> Tuple[int, int, int, str]: ...
def configured_trackers() -> List[Tuple[str, Optional[str]]]: ...
def parse_ini(text: str, origin: str) -> List[Tuple[str, List[Tuple[str, str]]]]: ...
def builtin_component_names() -> List[str]: ...
def torch_debug_flags() -> List[Tuple[str, str]]: ...
def slurm_states() -> List[Tuple[str, str]]: ...
def docker_container_state(status: str, exit_code: Optional[int] = None) -> str: ...
def version() -> str: ...
def state_dir() -> pathlib.Path: ...
def use_supervisor(path: str) -> None: ...

# -- schedulers -------------------------------------------------------------------------------

@final
class DryRun:
    """A dry run of the core: its request (as data), rendering and each role's image."""

    def request(self) -> Any: ...
    def render(self) -> str: ...
    def role_images(self) -> List[str]: ...

@final
class LogChunks(Iterator[List[str]]):
    """A replica's log lines in chunks (the lines that were ready together), each line with
    its newline."""

    def __iter__(self) -> "LogChunks": ...
    def __next__(self) -> List[str]: ...

def scheduler_backends() -> List[Tuple[str, str]]: ...
def run_opts(name: str) -> List[Dict[str, Any]]: ...
def submit_dryrun(
    name: str,
    session: str,
    app: Dict[str, Any],
    cfg: Dict[str, Any],
    cwd: Optional[str] = None,
    after: Sequence[str] = ...,
) -> DryRun: ...
def schedule(dryrun: DryRun) -> str: ...

@final
class AttemptInfo:
    """One attempt of a replica; ``reason`` is ``None`` while it runs."""

    @property
    def attempt(self) -> int: ...
    @property
    def started(self) -> Optional[float]: ...
    @property
    def ended(self) -> Optional[float]: ...
    @property
    def exit_code(self) -> Optional[int]: ...
    @property
    def signal(self) -> Optional[int]: ...
    @property
    def reason(self) -> Optional[str]: ...

@final
class ReplicaInfo:
    """One replica's status (``state``: an ``AppState`` name)."""

    @property
    def id(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def hostname(self) -> str: ...
    @property
    def structured_error_msg(self) -> str: ...
    @property
    def attempts(self) -> List[AttemptInfo]: ...

@final
class RoleInfo:
    """A role's replicas."""

    @property
    def role(self) -> str: ...
    @property
    def replicas(self) -> List[ReplicaInfo]: ...

@final
class Described:
    """``Scheduler.describe``'s answer; the roles in their AppDef shape."""

    @property
    def app_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def num_restarts(self) -> int: ...
    @property
    def msg(self) -> str: ...
    @property
    def structured_error_msg(self) -> str: ...
    @property
    def ui_url(self) -> Optional[str]: ...
    @property
    def roles_statuses(self) -> List[RoleInfo]: ...
    @property
    def roles(self) -> List[Dict[str, Any]]: ...

@final
class Listed:
    """One app of ``Scheduler.list``."""

    @property
    def app_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def name(self) -> str: ...

def describe(name: str, app_id: str) -> Optional[Described]: ...
def list(name: str) -> List[Listed]: ...
def cancel(name: str, app_id: str) -> None: ...
def delete(name: str, app_id: str) -> None: ...
def log_iter(
    name: str,
    app_id: str,
    role_name: str,
    k: int = 0,
    regex: Optional[str] = None,
    since: Optional[float] = None,
    until: Optional[float] = None,
    should_tail: bool = False,
    streams: Optional[str] = None,
) -> LogChunks: ...
def docker_build_workspace(scheduler: str, base_image: str, workspace: str, quiet: bool) -> str: ...
def docker_push(scheduler: str, local: str, repo: str, tag: str) -> None: ...

# -- groups (arrays and sweeps) ----------------------------------------------------------------

def group_plan(
    args: List[str],
    array: Optional[str] = None,
    sweep: List[str] = ...,
    sweep_file: Optional[str] = None,
    max_concurrent: Optional[int] = None,
) -> Dict[str, Any]: ...
def schedule_group(session: str, dryruns: List[DryRun], plan: Dict[str, Any]) -> Dict[str, Any]: ...
def save_group(record: Dict[str, Any]) -> None: ...
def find_group(handle: str) -> Optional[Dict[str, Any]]: ...
def group_states(record: Dict[str, Any]) -> List[str]: ...
def group_state(states: List[str]) -> str: ...
def cancel_group(record: Dict[str, Any]) -> None: ...
def delete_group(record: Dict[str, Any]) -> None: ...
