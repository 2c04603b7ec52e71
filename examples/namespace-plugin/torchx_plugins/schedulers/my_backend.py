"""The schedulers page's minimal skeleton, made to run: the first role's command runs as a
local process when scheduled; its exit code is the app's state."""

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from torchx.plugins import register
from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, StructuredOpts
from torchx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, ReplicaStatus, RoleStatus, runopts


@dataclass
class MyRequest:
    job_name: str
    cmd: List[str]
    env: Dict[str, str]
    role: str = "app"


@dataclass
class MyOpts(StructuredOpts):
    cluster: str = "default"
    """Name of the cluster to submit to."""

    queue: str = "gpu"
    """Queue / partition for the job."""


def _root() -> str:
    return os.environ.get("TORCHX_MY_BACKEND_DIR") or os.path.expanduser("~/.torchx-my-backend")


class MyScheduler(Scheduler[Mapping[str, CfgVal]]):
    """Runs the first role's command as a local process (a namespace-package plugin)."""

    # One process, nothing to follow: TorchX's defaults for the rest.
    unsupported_capabilities = frozenset(
        {"log_streams", "log_since_until", "log_tail", "mounts", "retries", "multi_role"}
    )

    def __init__(self, session_name: str, **kwargs: object) -> None:
        super().__init__("my_backend", session_name)

    def _run_opts(self) -> runopts:
        return MyOpts.as_runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[MyRequest]:
        MyOpts.from_cfg(cfg)
        role = app.roles[0]
        request = MyRequest(job_name=app.name, cmd=[role.entrypoint, *role.args], env=dict(role.env), role=role.name)
        return AppDryRunInfo(request, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[MyRequest]) -> str:
        request: MyRequest = dryrun_info.request
        app_id = f"{request.job_name}-{uuid.uuid4().hex[:8]}"
        job = os.path.join(_root(), app_id)
        os.makedirs(job)
        with open(os.path.join(job, "out.log"), "wb") as log:
            rc = subprocess.run(
                request.cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **request.env}
            ).returncode
        with open(os.path.join(job, "result.json"), "w") as f:
            json.dump({"name": request.job_name, "role": request.role, "rc": rc}, f)
        return app_id

    def _result(self, app_id: str) -> Optional[Dict[str, Any]]:
        try:
            with open(os.path.join(_root(), app_id, "result.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        result = self._result(app_id)
        if result is None:
            return None
        state = AppState.SUCCEEDED if result["rc"] == 0 else AppState.FAILED
        replica = ReplicaStatus(id=0, state=state, role=result["role"], hostname="localhost")
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            msg=f"exit code {result['rc']}",
            roles_statuses=[RoleStatus(role=result["role"], replicas=[replica])],
        )

    def list(self, cfg: Optional[Mapping[str, CfgVal]] = None) -> List[ListAppResponse]:
        root = _root()
        names = sorted(os.listdir(root)) if os.path.isdir(root) else []
        out = []
        for app_id in names:
            desc = self.describe(app_id)
            if desc is not None:
                out.append(ListAppResponse(app_id=app_id, state=desc.state))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        pass  # it ran to its end when it was scheduled

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Any = None,
        until: Any = None,
        should_tail: bool = False,
        streams: Any = None,
    ) -> List[str]:
        import re

        with open(os.path.join(_root(), app_id, "out.log")) as f:
            lines = f.read().splitlines()
        return [line for line in lines if regex is None or re.search(regex, line)]


@register.scheduler()
def create_scheduler(session_name: str, **kwargs: Any) -> MyScheduler:
    return MyScheduler(session_name)
