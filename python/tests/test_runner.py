"""torchx.runner over the Rust core: TorchX's documented workflows on local_cwd (jobs shared
with the `torchx` CLI), dry runs for cluster schedulers, a Python scheduler beside the
builtins, and TorchX's exception types."""

import dataclasses
import json
import subprocess
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional

import pytest
from torchx import specs
from torchx.runner import Runner, get_runner
from torchx.schedulers import get_default_scheduler_name, get_scheduler_factories
from torchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
    split_lines,
)
from torchx.specs import AppDef, AppDryRunInfo, AppState, Role


def cli(torchx_bin: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([torchx_bin, *args], capture_output=True, text=True, timeout=120)


def test_runner_lifecycle_on_local_cwd() -> None:
    with get_runner() as runner:
        handle = runner.run_component("utils.echo", ["--msg", "hello from python"], "local_cwd")
        assert handle.startswith("local_cwd://torchx/echo-")
        status = runner.wait(handle, wait_interval=0.05)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        status.raise_for_status()
        lines = list(runner.log_lines(handle, "echo", k=0))
        assert lines == ["hello from python\n"]
        assert list(runner.log_lines(handle, "echo", regex="^nomatch")) == []
        assert handle in [a.app_handle for a in runner.list("local_cwd")]
        described = runner.describe(handle)
        assert described is not None and described.roles[0].entrypoint == "echo"


def test_log_lines_as_torchx_yields_them() -> None:
    """Every line with its newline, across the chunks the core hands out; a last line without
    one gets one; undecodable bytes are U+FFFD; a regex filters."""
    script = "seq 1 200000; printf 'caf\\303\\251 \\377\\n'; printf 'last'"
    with get_runner() as runner:
        handle = runner.run_component("utils.sh", ["sh", "-c", script], "local_cwd")
        status = runner.wait(handle, wait_interval=0.05, timeout=120)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        lines = list(runner.log_lines(handle, "sh", k=0))
        assert len(lines) == 200002
        assert lines[:2] == ["1\n", "2\n"] and lines[199999] == "200000\n"
        assert lines[-2:] == ["caf\u00e9 \ufffd\n", "last\n"]
        assert list(runner.log_lines(handle, "sh", regex="^19999[0-9]$")) == [f"19999{i}\n" for i in range(10)]


def test_appdef_built_directly_with_macros_and_env() -> None:
    role = Role(
        name="worker",
        image="ignored",
        entrypoint="sh",
        args=["-c", "echo rank=$0 greeting=$GREETING", specs.macros.replica_id],
        env={"GREETING": "hi"},
        num_replicas=2,
    )
    runner = get_runner()
    handle = runner.run(AppDef("direct", roles=[role]), scheduler="local_cwd")
    status = runner.wait(handle, wait_interval=0.05)
    assert status is not None and status.state == AppState.SUCCEEDED
    assert [r.id for r in status.roles[0].replicas] == [0, 1]
    assert list(runner.log_lines(handle, "worker", k=1)) == ["rank=1 greeting=hi\n"]
    # As 0.8's, the runner sets the job id on its copy, never on the caller's AppDef.
    assert "TORCHX_JOB_ID" not in role.env
    submitted = runner.describe(handle)
    assert submitted is not None
    assert submitted.roles[0].env["TORCHX_JOB_ID"] == "local_cwd://torchx/${app_id}"


def test_jobs_are_shared_with_the_cli(torchx_bin: str) -> None:
    runner = get_runner()
    handle = runner.run_component("utils.sh", ["sleep", "60"], scheduler="local_cwd")
    listed = cli(torchx_bin, "list", "--json")
    assert handle in [a["app_handle"] for a in json.loads(listed.stdout)], listed.stderr
    cancelled = cli(torchx_bin, "cancel", handle)
    assert cancelled.returncode == 0, cancelled.stderr
    status = runner.status(handle)
    assert status is not None and status.state == AppState.CANCELLED
    # And the reverse: a CLI job is visible to the runner.
    out = cli(torchx_bin, "run", "utils.echo", "--msg", "from the cli")
    assert out.returncode == 0, out.stderr
    cli_handle = out.stdout.strip()
    status = runner.status(cli_handle)
    assert status is not None and status.state == AppState.SUCCEEDED
    assert list(runner.log_lines(cli_handle, "echo")) == ["from the cli\n"]
    logged = cli(torchx_bin, "log", handle)
    assert logged.returncode == 0, logged.stderr


def test_dryrun_for_a_cluster_scheduler() -> None:
    runner = get_runner()
    info = runner.dryrun_component(
        "dist.ddp",
        ["--script", "train.py", "-j", "2x2"],
        scheduler="slurm",
        cfg={"partition": "x", "slurm_version": "24.11"},
    )
    assert isinstance(info, AppDryRunInfo)
    text = repr(info)
    assert "#SBATCH" in text and "--partition=x" in text, text
    assert info._scheduler == "slurm" and info._cfg["partition"] == "x"
    assert isinstance(info.request.to_json(), dict)
    # A changed request is refused, never silently dropped.
    info.request.data["hacked"] = True
    with pytest.raises(ValueError, match="was changed after submit_dryrun"):
        runner.schedule(info)


def test_run_options_and_errors() -> None:
    runner = get_runner()
    opts = runner.scheduler_run_opts("local_cwd")
    assert opts.get("log_dir") is not None and opts.get("log_dir").opt_type is str
    assert opts.get("prepend_cwd").opt_type is bool
    assert runner.cfg_from_str("local_cwd", "prepend_cwd=true") == {"prepend_cwd": True}
    # As TorchX's nightly (0.7 dropped it): an unknown key raises, naming the valid options.
    with pytest.raises(specs.InvalidRunConfigException, match="Unknown run option `unknown`. Valid options are: "):
        runner.cfg_from_str("local_cwd", "prepend_cwd=true,unknown=1")
    with pytest.raises(specs.InvalidRunConfigException, match="prepend_cwd"):
        runner.dryrun_component("utils.echo", [], "local_cwd", cfg={"prepend_cwd": "yes"})
    with pytest.raises(KeyError, match="Scheduler backend: nope does not exist"):
        runner.run_component("utils.echo", [], "nope")
    with pytest.raises(specs.MalformedAppHandleException):
        runner.status("not-a-handle")
    assert runner.status("local_cwd://torchx/nope-123") is None
    with pytest.raises(specs.UnknownAppException):
        runner.log_lines("local_cwd://torchx/nope-123", "echo")
    with pytest.raises(ValueError, match="No roles for app"):
        runner.dryrun(AppDef("empty"), "local_cwd")
    with pytest.raises(ValueError):
        runner.run_component("utils.echo", ["--nope", "x"], "local_cwd")
    assert "local_cwd" in runner.scheduler_backends()
    assert get_default_scheduler_name() == "local_docker"
    assert set(get_scheduler_factories()) >= {"local_cwd", "slurm", "kubernetes", "aws_batch"}


# The scheduler skeleton of TorchX's schedulers documentation, in memory.
@dataclasses.dataclass
class MyRequest:
    app: AppDef
    cfg: Mapping[str, Any]


class MyScheduler(Scheduler[Mapping[str, Any]]):
    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("my_scheduler", session_name)
        self.apps: Dict[str, AppState] = {}

    def _run_opts(self) -> specs.runopts:
        opts = specs.runopts()
        opts.add("cluster", type_=str, help="where to run", required=True)
        opts.add("priority", type_=int, help="job priority", default=1)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
        return AppDryRunInfo(MyRequest(app, cfg), repr)

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        app_id = f"{dryrun_info.request.app.name}-{len(self.apps)}"
        self.apps[app_id] = AppState.RUNNING
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id not in self.apps:
            return None
        return DescribeAppResponse(app_id=app_id, state=self.apps[app_id])

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=s) for a, s in self.apps.items()]

    def _cancel_existing(self, app_id: str) -> None:
        self.apps[app_id] = AppState.CANCELLED

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
        lines = ["one\n", "two\n"]
        return filter_regex(regex, lines) if regex else lines


def test_a_python_scheduler_beside_the_builtins() -> None:
    factories = {**get_scheduler_factories(), "my_scheduler": MyScheduler}
    runner = Runner("mine", factories)
    app = AppDef("hello", roles=[Role("r", image="i", entrypoint="echo", resource=specs.resource(cpu=1))])
    with pytest.raises(specs.InvalidRunConfigException, match="cluster"):
        runner.run(app, "my_scheduler", cfg={})
    handle = runner.run(app, "my_scheduler", cfg={"cluster": "c1"})
    assert handle == "my_scheduler://mine/hello-0"
    assert runner.status(handle).state == AppState.RUNNING
    assert [a.app_handle for a in runner.list("my_scheduler")] == [handle]
    assert list(runner.log_lines(handle, "r", regex="tw")) == ["two\n"]
    runner.cancel(handle)
    assert runner.status(handle).state == AppState.CANCELLED
    info = runner.dryrun(app, "my_scheduler", cfg={"cluster": "c1"})
    assert info.request.cfg == {"cluster": "c1", "priority": 1}
    # A builtin on the same runner.
    assert runner.run(app, "local_cwd").startswith("local_cwd://mine/")
    assert split_lines("a\nb") == ["a\n", "b"]


def test_new_session_ids_are_version_4_uuids() -> None:
    import uuid

    from torchx.util.session import _new_id

    ids = {_new_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)


def test_a_recorded_dry_run_event_carries_its_run_options_as_json() -> None:
    import logging

    seen: List[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    events = logging.getLogger("torchx-events-null")
    keep = Keep()
    events.addHandler(keep)
    level = events.level
    events.setLevel(logging.INFO)
    try:
        app = AppDef(name="e", roles=[Role(name="r", image="/tmp", entrypoint="true")])
        get_runner().dryrun(app, "local_cwd", cfg={"log_dir": "/tmp/x", "prepend_cwd": True})
    finally:
        events.removeHandler(keep)
        events.setLevel(level)
    (dryrun,) = [json.loads(m) for m in seen if json.loads(m)["api"] == "dryrun"]
    assert json.loads(dryrun["runcfg"]) == {"log_dir": "/tmp/x", "prepend_cwd": True}
    assert dryrun["scheduler"] == "local_cwd" and dryrun["wall_time_usec"] >= 0


def test_a_script_dry_run_loads_no_json_nor_threading() -> None:
    # Start-up stays lazy: the core's data crosses as plain values, and an event nobody can
    # see is never serialized.
    script = (
        "import sys\n"
        "from torchx.runner import get_runner\n"
        "get_runner().dryrun_component('dist.ddp', ['--script', 't.py', '-j', '2x2'], "
        "scheduler='slurm', cfg={'partition': 'x', 'slurm_version': '24.11'})\n"
        "print(sorted(m for m in ('json', 'threading', 'logging') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
