"""Python functions as jobs (``torchx.futures``): results, exceptions, cancel, shutdown and map
on local_cwd, and on the real Slurm cluster where it runs (one array for ``map``)."""

import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import pytest
from _engines import aws_up, docker_up, futures_image, slurm_up
from torchx.futures import Executor, JobError, RemoteError


def _raise_key_error(key: str) -> None:
    raise KeyError(key)


def test_submit_returns_a_future_of_the_return_value(torchx_bin: str) -> None:
    with Executor("local_cwd") as ex:
        job = ex.submit(pow, 2, 10)
        assert job.result(timeout=60) == 1024
        assert job.done() and not job.cancelled()
    # The handle is an app's: the CLI knows it.
    out = subprocess.run([torchx_bin, "status", "--json", job.handle], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["state"] == "SUCCEEDED"


def test_a_function_of_main_travels_by_value(tmp_path: Path) -> None:
    _a_function_of_main_runs("'local_cwd'", tmp_path, timeout=60)


def _a_function_of_main_runs(executor_args: str, tmp_path: Path, timeout: int) -> None:
    """A script defines a function in ``__main__`` and submits it to ``Executor(executor_args)``:
    it travels by value and its result comes back."""
    script = tmp_path / "main.py"
    script.write_text(
        "from torchx.futures import Executor\n"
        "def triple(x):\n"
        "    return {'tripled': 3 * x}\n"
        f"with Executor({executor_args}) as ex:\n"
        f"    print(ex.submit(triple, 14).result(timeout={timeout}))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'tripled': 42}"


def test_a_function_of_a_notebook_cell_travels_by_value(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    cell = (
        "from torchx.futures import Executor\n"
        "def triple(x):\n"
        "    return 3 * x\n"
        "with Executor('local_cwd') as ex:\n"
        "    print('result', ex.submit(triple, 14).result(timeout=60))\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--quick", "-c", cell],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "result 42" in out.stdout, out.stdout + out.stderr


def test_an_exception_comes_back_as_itself_with_its_traceback() -> None:
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with Executor("local_cwd") as ex:
            error = ex.submit(_raise_key_error, "nope").exception(timeout=60)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert isinstance(error, KeyError) and error.args == ("nope",)
    assert isinstance(error.__cause__, RemoteError)
    assert "in _raise_key_error" in str(error.__cause__)
    assert "KeyError: 'nope'" in str(error.__cause__)


def test_cancel_cancels_the_job_and_shutdown_cancels_the_rest(torchx_bin: str) -> None:
    ex = Executor("local_cwd")
    job = ex.submit(time.sleep, 60)
    assert job.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        job.result()
    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run([torchx_bin, "status", "--json", job.handle], capture_output=True, text=True)
        if json.loads(out.stdout)["state"] == "CANCELLED":
            break
        assert time.monotonic() < deadline, out.stdout
        time.sleep(0.1)
    others = [ex.submit(time.sleep, 60) for _ in range(2)]
    ex.shutdown(wait=True, cancel_futures=True)
    assert all(o.cancelled() for o in others)
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(pow, 2, 2)


def test_what_does_not_pickle_or_unpickle_still_comes_back(tmp_path: Path) -> None:
    (tmp_path / "only_in_the_job.py").write_text("class Thing:\n    pass\n")
    with Executor("local_cwd") as ex:
        # An exception that does not pickle: its traceback text does.
        error = ex.submit(
            exec, "import threading\nclass Locked(Exception): pass\nraise Locked(threading.Lock())", {}
        ).exception(timeout=60)
        assert isinstance(error, RemoteError) and "Locked" in str(error), error
        # A return value that does not pickle.
        error = ex.submit(eval, "__import__('threading').Lock()").exception(timeout=60)
        assert isinstance(error, RemoteError) and "does not pickle" in str(error), error
        # One whose class this side lacks.
        code = f"__import__('sys').path.insert(0, {str(tmp_path)!r}) or __import__('only_in_the_job').Thing()"
        error = ex.submit(eval, code).exception(timeout=60)
        assert isinstance(error, RemoteError) and "does not unpickle here" in str(error), error
        assert isinstance(error.__cause__, ModuleNotFoundError)
        # The executor follows its other jobs still.
        assert ex.submit(pow, 3, 3).result(timeout=60) == 27


def test_an_outcome_of_another_torchx_version_says_so(tmp_path: Path) -> None:
    from torchx.futures import Job, _transport
    from torchx.futures._executor import _settle
    from torchx.specs import AppState

    location = str(tmp_path / "call")
    _transport.dump(location, _transport.RESULT, ("ok", 42, None))  # the value not pickled inside
    job = Job(Executor(), "local_cwd://torchx/x", location, "x")
    _settle(job, location, AppState.SUCCEEDED)
    error = job.exception(timeout=0)
    assert isinstance(error, RemoteError) and "another torchx version" in str(error), error


def test_a_job_that_dies_without_a_result_says_so() -> None:
    with Executor("local_cwd") as ex:
        error = ex.submit(os._exit, 3).exception(timeout=60)
    assert isinstance(error, JobError)
    assert "ended FAILED without a result" in str(error) and "torchx log" in str(error)


def test_a_scheduler_that_keeps_failing_fails_the_future_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A status error is asked again; one that lasts fails the job's future with the cause,
    never leaves ``result()`` waiting forever."""
    from torchx.futures import _executor

    monkeypatch.setattr(_executor, "_STATUS_PATIENCE", 0.5)
    with Executor("local_cwd") as ex:
        job = ex.submit(time.sleep, 30)

        def broken(handle: str) -> None:
            raise ConnectionError(f"no answer about {handle}")

        monkeypatch.setattr(ex._runner, "status", broken)
        error = job.exception(timeout=30)
        assert isinstance(error, JobError), error
        assert "has not said how it is" in str(error), error
        assert isinstance(error.__cause__, ConnectionError)
        monkeypatch.undo()
        job.cancel()


def test_map_yields_in_order_and_chunks() -> None:
    with Executor("local_cwd") as ex:
        assert list(ex.map(pow, [2, 3, 4], [5, 2, 1])) == [32, 9, 4]
        assert list(ex.map(abs, range(-3, 2), chunksize=2)) == [3, 2, 1, 0, 1]
    # The chunks, one group of 3 tasks.
    groups = Path(os.environ["TORCHX_STATE_DIR"]) / "groups"
    newest = max(groups.glob("*.json"), key=lambda p: p.stat().st_mtime)
    record = json.loads(newest.read_text())
    assert record["name"] == "abs" and len(record["tasks"]) == 3, record


def test_map_reports_its_progress() -> None:
    from torchx.progress import Progress

    seen: list[Progress] = []
    with Executor("local_cwd") as ex:
        assert list(ex.map(abs, [-1, -2, -3], progress=seen.append)) == [1, 2, 3]
    assert seen[0].done == 0 and seen[0].total == 3
    assert seen[-1].done == 3 and seen[-1].counts == {"SUCCEEDED": 3}


def test_bad_executors_are_refused_at_submit() -> None:
    from torchx.specs import UnknownSchedulerException

    with pytest.raises(UnknownSchedulerException, match="nope"):
        Executor("nope").submit(pow, 2, 10)
    with pytest.raises(ValueError, match="max_retries must be a whole number >= 0, got -1"):
        Executor(max_retries=-1).submit(pow, 2, 10)
    with pytest.raises(ValueError, match="time_limit -5 is not a time limit"):
        Executor(time_limit=-5).submit(pow, 2, 10)
    with pytest.raises(ValueError, match="give image="):
        Executor("local_docker").submit(pow, 2, 10)
    with pytest.raises(ValueError, match="give result_dir="):
        Executor("kubernetes", image="python:3.11").submit(pow, 2, 10)
    with pytest.raises(ValueError, match=r"fsspec URL .*got '/tmp/x'"):
        list(Executor("aws_batch", image="python:3.11", result_dir="/tmp/x").map(pow, [2], [10]))


def test_on_slurm_map_is_one_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not slurm_up():
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
    monkeypatch.chdir(tmp_path)  # the jobs' shared directory (.torchx-futures)
    _on("slurm", {}, None, None, tmp_path)
    with Executor("slurm") as ex:
        squares = list(ex.map(pow, range(20), [2] * 20, timeout=300))
        chunked = list(ex.map(pow, range(20), [2] * 20, timeout=300, chunksize=8))
    assert squares == chunked == [i * i for i in range(20)]
    groups = Path(os.environ["TORCHX_STATE_DIR"]) / "groups"
    records = [json.loads(p.read_text()) for p in groups.glob("*.json")]
    mapped = [r for r in records if r["scheduler"] == "slurm" and len(r["tasks"]) == 20]
    assert mapped and mapped[-1].get("native"), "map on Slurm is one job array"
    chunks = [r for r in records if r["scheduler"] == "slurm" and len(r["tasks"]) == 3]
    assert chunks and chunks[-1].get("native"), "map's 3 chunks too"


def _readme_example(k: int, tmp_path: Path) -> List[str]:
    """Runs the ``k``-th Python example of the README's futures section; its output lines."""
    import re

    readme = Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("### Python functions as jobs", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) > k, "the README's futures section lacks an example"
    script = tmp_path / "example.py"
    script.write_text(blocks[k])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_readme_example_runs_as_written(tmp_path: Path) -> None:
    assert _readme_example(0, tmp_path)[:2] == ["1024", "[0, 1, 4, 9, 16]"]


def test_readme_container_example_runs_as_written(tmp_path: Path) -> None:
    if not (aws_up() and docker_up()):
        pytest.skip("no AWS emulator running Batch jobs as containers (scripts/aws/up.sh)")
    # The README's image and bucket, here: the test image under its name, the emulator's S3.
    subprocess.run(["docker", "tag", futures_image(), "my-trainer:latest"], check=True)
    _bucket("my-bucket")
    assert _readme_example(1, tmp_path) == ["42", "[0, 3, 6, 9]"]


class _Counter:
    """Counts to ``goal`` in 0.1 s steps; checkpointable: the next attempt resumes the count."""

    def __init__(self) -> None:
        self.count = 0
        self.attempts = 0

    def __call__(self, goal: int) -> tuple:
        self.attempts += 1
        while self.count < goal:
            time.sleep(0.1)
            self.count += 1
        return self.count, self.attempts

    def checkpoint(self, goal: int) -> tuple:
        return self, (goal,), {}


def test_a_checkpointable_callable_outlives_its_time_limit() -> None:
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with Executor("local_cwd", time_limit=2) as ex:
            count, attempts = ex.submit(_Counter(), 30).result(timeout=120)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert count == 30
    assert attempts >= 2, "3 s of counting under a 2 s limit takes a requeue"


def test_an_fsspec_result_dir_carries_calls_and_results(tmp_path: Path) -> None:
    with Executor("local_cwd", result_dir=f"file://{tmp_path}/calls") as ex:
        job = ex.submit(divmod, 17, 5)
        assert job.result(timeout=60) == (3, 2)
        failed = ex.submit(divmod, 1, 0)
        assert isinstance(failed.exception(timeout=60), ZeroDivisionError)
    assert job.location.startswith("file://")
    # A result read is removed with its call; a failure's call and traceback stay.
    assert not Path(job.location.removeprefix("file://")).exists()
    assert (Path(failed.location.removeprefix("file://")) / "result.pkl").exists()


def test_a_read_result_leaves_no_directory_behind(tmp_path: Path) -> None:
    with Executor("local_cwd", result_dir=str(tmp_path / "calls")) as ex:
        assert list(ex.map(pow, [2, 3], [3, 2])) == [8, 9]
    assert list((tmp_path / "calls").iterdir()) == []


def _on(scheduler: str, cfg: dict, image: Optional[str], result_dir: Optional[str], tmp_path: Path) -> None:
    """What every scheduler must do: results, a function of ``__main__``, an exception's type
    and traceback, cancel."""
    with Executor(scheduler, cfg, image=image, result_dir=result_dir) as ex:
        assert ex.submit(pow, 2, 10).result(timeout=300) == 1024
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            error = ex.submit(_raise_key_error, "nope").exception(timeout=300)
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        assert isinstance(error, KeyError) and error.args == ("nope",)
        assert "_raise_key_error" in str(error.__cause__)
        sleeper = ex.submit(time.sleep, 600)
        assert sleeper.cancel() and sleeper.cancelled()
        state = ex._runner.wait(sleeper.handle, wait_interval=0.2, timeout=120)
        assert state is not None and state.state.name == "CANCELLED", state
    executor_args = f"{scheduler!r}, {cfg!r}, image={image!r}, result_dir={result_dir!r}"
    _a_function_of_main_runs(executor_args, tmp_path, timeout=300)


def test_on_local_docker_calls_cross_a_bind_mount(tmp_path: Path) -> None:
    if not docker_up():
        pytest.skip("no Docker engine (scripts/docker/up.sh)")
    _on("local_docker", {}, futures_image(), None, tmp_path)


def test_on_local_docker_a_workspace_brings_the_projects_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not docker_up():
        pytest.skip("no Docker engine (scripts/docker/up.sh)")
    project = tmp_path / "project"
    project.mkdir()
    (project / "only_in_the_project.py").write_text("def bump(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(project))
    from only_in_the_project import bump  # type: ignore[import-not-found]

    # By reference, as any importable function: the job imports it from the workspace.
    with Executor("local_docker", image=futures_image(), workspace=str(project)) as ex:
        assert ex.submit(bump, 41).result(timeout=300) == 42
    # Without it, the job says what it lacks.
    with Executor("local_docker", image=futures_image()) as ex:
        error = ex.submit(bump, 41).exception(timeout=300)
    assert isinstance(error, ModuleNotFoundError), error
    assert "does not load where the job runs" in str(error.__cause__)


@pytest.mark.parametrize(
    "scheduler, cfg",
    [
        ("kubernetes", {}),
        ("kubernetes_mcad", {}),
        ("aws_batch", {"queue": "q"}),
        (
            "aws_sagemaker",
            {"role": "arn:aws:iam::123456789012:role/r", "instance_type": "ml.m5.large", "output_path": "s3://b/o"},
        ),
    ],
)
def test_remote_schedulers_run_the_call_from_its_url(scheduler: str, cfg: dict) -> None:
    # No API server here for Kubernetes, nor containers for SageMaker: their requests.
    ex = Executor(scheduler, cfg, image="trainer:latest", result_dir="s3://b/calls")
    location = f"{ex._where()}/x"
    request = str(ex._runner.dryrun(ex._app("f", pow, location), scheduler, cfg).request)
    assert "torchx.futures.run" in request and location in request, request
    assert "trainer:latest" in request


def test_on_lsf_calls_cross_a_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/lsf.rs's stand-ins: bsub runs the job script, whose `docker run` runs the command
    # here; `python` in it is this interpreter.
    fakes = Path(__file__).resolve().parents[2] / "crates" / "torchx-cli" / "tests" / "fixtures" / "lsf"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fakes}:{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("LSF_FAKE_DIR", str(tmp_path / "lsf"))
    monkeypatch.chdir(tmp_path)
    with Executor("lsf", image="trainer:latest") as ex:
        job = ex.submit(pow, 2, 10)
        assert job.result(timeout=60) == 1024
        assert job.location.startswith(str(tmp_path / ".torchx-futures"))
        assert list(ex.map(pow, range(3), [2] * 3, timeout=60)) == [0, 1, 4]
    request = ex._runner.dryrun(ex._app("f", pow, str(tmp_path / ".torchx-futures" / "x")), "lsf", {}).request
    script = str(request)
    assert "trainer:latest" in script and f"{tmp_path}/.torchx-futures" in script, script


def _bucket(name: str) -> str:
    import s3fs

    fs = s3fs.S3FileSystem()
    if not fs.exists(name):
        fs.mkdir(name)
    return name


def test_on_aws_batch_calls_travel_through_s3(tmp_path: Path) -> None:
    if not (aws_up() and docker_up()):
        pytest.skip("no AWS emulator running Batch jobs as containers (scripts/aws/up.sh)")
    bucket = _bucket("torchx-futures-test")
    cfg = {"queue": "torchx"}
    _on("aws_batch", cfg, futures_image(), f"s3://{bucket}/calls", tmp_path)
    with Executor("aws_batch", cfg, image=futures_image(), result_dir=f"s3://{bucket}/map") as ex:
        assert list(ex.map(pow, range(4), [3] * 4, timeout=300)) == [0, 1, 8, 27]
    groups = Path(os.environ["TORCHX_STATE_DIR"]) / "groups"
    records = [json.loads(p.read_text()) for p in groups.glob("*.json")]
    mapped = [r for r in records if r["scheduler"] == "aws_batch" and len(r["tasks"]) == 4]
    assert mapped and mapped[-1].get("native"), "map on Batch is one array job"
