"""The Runner's TorchX hooks: image providers and PATH of the local scheduler, trackers from
``.torchxconfig``, workspaces built by a ``WorkspaceMixin`` scheduler, usage events."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Mapping

import pytest
from _inert import InertScheduler
from torchx.runner import Runner, get_runner
from torchx.schedulers.local_scheduler import LocalDirectoryImageProvider, create_scheduler
from torchx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, Resource, Role
from torchx.test.fixtures import TestWithTmpDir
from torchx.workspace import WorkspaceMixin

SMALL = Resource(cpu=1, gpu=0, memMB=64)


def _local_dir_runner() -> Runner:
    return Runner(
        "hooks",
        scheduler_factories={"local_dir": create_scheduler},
        scheduler_params={"image_provider_class": LocalDirectoryImageProvider},
    )


class TestLocalDirectory(TestWithTmpDir):
    def test_replicas_run_in_the_image_directory_with_it_on_path(self) -> None:
        self.write_shell_script("where.sh", ["pwd > where.txt"])
        role = Role("r", image=str(self.tmpdir), entrypoint="where.sh", resource=SMALL)
        with _local_dir_runner() as runner:
            handle = runner.run(AppDef("where", roles=[role]), "local_dir")
            status = runner.wait(handle, wait_interval=0.1, timeout=30)
            assert status and status.state == AppState.SUCCEEDED, status
            assert runner.describe(handle) is not None
        assert self.read("where.txt") == [f"{os.path.realpath(self.tmpdir)}\n"]

    def test_a_missing_image_directory_is_refused(self) -> None:
        role = Role("r", image=str(self.tmpdir / "nope"), entrypoint="true", resource=SMALL)
        with _local_dir_runner() as runner, pytest.raises(ValueError, match="not a directory"):
            runner.dryrun(AppDef("x", roles=[role]), "local_dir")


def test_extra_paths_and_cache_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "my-tool"
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    with get_runner(extra_paths=[str(bin_dir)]) as runner:
        role = Role("r", image="unused", entrypoint="my-tool")
        app = AppDef("tool", roles=[role])
        handle = runner.run(app, "local_cwd")
        assert runner.wait(handle, wait_interval=0.1, timeout=30).state == AppState.SUCCEEDED
        assert list(runner.log_lines(handle, "r")) == ["tool ran\n"]
        assert "PATH" not in role.env  # the caller's AppDef is not rewritten
    with pytest.raises(ValueError, match="cache size"), get_runner(cache_size=0) as runner:
        runner.dryrun(app, "local_cwd")


def test_trackers_from_torchxconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHX_TRACKERS", raising=False)
    (tmp_path / ".torchxconfig").write_text(
        "[torchx:tracker]\nfsspec=\nmine=\n\n[tracker:fsspec]\nconfig=/etc/fsspec.conf\n"
    )
    role = Role("r", image="x", entrypoint="true")
    with get_runner() as runner:
        info = runner.dryrun(AppDef("t", roles=[role]), "local_cwd", parent_run_id="parent-1")
    assert role.env == {}  # the caller's AppDef is left alone (0.8)
    assert info._app is not None
    role = info._app.roles[0]
    assert role.env["TORCHX_TRACKERS"] == "fsspec,mine"
    assert role.env["TORCHX_TRACKER_FSSPEC_CONFIG"] == "/etc/fsspec.conf"
    assert "TORCHX_TRACKER_MINE_CONFIG" not in role.env
    assert role.env["TORCHX_PARENT_RUN_ID"] == "parent-1"
    assert role.env["TORCHX_JOB_ID"] == "local_cwd://torchx/${app_id}"


class _ImageBuilder(WorkspaceMixin[None], InertScheduler[AppDef]):
    def __init__(self, session_name: str, **_: Any) -> None:
        super().__init__("builder", session_name)
        self.built: List[str] = []

    def caching_build_workspace_and_update_role(self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict) -> None:
        self.built.append(str(role.workspace))
        role.image = f"{role.image}-patched"

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, repr)

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        return "id"


def test_workspace_is_built_for_role0_by_a_workspace_scheduler() -> None:
    runner = Runner("w", {"builder": _ImageBuilder})
    app = AppDef(
        "a",
        roles=[Role("r0", "img0", entrypoint="x", resource=SMALL), Role("r1", "img1", entrypoint="x", resource=SMALL)],
    )
    info = runner.dryrun(app, "builder", workspace="/src/project")
    assert [r.image for r in info.request.roles] == ["img0-patched", "img1"]
    assert runner._scheduler("builder").built == ["/src/project"]
    # A builtin scheduler plans it in the core (test_workspaces.py): here, the missing option.
    with pytest.raises(ValueError, match="set the run option image_repo"):
        runner2 = get_runner()
        runner2.dryrun(
            AppDef("a", roles=[Role("r", "img", entrypoint="x", resource=SMALL)]), "kubernetes", workspace="."
        )


def test_usage_events_are_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: List[Any] = []
    monkeypatch.setattr("torchx.runner.events.record", recorded.append)
    Runner("e", {"builder": _ImageBuilder}).dryrun(
        AppDef("a", roles=[Role("r", "img", entrypoint="x", resource=SMALL)]), "builder", cfg={}
    )
    (event,) = [e for e in recorded if e.api == "dryrun"]
    assert event.scheduler == "builder" and event.session and event.wall_time_usec is not None
    # The default destination drops events; "console" would print them.
    from torchx.runner.events import TorchxEvent, record

    record(TorchxEvent(session="s", scheduler="x", api="y"))


def test_events_reach_a_handler_on_the_null_destination_and_cost_no_logging_import() -> None:
    # A script that records an event imports no `logging` for it ...
    script = (
        "import sys\n"
        "from torchx.runner.events import TorchxEvent, record\n"
        "record(TorchxEvent(session='s', scheduler='x', api='y'))\n"
        "assert 'logging' not in sys.modules, 'logging imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    # ... and one whose code put a handler on the destination's logger still gets the events.
    import logging

    from torchx.runner.events import TorchxEvent, record

    seen: List[str] = []

    class Collect(logging.Handler):
        def emit(self, r: logging.LogRecord) -> None:
            seen.append(r.getMessage())

    logger = logging.getLogger("torchx-events-null")
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # as in TorchX, the logger's level decides, not the handler's
    try:
        record(TorchxEvent(session="s", scheduler="x", api="seen"))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert any('"api": "seen"' in m for m in seen), seen
