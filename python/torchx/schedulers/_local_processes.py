"""TorchX's in-process local scheduler machinery, for subclasses of ``LocalScheduler`` that use
its hooks (NeMo-Run's ``PersistentLocalScheduler``): ``_to_popen_request`` turns an AppDef into
a :class:`PopenRequest`, ``schedule`` of one starts each replica as a child process of this
Python process (its own session, output to ``stdout.log``/``stderr.log``/``combined.log`` under
``<log_dir>/<session>/<app_id>/<role>/<replica>``) and keeps it in ``self._apps``; ``describe``,
``log_iter`` (a :class:`LogIterator`), ``_cancel_existing`` and ``close`` act on those. The
contracts are TorchX 0.7.0's.

``LocalScheduler``'s own path (``local_cwd`` through the Runner and the CLI) is the core's
supervised, persistent one; this path is taken only for a ``PopenRequest``."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Dict, Iterator, List, Mapping, Optional, Protocol, TextIO, Tuple

from torchx.specs import NONE, AppDef, AppState, is_terminal, macros

if TYPE_CHECKING:
    from torchx.schedulers.api import DescribeAppResponse, Scheduler
    from torchx.schedulers.streams import Tee

log: logging.Logger = logging.getLogger(__name__)

STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
COMBINED_LOG = "combined.log"
NA: str = "<N/A>"
ENV_CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"

AppId = str
AppName = str
RoleName = str

# How long ``_LocalAppDef.kill`` waits after SIGTERM before SIGKILL.
_KILL_GRACE_SECONDS = 10


@dataclass
class ReplicaParam:
    """What ``subprocess.Popen`` is given for one replica."""

    args: List[str]
    env: Dict[str, str]
    stdout: Optional[str] = None
    stderr: Optional[str] = None
    combined: Optional[str] = None
    cwd: Optional[str] = None


@dataclass
class PopenRequest:
    """The processes of an app: each role's replicas and their log directories."""

    app_id: AppId
    log_dir: str
    role_params: Dict[RoleName, List[ReplicaParam]]
    role_log_dirs: Dict[RoleName, List[str]]


class PopenProtocol(Protocol):
    """What the scheduler needs of a started replica (``subprocess.Popen`` is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> Optional[int]: ...

    def wait(self, timeout: Optional[float] = None) -> int: ...

    def poll(self) -> Optional[int]: ...

    def kill(self) -> None: ...


@dataclass
class _LocalReplica:
    """A running replica: its process and its open log files."""

    role_name: RoleName
    replica_id: int
    proc: PopenProtocol
    stdout: Optional[BinaryIO]
    stderr: Optional[BinaryIO]
    combined: "Optional[Tee]"
    error_file: str

    def terminate(self) -> None:
        """SIGTERM to the replica's process group, and its log files closed (idempotent)."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            log.debug("replica process %s is already gone", self.proc.pid)
        for stream in (self.stdout, self.stderr, self.combined):
            if stream is not None:
                stream.close()

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def failed(self) -> bool:
        return not self.is_alive() and self.proc.returncode != 0


class _LocalAppDef:
    """The replicas of one app, by role, and the app's last known state."""

    def __init__(self, id: str, log_dir: str) -> None:
        self.id = id
        self.log_dir = log_dir
        self.role_replicas: Dict[RoleName, List[_LocalReplica]] = {}
        self.state: AppState = AppState.PENDING
        self.last_updated: float = -1

    def add_replica(self, role_name: str, replica: _LocalReplica) -> None:
        self.role_replicas.setdefault(role_name, []).append(replica)

    def set_state(self, state: AppState) -> None:
        self.last_updated = time.time()
        self.state = state

    def _replicas(self) -> Iterator[_LocalReplica]:
        for replicas in self.role_replicas.values():
            yield from replicas

    def kill(self) -> None:
        """Stops every replica: SIGTERM to each process group, SIGKILL to what is still there
        after a grace period; closes the log files (idempotent)."""
        for replica in self._replicas():
            replica.terminate()
        deadline = time.monotonic() + _KILL_GRACE_SECONDS
        for replica in self._replicas():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                replica.proc.wait(left)
            except subprocess.TimeoutExpired:
                pass
        for replica in self._replicas():
            if replica.proc.poll() is None:
                replica.proc.kill()
            replica.proc.wait()
            replica.terminate()

    def _get_error_file(self) -> Optional[str]:
        """The earliest written torchelastic error file of the replicas."""
        written = [
            (os.path.getmtime(r.error_file), r.error_file) for r in self._replicas() if os.path.exists(r.error_file)
        ]
        return min(written)[1] if written else None

    def get_structured_error_msg(self) -> str:
        error_file = self._get_error_file()
        if not error_file:
            return NONE
        with open(error_file) as f:
            return json.dumps(json.load(f))

    def close(self) -> None:
        """Kills the app and writes ``<log_dir>/SUCCESS``: the app's final state and each
        replica's pid, exit code and files, for whoever reads the logs."""
        self.kill()

        def name(stream: Optional[BinaryIO]) -> str:
            return str(stream.name) if stream is not None else "<CONSOLE>"

        info = {
            "app_id": self.id,
            "log_dir": self.log_dir,
            "final_state": self.state.name,
            "last_updated": self.last_updated,
            "roles": {
                role: [
                    {
                        "replica_id": r.replica_id,
                        "pid": r.proc.pid,
                        "exitcode": r.proc.returncode,
                        "stdout": name(r.stdout),
                        "stderr": name(r.stderr),
                        "error_file": r.error_file,
                    }
                    for r in replicas
                ]
                for role, replicas in self.role_replicas.items()
            },
        }
        with open(os.path.join(self.log_dir, "SUCCESS"), "w") as f:
            f.write(json.dumps(info, indent=2))

    def __repr__(self) -> str:
        pids = {role: [r.proc.pid for r in replicas] for role, replicas in self.role_replicas.items()}
        return f"{{app_id:{self.id}, state:{self.state}, pid_map:{pids}}}"


def _join_PATH(*paths: Optional[str]) -> str:
    """PATH entries joined with ``:``, empty ones dropped and each stripped of ``:``s."""
    return os.pathsep.join(p.strip(os.pathsep) for p in paths if p)


class LogIterator:
    """The lines of a replica's log file as it is written: waits for the file to appear, and
    for more lines until ``scheduler.describe(app_id)`` says the app ended (or is unknown).
    Yields chunks as read (``split_lines_iterator`` makes lines of them)."""

    _CHUNK = 64000
    _POLL_SECONDS = 0.1

    def __init__(self, app_id: str, log_file: str, scheduler: "Scheduler[Any]", should_tail: bool = True) -> None:
        self._app_id = app_id
        self._log_file = log_file
        self._log_fp: Optional[TextIO] = None
        self._scheduler = scheduler
        self._app_finished = not should_tail

    def _check_finished(self) -> None:
        desc = self._scheduler.describe(self._app_id)
        self._app_finished = desc is None or is_terminal(desc.state)

    def __iter__(self) -> "LogIterator":
        while True:
            self._check_finished()
            if os.path.isfile(self._log_file):
                self._log_fp = open(self._log_file, mode="rt", newline="\n", errors="replace")  # noqa: SIM115
                return self
            if self._app_finished:
                raise RuntimeError(f"app: {self._app_id} finished without writing: {self._log_file}")
            time.sleep(self._POLL_SECONDS)

    def __next__(self) -> str:
        log_fp = self._log_fp
        if log_fp is None:
            raise RuntimeError("LogIterator is not iterated (call iter() first)")
        while True:
            chunk = log_fp.read(self._CHUNK)
            if chunk:
                return chunk
            if self._app_finished:
                log_fp.close()
                raise StopIteration
            time.sleep(self._POLL_SECONDS)
            self._check_finished()


class ProcessLauncher:
    """The in-process hooks of TorchX's ``LocalScheduler`` (see the module's docstring). The
    class using it provides ``session_name``, ``_apps``, ``_image_provider_class``,
    ``_cache_size``, ``_extra_paths``, ``_base_log_dir`` and ``_created_tmp_log_dir``."""

    session_name: str
    _apps: Dict[AppId, _LocalAppDef]
    _image_provider_class: Any
    _cache_size: int
    _extra_paths: List[str]
    _base_log_dir: Optional[str]
    _created_tmp_log_dir: bool

    # -- requests ---------------------------------------------------------------------------

    def _get_app_log_dir(self, app_id: str, cfg: Mapping[str, Any]) -> str:
        """``<log_dir>/<session>/<app_id>``; without a ``log_dir`` a temporary one (removed by
        ``close``)."""
        self._base_log_dir = cfg.get("log_dir")
        if not self._base_log_dir:
            self._base_log_dir = tempfile.mkdtemp(prefix="torchx_")
            self._created_tmp_log_dir = True
            log.info(
                "log_dir is not set: logging to a temporary directory that is deleted when the"
                " scheduler closes (set the `log_dir` run option to keep it)"
            )
        log.info("Log directory is: %s", self._base_log_dir)
        return os.path.join(str(self._base_log_dir), self.session_name, app_id)

    def _to_popen_request(self, app: AppDef, cfg: Mapping[str, Any]) -> PopenRequest:
        """The processes of ``app``: each replica's command (``macros`` substituted, the image
        provider's entrypoint and directory), environment (``TORCHX_RANK0_HOST``, a torchelastic
        error file, the extra paths and the image directory on PATH) and log files."""
        from torchx.schedulers.ids import make_unique

        app_id = make_unique(app.name)
        provider = self._image_provider_class(cfg)
        app_log_dir = self._get_app_log_dir(app_id, cfg)
        role_params: Dict[str, List[ReplicaParam]] = {}
        role_log_dirs: Dict[str, List[str]] = {}
        for role in app.roles:
            params = role_params.setdefault(role.name, [])
            log_dirs = role_log_dirs.setdefault(role.name, [])
            img_root = provider.fetch_role(role)
            role.env["PATH"] = _join_PATH(*self._extra_paths, role.env.get("PATH"))
            cwd = provider.get_cwd(role.image)
            if cwd:
                before = bool(cfg.get("prepend_cwd"))
                role.env["PATH"] = _join_PATH(cwd, role.env["PATH"]) if before else _join_PATH(role.env["PATH"], cwd)
            for replica_id in range(role.num_replicas):
                values = macros.Values(
                    img_root=img_root,
                    app_id=app_id,
                    replica_id=str(replica_id),
                    rank0_env="TORCHX_RANK0_HOST",
                )
                replica = values.apply(role)
                replica.env["TORCHX_RANK0_HOST"] = "localhost"
                replica_dir = os.path.join(app_log_dir, role.name, str(replica_id))
                replica.env.setdefault("TORCHELASTIC_ERROR_FILE", os.path.join(replica_dir, "error.json"))
                replica.env.setdefault("PET_LOG_DIR", os.path.join(app_log_dir, "torchelastic", role.name))
                params.append(
                    provider.get_replica_param(
                        img_root,
                        replica,
                        os.path.join(replica_dir, STDOUT_LOG),
                        os.path.join(replica_dir, STDERR_LOG),
                        os.path.join(replica_dir, COMBINED_LOG),
                    )
                )
                log_dirs.append(replica_dir)
        self.auto_set_CUDA_VISIBLE_DEVICES(role_params, app, cfg)
        return PopenRequest(app_id, app_log_dir, role_params, role_log_dirs)

    def _cuda_device_count(self) -> int:
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            log.debug("no GPUs listed by nvidia-smi: %s", e)
            return 0
        return sum(1 for line in listed.stdout.splitlines() if line)

    def auto_set_CUDA_VISIBLE_DEVICES(
        self, role_params: Dict[str, List[ReplicaParam]], app: AppDef, cfg: Mapping[str, Any]
    ) -> None:
        """With ``auto_set_cuda_visible_devices``, gives each replica of a GPU role its own
        ``CUDA_VISIBLE_DEVICES`` (``resource.gpu`` devices each, in order), if this host has
        enough devices for all of them."""
        requested = sum(role.num_replicas * role.resource.gpu for role in app.roles)
        if requested <= 0:
            return
        if not cfg.get("auto_set_cuda_visible_devices"):
            log.warning(
                "replicas that use GPUs run without CUDA_VISIBLE_DEVICES: several may share a"
                " device (set the `auto_set_cuda_visible_devices` run option to divide them)"
            )
            return
        available = self._cuda_device_count()
        if requested > available:
            log.warning("CUDA_VISIBLE_DEVICES is not set: %d GPUs requested, %d available", requested, available)
            return
        next_device = 0
        for role in app.roles:
            if role.resource.gpu <= 0:
                continue
            for replica in role_params[role.name]:
                devices = range(next_device, next_device + role.resource.gpu)
                replica.env[ENV_CUDA_VISIBLE_DEVICES] = ",".join(str(d) for d in devices)
                next_device += role.resource.gpu

    # -- processes --------------------------------------------------------------------------

    def _evict_lru(self) -> bool:
        """Forgets the app that ended longest ago; False if every app still runs."""
        ended = [(app.last_updated, app_id) for app_id, app in self._apps.items() if is_terminal(app.state)]
        if not ended:
            log.debug("no app evicted: all %d apps are running", len(self._apps))
            return False
        del self._apps[min(ended)[1]]
        return True

    def _get_file_io(self, file: Optional[str]) -> Optional[io.FileIO]:
        """``file`` opened for unbuffered writing (its directory created); ``FileExistsError``
        if it exists."""
        if not file:
            return None
        if os.path.isfile(file):
            raise FileExistsError(
                f"log file: {file} already exists, specify a different log_dir, app_name, or remove the file and retry"
            )
        os.makedirs(os.path.dirname(file), exist_ok=True)
        return io.open(file, mode="wb", buffering=0)

    def _get_replica_output_handles(
        self, replica_params: ReplicaParam
    ) -> "Tuple[Optional[io.FileIO], Optional[io.FileIO], Optional[Tee]]":
        from torchx.schedulers.streams import Tee

        stdout = self._get_file_io(replica_params.stdout)
        stderr = self._get_file_io(replica_params.stderr)
        combined_file = self._get_file_io(replica_params.combined)
        combined = None
        if combined_file is not None:
            if not (replica_params.stdout and replica_params.stderr):
                raise ValueError("a combined log needs both the stdout and stderr files")
            combined = Tee(combined_file, replica_params.stdout, replica_params.stderr)
        return stdout, stderr, combined

    def _get_replica_env(self, replica_params: ReplicaParam) -> Dict[str, str]:
        """This process's environment, the replica's on top, its PATH before ours."""
        env = {**os.environ, **replica_params.env}
        env["PATH"] = _join_PATH(replica_params.env.get("PATH"), os.getenv("PATH"))
        env.setdefault("PYTHONUNBUFFERED", "x")
        return env

    def _popen(self, role_name: RoleName, replica_id: int, replica_params: ReplicaParam) -> _LocalReplica:
        """Starts one replica in its own session, its output to its log files."""
        stdout, stderr, combined = self._get_replica_output_handles(replica_params)
        log.debug("running %s (replica %d): %s", role_name, replica_id, asdict(replica_params))
        env = self._get_replica_env(replica_params)
        proc = subprocess.Popen(
            args=replica_params.args,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            cwd=replica_params.cwd,
        )
        return _LocalReplica(
            role_name,
            replica_id,
            proc,
            stdout=stdout,
            stderr=stderr,
            combined=combined,
            error_file=env.get("TORCHELASTIC_ERROR_FILE", NA),
        )

    def _schedule_popen(self, request: PopenRequest) -> str:
        if "_apps" not in self.__dict__:
            self._apps = {}  # never the class's shared default
        if len(self._apps) >= self._cache_size and not self._evict_lru():
            raise IndexError(f"App cache size ({self._cache_size}) exceeded. Increase the cache size")
        if request.app_id in self._apps:
            raise ValueError(f"app `{request.app_id}` was already scheduled")
        os.makedirs(request.log_dir)
        app = _LocalAppDef(request.app_id, request.log_dir)
        try:
            for role_name, params in request.role_params.items():
                for replica_id, (replica, replica_dir) in enumerate(
                    zip(params, request.role_log_dirs[role_name], strict=True)
                ):
                    os.makedirs(replica_dir)
                    app.add_replica(role_name, self._popen(role_name, replica_id, replica))
        except BaseException:
            app.kill()  # nothing half-started is left behind
            raise
        self._apps[request.app_id] = app
        return request.app_id

    def _describe_popen(self, app_id: str) -> "Optional[DescribeAppResponse]":
        from torchx.schedulers.api import DescribeAppResponse

        app = self._apps.get(app_id)
        if app is None:
            return None
        structured_error_msg = app.get_structured_error_msg()
        if not is_terminal(app.state):
            replicas = list(app._replicas())
            if any(r.is_alive() for r in replicas):
                app.set_state(AppState.RUNNING)
            elif any(r.failed() for r in replicas):
                app.set_state(AppState.FAILED)
            else:
                app.set_state(AppState.SUCCEEDED)
            if is_terminal(app.state):
                app.close()
        resp = DescribeAppResponse()
        resp.app_id = app_id
        resp.structured_error_msg = structured_error_msg
        resp.state = app.state
        resp.num_restarts = 0
        resp.ui_url = f"file://{app.log_dir}"
        return resp

    def _log_file(self, app_id: str, role_name: str, k: int, streams: Any) -> str:
        from torchx.schedulers.api import Stream

        files = {
            None: COMBINED_LOG,
            Stream.COMBINED: COMBINED_LOG,
            Stream.STDOUT: STDOUT_LOG,
            Stream.STDERR: STDERR_LOG,
        }
        path = os.path.join(self._apps[app_id].log_dir, role_name, str(k), files[streams])
        if not os.path.isfile(path):
            raise RuntimeError(
                f"app: {app_id} was not configured to log into a file."
                " Did you run it with log_dir set in Dict[str, CfgVal]?"
            )
        return path

    def _close_popen(self) -> None:
        for app in getattr(self, "_apps", {}).values():
            app.kill()
        if getattr(self, "_created_tmp_log_dir", False) and getattr(self, "_base_log_dir", None):
            import shutil

            shutil.rmtree(str(self._base_log_dir), ignore_errors=True)


__all__ = [
    "COMBINED_LOG",
    "STDERR_LOG",
    "STDOUT_LOG",
    "AppId",
    "LogIterator",
    "PopenRequest",
    "ReplicaParam",
    "_LocalAppDef",
    "_LocalReplica",
    "_join_PATH",
]
