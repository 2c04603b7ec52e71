"""Pipelines through the Python API: ``Runner.run_pipeline`` takes a pipeline file or its
content and returns one handle that ``status``, ``wait``, ``cancel``, ``delete`` and
``pipeline_steps`` take, the same pipelines ``torchx run ./pipe.yaml`` makes."""

import json
import subprocess
from pathlib import Path

import pytest
from torchx.runner import get_runner
from torchx.specs import AppState


def _steps(shared: str) -> dict[str, object]:
    return {
        "name": "pydemo",
        "steps": [
            {"name": "prepare", "component": "utils.sh", "args": ["sh", "-c", f"echo 1 > {shared}"]},
            {
                "name": "train",
                "component": "utils.sh",
                "args": [
                    "sh",
                    "-c",
                    f'echo $(( $(cat {shared}) + 1 )) > {shared}; echo "$TORCHX_UPSTREAM_PREPARE_HANDLE"',
                ],
                "after": ["prepare"],
            },
            {"name": "report", "component": "utils.echo", "args": ["--msg", "failed"], "after": ["train:notok"]},
        ],
    }


def test_a_pipeline_of_steps_runs_in_order(tmp_path: Path, torchx_bin: str) -> None:
    shared = tmp_path / "value"
    with get_runner() as runner:
        handle = runner.run_pipeline(_steps(str(shared)))
        assert handle.startswith("pipeline://")
        status = runner.wait(handle, wait_interval=0.1)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        assert status.msg == "3 steps: CANCELLED 1, SUCCEEDED 2"
        steps = runner.pipeline_steps(handle)
        assert [(s.name, s.state) for s in steps] == [
            ("prepare", AppState.SUCCEEDED),
            ("train", AppState.SUCCEEDED),
            ("report", AppState.CANCELLED),
        ]
        assert "step train ended SUCCEEDED" in steps[2].msg
        assert steps[0].handle is not None and steps[2].handle is None
    assert shared.read_text().strip() == "2"
    # The CLI sees the same pipeline.
    cli = subprocess.run([torchx_bin, "status", "--json", handle], capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["state"] == "SUCCEEDED"


def test_a_pipeline_file_and_its_mistakes(tmp_path: Path) -> None:
    good = tmp_path / "pipe.json"
    good.write_text(json.dumps(_steps(str(tmp_path / "v"))))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: p\nsteps:\n  - {name: a, component: utils.echo, after: [b]}\n")
    with get_runner() as runner:
        with pytest.raises(ValueError, match="`b`, which is not a step"):
            runner.run_pipeline(str(bad))
        handle = runner.run_pipeline(good)
        runner.cancel(handle)
        status = runner.status(handle)
        assert status is not None and status.state in (AppState.CANCELLED, AppState.SUCCEEDED)
        runner.delete(handle)
        assert runner.status(handle) is None


def test_plan_rows_and_auto(tmp_path: Path) -> None:
    with get_runner() as runner:
        rows = runner.plan("utils.python", ["--script", str(tmp_path / "missing.py")], ["local_cwd"])
        assert [(r.scheduler, r.verdict) for r in rows] == [("local_cwd", "fails")]
        assert any(c.outcome == "fails" and "does not exist" in c.detail for c in rows[0].checks)
        ok = runner.plan("utils.echo", ["--msg", "x"], ["local_cwd"])
        assert ok[0].verdict == "ok" and ok[0].start == "now"
        handle = runner.run_component("utils.echo", ["--msg", "auto"], "auto:local_cwd")
        assert handle.startswith("local_cwd://")
        with pytest.raises(ValueError, match="no scheduler can run this job"):
            runner.run_component("utils.python", ["--script", str(tmp_path / "missing.py")], "auto:local_cwd")


def test_run_an_appdef_on_auto(tmp_path: Path) -> None:
    from torchx import specs

    app = specs.AppDef(
        name="auto-app",
        roles=[specs.Role(name="r", image="", entrypoint="sh", args=["-c", "echo ok"])],
    )
    with get_runner() as runner:
        handle = runner.run(app, "auto:local_cwd", cfg={"local_cwd.log_dir": str(tmp_path / "logs")})
        assert handle.startswith("local_cwd://")
        status = runner.wait(handle, wait_interval=0.1)
        assert status is not None and status.state == AppState.SUCCEEDED
