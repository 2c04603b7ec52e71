"""The ``local_docker`` scheduler (the Rust core's), as TorchX's
``torchx.schedulers.docker_scheduler``: :class:`DockerScheduler` and its hooks for subclasses
(NeMo-Run's ``PersistentDockerScheduler`` inherits ``list`` and calls ``_get_app_state`` and
``_docker_client``). The core renders, starts, describes, logs and stops the containers; the
hooks read the same containers through docker-py (the labels are TorchX's), imported on use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from torchx.schedulers._rust import RustScheduler, typed_opts_getattr
from torchx.specs import AppDef, AppState
from torchx.workspace.docker_workspace import DockerWorkspaceMixin

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

LABEL_VERSION: str = DockerWorkspaceMixin.LABEL_VERSION
LABEL_APP_ID: str = "torchx.pytorch.org/app-id"
LABEL_ROLE_NAME: str = "torchx.pytorch.org/role-name"
LABEL_REPLICA_ID: str = "torchx.pytorch.org/replica-id"
NETWORK = "torchx"


@dataclass
class DockerContainer:
    """One container of a request: its image, command and ``containers.run`` arguments."""

    image: str
    command: List[str]
    kwargs: Dict[str, object]


@dataclass
class DockerJob:
    app_id: str
    containers: List[DockerContainer]

    def __str__(self) -> str:
        import yaml

        return str(yaml.dump(self.containers))

    def __repr__(self) -> str:
        return str(self)


def has_docker() -> bool:
    """Whether docker-py is installed and reaches an engine."""
    try:
        import docker

        docker.from_env()
        return True
    except Exception:
        return False


def ensure_network(client: "Optional[DockerClient]" = None) -> None:
    """Creates TorchX's ``torchx`` bridge network unless it exists (safe across processes)."""
    import os
    import tempfile

    import filelock
    from docker.errors import APIError

    if client is None:
        import docker

        client = docker.from_env()
    # networks.create's duplicate check races: one creator at a time.
    with filelock.FileLock(os.path.join(tempfile.gettempdir(), "torchx_docker_network_lock"), timeout=10):
        try:
            client.networks.create(name=NETWORK, driver="bridge", check_duplicate=True)
        except APIError as e:
            if "already exists" not in str(e):
                raise


def _to_str(a: Union[str, bytes]) -> str:
    return a.decode("utf-8") if isinstance(a, bytes) else a


def __getattr__(name: str) -> Any:
    if name == "CONTAINER_STATE":
        # Docker container status -> AppState (the core's table; ``exited`` depends on the
        # exit code and is decided by ``_get_app_state``).
        from torchx import _native

        statuses = ("created", "restarting", "running", "paused", "removing", "dead")
        return {s: AppState[_native.ext.docker_container_state(s)] for s in statuses}
    return _typed_opts(name)


_typed_opts = typed_opts_getattr("local_docker", ("Opts", "DockerOpts"), __name__)


class DockerScheduler(DockerWorkspaceMixin, RustScheduler):
    """``local_docker``: ``DockerScheduler(session_name)`` as TorchX's, usable as a base class."""

    _core = "local_docker"

    def __init__(self, session_name: str, docker_client: "Optional[DockerClient]" = None) -> None:
        super().__init__("local_docker", session_name, docker_client=docker_client)

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None) -> None:
        pass  # as TorchX's: roles need no resource

    def _get_app_state(self, container: "Container") -> AppState:
        """A docker-py container's state: ``exited`` is SUCCEEDED with exit code 0."""
        from torchx import _native

        exit_code = None
        if container.status == "exited":
            exit_code = container.wait(timeout=10)["StatusCode"]
        return AppState[_native.ext.docker_container_state(container.status, exit_code)]

    def _get_containers(self, app_id: str) -> "List[Container]":
        found: "List[Container]" = self._docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"}
        )
        return found

    def _get_container(self, app_id: str, role: str, replica_id: int) -> "Container":
        labels = [f"{LABEL_APP_ID}={app_id}", f"{LABEL_ROLE_NAME}={role}", f"{LABEL_REPLICA_ID}={replica_id}"]
        found = self._docker_client.containers.list(all=True, filters={"label": labels})
        if len(found) != 1:
            what = "no container" if not found else f"{len(found)} containers"
            raise RuntimeError(f"found {what} for {app_id}/{role}/{replica_id}")
        return found[0]


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    return DockerScheduler(session_name, docker_client=kwargs.get("docker_client"))
