"""Arrays and sweeps through the Python API: ``Runner.run_component(..., array=/sweep=)``
returns one group handle that ``status``, ``wait``, ``cancel``, ``delete`` and
``group_tasks`` take, and that the CLI knows too (the records are shared)."""

import json
import subprocess
from pathlib import Path

import pytest
from torchx.runner import get_runner
from torchx.specs import AppState, parse_app_handle


def test_an_array_is_one_group_with_substituted_tasks(tmp_path: Path, torchx_bin: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    script = f"echo ${{array_index}} $TORCHX_ARRAY_INDEX $TORCHX_ARRAY_SIZE > {out}/${{array_index}}"
    with get_runner("pygroups") as runner:
        handle = runner.run_component("utils.sh", ["sh", "-c", script], "local_cwd", array="1-5:2%2")
        scheduler, session, group_id = parse_app_handle(handle)
        assert (scheduler, session) == ("local_cwd", "pygroups")
        assert group_id.startswith("~sh-")
        status = runner.wait(handle, wait_interval=0.1)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        assert status.msg == "3 tasks: SUCCEEDED 3"
        tasks = runner.group_tasks(handle)
        assert [t.index for t in tasks] == [1, 3, 5]
        assert all(t.state == AppState.SUCCEEDED and t.handle for t in tasks)
    for i in (1, 3, 5):
        assert (out / str(i)).read_text().split() == [str(i), str(i), "3"]
    # The CLI sees the same group.
    cli = subprocess.run([torchx_bin, "status", "--json", handle], capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["counts"] == {"SUCCEEDED": 3}


def test_a_sweep_counts_failures_and_delete_forgets_the_group() -> None:
    with get_runner("pygroups") as runner:
        handle = runner.run_component(
            "utils.sh",
            ["sh", "-c", "[ ${sweep.lr} != 0.3 ]"],
            "local_cwd",
            sweep={"lr": [0.1, 0.3], "bs": [8, 16]},
            max_concurrent=2,
        )
        status = runner.wait(handle, wait_interval=0.1)
        assert status is not None and status.state == AppState.FAILED
        assert status.msg == "4 tasks: FAILED 2, SUCCEEDED 2"
        failed = {t.params["bs"] for t in runner.group_tasks(handle) if t.state == AppState.FAILED}
        assert failed == {"8", "16"}
        assert all(t.params["lr"] == "0.3" for t in runner.group_tasks(handle) if t.state == AppState.FAILED)
        runner.delete(handle)
        with pytest.raises(LookupError):
            runner.status(handle)


def test_wait_reports_a_groups_progress() -> None:
    from torchx.progress import Progress

    seen: list[Progress] = []
    with get_runner("pygroups") as runner:
        handle = runner.run_component(
            "utils.sh", ["sh", "-c", "sleep 0.2; [ ${array_index} != 1 ]"], "local_cwd", array="0-3%2"
        )
        status = runner.wait(handle, wait_interval=0.05, progress=seen.append)
        assert status is not None and status.state == AppState.FAILED
    assert seen and all(p.total == 4 for p in seen)
    assert [p.done for p in seen] == sorted(p.done for p in seen), "never goes back"
    assert seen[-1].counts == {"FAILED": 1, "SUCCEEDED": 3} and seen[-1].eta is None
    assert any(p.eta is not None for p in seen), "an estimate once some are over"


def test_cancel_stops_every_task() -> None:
    with get_runner("pygroups") as runner:
        handle = runner.run_component("utils.sh", ["sleep", "60"], "local_cwd", array="3")
        runner.cancel(handle)
        status = runner.wait(handle, wait_interval=0.1, timeout=30)
        assert status is not None and status.state == AppState.CANCELLED, status


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"array": "0"}, "an array of 0 tasks"),
        ({"array": "0-3", "max_concurrent": 2}, "cap an --array with %K"),
        ({"sweep": {"x": ["a,b"]}}, "holds a comma"),
        ({"max_concurrent": 2}, "caps a sweep or an array"),
        ({"sweep_file": "/nonexistent.jsonl"}, "cannot read it"),
    ],
)
def test_bad_groups_are_refused_before_anything_runs(kwargs: dict[str, object], message: str) -> None:
    with get_runner("pygroups") as runner, pytest.raises(ValueError, match=message):
        runner.run_component("utils.echo", [], "local_cwd", **kwargs)  # type: ignore[arg-type]


def test_readme_group_example_runs_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    readme = Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("### Arrays and sweeps", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "the README's arrays section has no Python example"
    monkeypatch.chdir(tmp_path)
    exec(block.group(1), {})
    assert "SUCCEEDED" in capsys.readouterr().out


def test_a_group_builds_its_component_once_per_distinct_arguments(tmp_path: Path, torchx_bin: str) -> None:
    """The CLI builds a component file's function once for an array whose tasks differ only by
    their variables, and once per point of a sweep whose points change its arguments: not once
    per task (each build of a Python component is an interpreter)."""
    import os
    import sys

    calls = tmp_path / "calls"
    (tmp_path / "comp.py").write_text(
        "import torchx.specs as specs\n"
        "def train(lr: str = '0.1') -> specs.AppDef:\n"
        f"    open({str(calls)!r}, 'a').write(lr + '\\n')\n"
        "    return specs.AppDef(name='train', roles=[specs.Role(name='t', image='.', "
        "entrypoint='echo', args=[lr])])\n"
    )
    env = {**os.environ, "TORCHX_PYTHON": sys.executable}
    run = [torchx_bin, "run", "--dryrun"]
    subprocess.run([*run, "--array", "0-7", "./comp.py:train"], cwd=tmp_path, env=env, check=True, capture_output=True)
    assert calls.read_text().split() == ["0.1"]
    calls.unlink()
    subprocess.run(
        [*run, "--sweep", "lr=1,2", "--sweep", "bs=8,16,32", "./comp.py:train", "--lr", "${sweep.lr}"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    assert sorted(calls.read_text().split()) == ["1", "2"]
