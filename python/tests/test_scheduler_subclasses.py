"""TorchX's scheduler classes as base classes, subclassed the way NeMo-Run subclasses them
(overriding a few hooks, inheriting the rest), running real jobs: local processes, the real
Slurm cluster of scripts/slurm/up.sh and the real Docker engine of scripts/docker/up.sh."""

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import pytest
from _engines import docker_up
from torchx.schedulers.api import AppDryRunInfo, DescribeAppResponse, Stream
from torchx.schedulers.docker_scheduler import LABEL_APP_ID, LABEL_REPLICA_ID, LABEL_ROLE_NAME, DockerScheduler
from torchx.schedulers.local_scheduler import (
    COMBINED_LOG,
    CWDImageProvider,
    LocalScheduler,
    PopenRequest,
    _LocalAppDef,
)
from torchx.schedulers.slurm_scheduler import SLURM_STATES, SlurmScheduler
from torchx.specs import AppDef, AppState, Resource, Role, is_terminal

ENGINES = os.environ.get("TORCHX_TEST_ENGINES", "").split(",")


def wait(sched: Any, app_id: str, timeout: float = 120) -> DescribeAppResponse:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        desc = sched.describe(app_id)
        if desc is not None and is_terminal(desc.state):
            return desc
        time.sleep(0.1)
    raise AssertionError(f"{app_id} did not end within {timeout}s: {sched.describe(app_id)}")


# -- local: NeMo-Run's PersistentLocalScheduler shape ------------------------------------------


class PersistentLocal(LocalScheduler):
    """Sets its attributes itself (never calls LocalScheduler.__init__), dry-runs into a
    PopenRequest with ``_to_popen_request``, and remembers what it scheduled."""

    def __init__(self, session_name: str, log_dir: str) -> None:
        self.backend = "local"
        self.session_name = session_name
        self._apps: Dict[str, _LocalAppDef] = {}
        self._image_provider_class = CWDImageProvider
        self._cache_size = 100
        self._extra_paths: List[str] = []
        self._base_log_dir: Optional[str] = None
        self._created_tmp_log_dir = False
        self.log_dir = log_dir
        self.saved: Dict[str, str] = {}

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[PopenRequest]:
        return AppDryRunInfo(self._to_popen_request(app, {"log_dir": self.log_dir}), repr)

    def schedule(self, dryrun_info: AppDryRunInfo[PopenRequest]) -> str:
        app_id = super().schedule(dryrun_info)
        self.saved[app_id] = self._apps[app_id].log_dir
        return app_id


def app(*roles: Role) -> AppDef:
    return AppDef(name="sub", roles=list(roles))


def test_local_subclass_runs_replicas_in_process(tmp_path: Path) -> None:
    sched = PersistentLocal("sess", str(tmp_path / "logs"))
    role = Role(
        "echo", image="", entrypoint="sh", args=["-c", "echo hi from $TORCHX_RANK0_HOST/${replica_id}"], num_replicas=2
    )
    info = sched.submit_dryrun(app(role), {})
    assert isinstance(info.request, PopenRequest)
    app_id = sched.schedule(info)
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED
    assert desc.ui_url == f"file://{sched.saved[app_id]}"
    lines = list(sched.log_iter(app_id, "echo", k=1))
    assert lines == ["hi from localhost/1\n"]
    replica_dir = Path(sched.saved[app_id]) / "echo" / "0"
    assert (replica_dir / COMBINED_LOG).read_text() == "hi from localhost/0\n"
    assert (Path(sched.saved[app_id]) / "SUCCESS").exists()  # closed once it ended


def test_local_subclass_failure_and_cancel(tmp_path: Path) -> None:
    sched = PersistentLocal("sess", str(tmp_path / "logs"))
    failing = sched.schedule(sched.submit_dryrun(app(Role("f", image="", entrypoint="sh", args=["-c", "exit 3"])), {}))
    assert wait(sched, failing).state == AppState.FAILED
    sleeper = sched.schedule(sched.submit_dryrun(app(Role("s", image="", entrypoint="sleep", args=["60"])), {}))
    pid = sched._apps[sleeper].role_replicas["s"][0].proc.pid
    assert sched.describe(sleeper).state == AppState.RUNNING
    sched.cancel(sleeper)
    assert sched.describe(sleeper).state == AppState.CANCELLED
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert sched.describe("no-such-app") is None  # neither in-process nor known to the core
    sched.close()


class AnnotatingLocal(LocalScheduler):
    """Calls LocalScheduler.__init__ and inherits the core path; overrides describe only."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None:
            desc.msg = f"seen by {type(self).__name__}"
        return desc


def test_local_subclass_on_the_core_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sched = AnnotatingLocal("sess")
    role = Role("echo", image="", entrypoint="echo", args=["core path"], resource=Resource(1, 0, 64))
    info = sched.submit_dryrun(app(role), {})
    assert not isinstance(info.request, PopenRequest)
    app_id = sched.schedule(info)
    desc = wait(sched, app_id)
    assert (desc.state, desc.msg) == (AppState.SUCCEEDED, "seen by AnnotatingLocal")
    assert "core path" in "".join(sched.log_iter(app_id, "echo"))


# -- slurm: NeMo-Run's SlurmTunnelScheduler shape ----------------------------------------------


class OwnScriptSlurm(SlurmScheduler):
    """Built as ``SlurmScheduler(session_name)``; renders and submits its own batch script and
    reads sacct with SLURM_STATES; inherits the rest."""

    def __init__(self, session_name: str, job_dir: Path) -> None:
        super().__init__(session_name)
        self.job_dir = job_dir

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[str]:
        role = app.roles[0]
        script = f"#!/bin/bash\n#SBATCH --job-name={app.name}.{role.name}\n#SBATCH --output={self.job_dir}/out-%j.txt\nsrun {role.entrypoint} {' '.join(role.args)}\n"
        return AppDryRunInfo(script, lambda s: s)

    def schedule(self, dryrun_info: AppDryRunInfo[str]) -> str:  # type: ignore[override]
        path = self.job_dir / "job.sbatch"
        path.write_text(dryrun_info.request)
        return subprocess.run(
            ["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=True
        ).stdout.strip()

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        out = subprocess.run(
            ["sacct", "--parsable2", "--noheader", "-X", "-j", app_id, "-o", "State"], capture_output=True, text=True
        ).stdout.split()
        if not out:
            return DescribeAppResponse(app_id=app_id, state=AppState.PENDING)
        state = next(s for name, s in SLURM_STATES.items() if out[0].startswith(name))
        return DescribeAppResponse(app_id=app_id, state=state, msg=out[0])


def require_slurm() -> None:
    if not shutil.which("sbatch"):
        if "slurm" in ENGINES:
            pytest.fail("the Slurm cluster was started for this run but sbatch is missing")
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")


def test_slurm_subclass_with_its_own_script(tmp_path: Path) -> None:
    require_slurm()
    sched = OwnScriptSlurm("sess", tmp_path)
    marker = f"slurm-sub-{uuid.uuid4().hex[:8]}"
    info = sched.submit_dryrun(app(Role("hello", image="", entrypoint="echo", args=[marker])), {})
    job_id = sched.schedule(info)
    desc = wait(sched, job_id, timeout=180)
    assert desc.state == AppState.SUCCEEDED, desc
    assert marker in (tmp_path / f"out-{job_id}.txt").read_text()
    assert "job_dir" in dict(sched.run_opts())  # inherited: the core's slurm options
    assert SLURM_STATES["PREEMPTED"] == AppState.FAILED and SLURM_STATES["REQUEUED"] == AppState.PENDING


class EnvSlurm(SlurmScheduler):
    """Overrides the dry run only (adds an env var) and inherits the core's slurm."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
        for role in app.roles:
            role.env["FROM_SUBCLASS"] = "yes"
        return super()._submit_dryrun(app, cfg)


def test_slurm_subclass_on_the_core_path(tmp_path: Path) -> None:
    require_slurm()
    sched = EnvSlurm("sess")
    role = Role("env", image=str(tmp_path), entrypoint="sh", args=["-c", "echo got=$FROM_SUBCLASS"])
    job_id = sched.schedule(sched.submit_dryrun(app(role), {"job_dir": str(tmp_path)}))
    desc = wait(sched, job_id, timeout=180)
    assert desc.state == AppState.SUCCEEDED, desc
    # As TorchX's slurm: stderr unless stdout is asked for.
    assert "got=yes" in "".join(sched.log_iter(job_id, "env", streams=Stream.STDOUT))


# -- docker: NeMo-Run's PersistentDockerScheduler shape ----------------------------------------


class OwnContainers(DockerScheduler):
    """Starts its own containers with docker-py (TorchX's labels), and describes them with the
    inherited ``_get_containers`` and ``_get_app_state``; ``list`` is inherited."""

    def __init__(self, session_name: str) -> None:
        super().__init__(session_name)
        self.started: List[str] = []

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Dict[str, Any]]:
        return AppDryRunInfo({"id": f"{app.name}-{uuid.uuid4().hex[:8]}", "roles": app.roles}, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[Dict[str, Any]]) -> str:  # type: ignore[override]
        req = dryrun_info.request
        for role in req["roles"]:
            self._docker_client.containers.run(
                role.image,
                [role.entrypoint, *role.args],
                detach=True,
                labels={LABEL_APP_ID: req["id"], LABEL_ROLE_NAME: role.name, LABEL_REPLICA_ID: "0"},
            )
        self.started.append(req["id"])
        return req["id"]

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        states = [self._get_app_state(c) for c in self._get_containers(app_id)]
        if not states:
            return None
        state = (
            AppState.SUCCEEDED
            if all(s == AppState.SUCCEEDED for s in states)
            else next((s for s in states if not is_terminal(s)), AppState.FAILED)
        )
        return DescribeAppResponse(app_id=app_id, state=state)


def test_docker_subclass_with_its_own_containers() -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    sched = OwnContainers("sess")
    ok = sched.schedule(sched.submit_dryrun(app(Role("ok", image="busybox:local", entrypoint="true")), {}))
    bad = sched.schedule(sched.submit_dryrun(app(Role("bad", image="busybox:local", entrypoint="false")), {}))
    try:
        assert wait(sched, ok).state == AppState.SUCCEEDED
        assert wait(sched, bad).state == AppState.FAILED
        assert sched._get_container(ok, "ok", 0).labels[LABEL_APP_ID] == ok
        listed = {a.app_id: a.state for a in sched.list()}  # inherited: the core's list
        assert listed.get(ok) == AppState.SUCCEEDED and listed.get(bad) == AppState.FAILED, listed
    finally:
        for app_id in sched.started:
            for c in sched._get_containers(app_id):
                c.remove(force=True)


def test_docker_subclass_on_the_core_path() -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")

    class Tagged(DockerScheduler):
        def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
            app.roles[0].env["TAG"] = "from-subclass"
            return super()._submit_dryrun(app, cfg)

    sched = Tagged("sess")
    role = Role("t", image="busybox:local", entrypoint="sh", args=["-c", "echo tag=$TAG"])
    app_id = sched.schedule(sched.submit_dryrun(app(role), {}))
    try:
        assert wait(sched, app_id).state == AppState.SUCCEEDED
        assert "tag=from-subclass" in "".join(sched.log_iter(app_id, "t"))
        container = sched._get_container(app_id, "t", 0)  # the core's container, TorchX's labels
        assert sched._get_app_state(container) == AppState.SUCCEEDED
    finally:
        sched.delete(app_id)
