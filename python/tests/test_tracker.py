"""torchx.tracker: AppRun from the environment a launch sets, and the fsspec backend sharing
its files with the ``torchx tracker`` CLI (each side reads what the other wrote)."""

import json
import subprocess
from pathlib import Path
from typing import Dict

import fsspec
import pytest
from torchx.tracker import app_run_from_env
from torchx.tracker.api import ENV_TORCHX_JOB_ID, ENV_TORCHX_PARENT_RUN_ID, ENV_TORCHX_TRACKERS, AppRun
from torchx.tracker.backend.fsspec import FsspecTracker, create

RUN = "local_cwd://torchx/train-1"
PARENT = "local_cwd://torchx/prep-0"


@pytest.fixture
def tracker_dir(tmp_path: Path) -> Dict[str, str]:
    root = tmp_path / "tracking"
    root.mkdir()
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol=file\nroot_path={root}\n")
    (tmp_path / ".torchxconfig").write_text(f"[torchx:tracker]\nfsspec=\n\n[tracker:fsspec]\nconfig={conf}\n")
    return {"root": str(root), "conf": str(conf), "cwd": str(tmp_path)}


def _cli(torchx_bin: str, cwd: str, *args: str) -> str:
    done = subprocess.run([torchx_bin, "tracker", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_reads_what_python_wrote(torchx_bin: str, tracker_dir: Dict[str, str]) -> None:
    tracker = create(tracker_dir["conf"])
    tracker.add_metadata(RUN, lr=0.5, name="x")
    tracker.add_metadata(RUN, lr=0.25)
    tracker.add_artifact(RUN, "model", "/tmp/model.pt", {"epoch": 3})
    tracker.add_source(RUN, PARENT, "dataset")
    meta = json.loads(_cli(torchx_bin, tracker_dir["cwd"], "list", "metadata", "--json", RUN))
    assert meta == {"lr": 0.25, "name": "x"}
    jobs = _cli(torchx_bin, tracker_dir["cwd"], "list", "jobs")
    assert RUN in jobs
    lineage = _cli(torchx_bin, tracker_dir["cwd"], "list", "lineage", PARENT)
    assert RUN in lineage


def test_python_reads_what_the_cli_wrote(torchx_bin: str, tracker_dir: Dict[str, str]) -> None:
    done = subprocess.run(
        [torchx_bin, "tracker", "add", "metadata", "epochs=3", "opt=adam"],
        cwd=tracker_dir["cwd"],
        capture_output=True,
        text=True,
        env={"TORCHX_JOB_ID": RUN, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    tracker = FsspecTracker(fsspec.filesystem("file"), tracker_dir["root"])
    assert tracker.metadata(RUN) == {"epochs": 3, "opt": "adam"}
    assert list(tracker.run_ids()) == [RUN]


def test_app_run_from_env_records_in_the_configured_tracker(
    tracker_dir: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_TORCHX_TRACKERS, "fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", tracker_dir["conf"])
    monkeypatch.setenv(ENV_TORCHX_JOB_ID, RUN)
    monkeypatch.setenv(ENV_TORCHX_PARENT_RUN_ID, PARENT)
    AppRun.run_from_env.cache_clear()
    try:
        run = app_run_from_env()
        assert run.job_id() == RUN and app_run_from_env() is run
        run.add_artifact("ckpt", "/ckpt/1")
        assert [s.parent.id for s in run.sources()] == [PARENT]
        tracker = create(tracker_dir["conf"])
        assert tracker.artifacts(RUN)["ckpt"].path == "/ckpt/1"
        assert [d.source_run_id for d in tracker.lineage(PARENT).descendants] == [RUN]
    finally:
        AppRun.run_from_env.cache_clear()


def test_not_launched_by_torchx_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (ENV_TORCHX_TRACKERS, ENV_TORCHX_JOB_ID, ENV_TORCHX_PARENT_RUN_ID):
        monkeypatch.delenv(var, raising=False)
    AppRun.run_from_env.cache_clear()
    try:
        run = app_run_from_env()
        assert run.job_id() == "<UNDEFINED>" and list(run.backends) == []
        run.add_metadata(x=1)
    finally:
        AppRun.run_from_env.cache_clear()
