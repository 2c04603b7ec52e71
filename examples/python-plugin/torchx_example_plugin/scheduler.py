"""A scheduler registered under ``torchx.schedulers`` as ``example_subprocess``: every replica is
a detached local process; jobs are directories under ``$TORCHX_EXAMPLE_DIR`` (default
``~/.torchx-example``), so any process can follow them."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.schedulers.ids import make_unique
from torchx.specs import AppDef, AppDryRunInfo, AppState, ReplicaStatus, RoleStatus, macros, runopts


def _default_root() -> str:
    return os.environ.get("TORCHX_EXAMPLE_DIR") or os.path.expanduser("~/.torchx-example")


@dataclass
class Request:
    root: str
    app_id: str
    replicas: List[Dict[str, Any]]

    def __repr__(self) -> str:
        lines = [f"# {self.app_id} in {self.root}"]
        lines += [f"{r['role']}[{r['id']}]: {shlex.join(r['cmd'])}" for r in self.replicas]
        return "\n".join(lines)


class ExampleSubprocessScheduler(Scheduler[Request]):
    """Runs replicas as detached local processes (an example plugin)."""

    # One log per replica (stdout and stderr together, no timestamps), no restarts, no mounts.
    unsupported_capabilities = frozenset({"log_streams", "log_since_until", "mounts", "retries"})

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("example_subprocess", session_name)

    def _run_opts(self) -> runopts:
        # Plain runopts (not StructuredOpts) so that the plugin also loads with TorchX 0.7.0.
        opts = runopts()
        opts.add("nice", type_=int, default=0, help="niceness added to the replicas' scheduling priority (0-19)")
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Request]:
        nice = int(cfg.get("nice") or 0)
        if not 0 <= nice <= 19:
            raise ValueError(f"run option nice must be 0-19, got {nice}")
        root = _default_root()
        app_id = make_unique(app.name)
        replicas = []
        for role in app.roles:
            for i in range(role.num_replicas):
                values = macros.Values(img_root="", app_id=app_id, replica_id=str(i), rank0_env="TORCHX_RANK0_HOST")
                r = values.apply(role)
                cmd = [r.entrypoint, *r.args]
                if nice:
                    cmd = ["nice", "-n", str(nice), *cmd]
                replicas.append({"role": role.name, "id": i, "cmd": cmd, "env": r.env})
        return AppDryRunInfo(Request(root, app_id, replicas), repr)

    def schedule(self, dryrun_info: AppDryRunInfo[Request]) -> str:
        req = dryrun_info.request
        job = os.path.join(req.root, req.app_id)
        os.makedirs(job)
        for r in req.replicas:
            base = os.path.join(job, f"{r['role']}-{r['id']}")
            script = f"{shlex.join(r['cmd'])}; echo $? > {shlex.quote(base + '.rc')}"
            with open(base + ".log", "wb") as log:
                proc = subprocess.Popen(
                    ["sh", "-c", script],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **r["env"]},
                    start_new_session=True,
                )
            with open(base + ".pid", "w") as f:
                f.write(str(proc.pid))
        with open(os.path.join(job, "app.json"), "w") as f:
            json.dump({"replicas": [{"role": r["role"], "id": r["id"]} for r in req.replicas]}, f)
        return req.app_id

    def _job(self, app_id: str) -> str:
        return os.path.join(_default_root(), app_id)

    def _replica_state(self, job: str, role: str, i: int) -> AppState:
        rc = os.path.join(job, f"{role}-{i}.rc")
        if os.path.exists(os.path.join(job, "cancelled")):
            return AppState.CANCELLED
        if os.path.exists(rc):
            return AppState.SUCCEEDED if open(rc).read().strip() == "0" else AppState.FAILED
        return AppState.RUNNING

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        job = self._job(app_id)
        if not os.path.exists(os.path.join(job, "app.json")):
            return None
        replicas = json.load(open(os.path.join(job, "app.json")))["replicas"]
        roles: Dict[str, RoleStatus] = {}
        states = []
        for r in replicas:
            state = self._replica_state(job, r["role"], r["id"])
            states.append(state)
            roles.setdefault(r["role"], RoleStatus(r["role"], [])).replicas.append(
                ReplicaStatus(r["id"], state, r["role"], "localhost")
            )
        if AppState.CANCELLED in states:
            state = AppState.CANCELLED
        elif AppState.FAILED in states:
            state = AppState.FAILED
        elif all(s == AppState.SUCCEEDED for s in states):
            state = AppState.SUCCEEDED
        else:
            state = AppState.RUNNING
        return DescribeAppResponse(app_id=app_id, state=state, roles_statuses=list(roles.values()))

    def list(self) -> List[ListAppResponse]:
        root = _default_root()
        names = sorted(os.listdir(root)) if os.path.isdir(root) else []
        found = [(n, self.describe(n)) for n in names]
        return [ListAppResponse(app_id=n, state=d.state) for n, d in found if d is not None]

    def _cancel_existing(self, app_id: str) -> None:
        job = self._job(app_id)
        open(os.path.join(job, "cancelled"), "w").close()
        for name in os.listdir(job):
            if name.endswith(".pid"):
                try:
                    os.killpg(int(open(os.path.join(job, name)).read()), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass

    def _delete_existing(self, app_id: str) -> None:
        self._cancel_existing(app_id)
        shutil.rmtree(self._job(app_id), ignore_errors=True)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Any = None,
        until: Any = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        job = self._job(app_id)
        log = os.path.join(job, f"{role_name}-{k}.log")
        with open(log) as f:
            while True:
                line = f.readline()
                if line:
                    yield line
                elif should_tail and self._replica_state(job, role_name, k) == AppState.RUNNING:
                    time.sleep(0.1)
                else:
                    return


def create_scheduler(session_name: str, **kwargs: Any) -> ExampleSubprocessScheduler:
    return ExampleSubprocessScheduler(session_name, **kwargs)
