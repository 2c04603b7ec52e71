"""NeMo-Run 0.11.1 (PyPI ``nemo-run``, which requires ``torchx>=0.7.0`` and subclasses TorchX's
Python schedulers) on this package, as its users run it: installed after our package in a venv
of its own (scripts/test.sh makes it when TORCHX_TEST_NEMO=1 and names its interpreter in
TORCHX_TEST_NEMO_PYTHON), its quickstart on ``LocalExecutor`` (a Script, a Partial, an Experiment
of two tasks), a ``SlurmExecutor`` through NeMo-Run's local tunnel on the real Slurm cluster of
scripts/slurm/up.sh, and a ``DockerExecutor`` on the real Docker engine."""

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Dict

import pytest
from _engines import docker_up

ENGINES = os.environ.get("TORCHX_TEST_ENGINES", "").split(",")


@pytest.fixture(scope="module")
def nemo_python() -> str:
    python = os.environ.get("TORCHX_TEST_NEMO_PYTHON")
    if not python:
        if "nemo" in ENGINES:
            pytest.fail("CI installed NeMo-Run for this run but TORCHX_TEST_NEMO_PYTHON is unset")
        pytest.skip("no NeMo-Run venv (scripts/test.sh with TORCHX_TEST_NEMO=1)")
    return python


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "mymod.py").write_text(
        textwrap.dedent(
            """
            def add(a: int, b: int) -> int:
                print(f"sum={a + b}")
                return a + b
            """
        )
    )
    return tmp_path


def run_nemo(python: str, workdir: Path, script: str, **env: str) -> Dict[str, object]:
    """Runs ``script`` with NeMo-Run's interpreter (its venv first on PATH, as when activated);
    the script prints one ``RESULT <json>`` line."""
    (workdir / "main.py").write_text(textwrap.dedent(script))
    full = {
        **os.environ,
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(workdir),
        "NEMORUN_HOME": str(workdir / "nemo_home"),
        **env,
    }
    for inherited in ("TORCHX_BIN", "TORCHX_SUPERVISOR"):
        full.pop(inherited, None)  # the venv's own torchx
    out = subprocess.run([python, "main.py"], cwd=workdir, env=full, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert result, out.stdout[-3000:]
    return json.loads(result[-1][len("RESULT ") :])


def test_nemo_run_keeps_our_torchx_and_pip_check_is_clean(nemo_python: str) -> None:
    check = subprocess.run([nemo_python, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    version = subprocess.run(
        [nemo_python, "-c", "import importlib.metadata as m; print(m.version('torchx'), m.version('nemo-run'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "+rs." in version[0] and version[1] == "0.11.1", version


def test_local_executor_quickstart(nemo_python: str, workdir: Path) -> None:
    result = run_nemo(
        nemo_python,
        workdir,
        """
        import json
        import nemo_run as run
        import mymod

        def logs(exp):
            out = {}
            for job in exp.jobs:
                path = Path(exp._exp_dir) / job.id
                out[job.id] = "".join(p.read_text() for p in path.rglob("*.log") if p.is_file())
            return out

        from pathlib import Path

        if __name__ == "__main__":
            run.run(run.Script(inline="echo script-ok"), executor=run.LocalExecutor(), detach=False)
            run.run(run.Partial(mymod.add, 2, 3), executor=run.LocalExecutor(), detach=False)
            with run.Experiment("two-tasks") as exp:
                exp.add(run.Script(inline="echo task-one"), executor=run.LocalExecutor(), name="one")
                exp.add(run.Partial(mymod.add, 4, 5), executor=run.LocalExecutor(), name="two")
                exp.run(sequential=True, detach=False)
            status = {k: v["status"].name for k, v in exp.status(return_dict=True).items()}
            print("RESULT " + json.dumps({"status": status, "logs": logs(exp)}))
        """,
    )
    assert result["status"] == {"one": "SUCCEEDED", "two": "SUCCEEDED"}
    logs = result["logs"]
    assert "task-one" in logs["one"] and "sum=9" in logs["two"], logs


def test_slurm_executor_with_the_local_tunnel(nemo_python: str, workdir: Path) -> None:
    if not shutil.which("sbatch"):
        if "slurm" in ENGINES:
            pytest.fail("the Slurm cluster was started for this run but sbatch is missing")
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
    result = run_nemo(
        nemo_python,
        workdir,
        """
        import json
        import os
        from pathlib import Path
        import nemo_run as run

        if __name__ == "__main__":
            # The local tunnel's job dir is where NeMo-Run writes experiments: the sbatch
            # script it writes there is the one it submits.
            jobs = os.path.join(os.environ["NEMORUN_HOME"], "experiments")
            executor = run.SlurmExecutor(
                account="",
                tunnel=run.LocalTunnel(job_dir=jobs),
                nodes=1,
                ntasks_per_node=1,
                time="00:05:00",
                packager=run.Packager(),
            )
            with run.Experiment("on-slurm") as exp:
                exp.add(run.Script(inline="echo slurm-ok"), executor=executor, name="hello")
                exp.run(detach=False)
            status = {k: v["status"].name for k, v in exp.status(return_dict=True).items()}
            text = "".join(p.read_text(errors="replace") for p in Path(exp._exp_dir).rglob("*.out"))
            print("RESULT " + json.dumps({"status": status, "out": text}))
        """,
    )
    assert result["status"] == {"hello": "SUCCEEDED"}, result
    assert "slurm-ok" in result["out"], result


def test_docker_executor(nemo_python: str, workdir: Path) -> None:
    if not docker_up():
        pytest.skip("no Docker engine with busybox:local (scripts/docker/up.sh)")
    image = bash_image(workdir)
    result = run_nemo(
        nemo_python,
        workdir,
        f"""
        import json
        from pathlib import Path
        import nemo_run as run

        if __name__ == "__main__":
            executor = run.DockerExecutor(container_image="{image}", packager=run.Packager(), num_gpus=0)
            with run.Experiment("in-docker") as exp:
                exp.add(run.Script(inline="echo docker-ok"), executor=executor, name="hello")
                exp.run(detach=False)
            status = {{k: v["status"].name for k, v in exp.status(return_dict=True).items()}}
            text = "".join(p.read_text(errors="replace") for p in Path(exp._exp_dir).rglob("*.out"))
            print("RESULT " + json.dumps({{"status": status, "out": text}}))
        """,
    )
    assert result["status"] == {"hello": "SUCCEEDED"}, result
    assert "docker-ok" in result["out"], result


def bash_image(workdir: Path) -> str:
    """busybox:local plus this host's bash (NeMo-Run's containers run ``bash -c``)."""
    tag = "torchx-test-bash:local"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    context = workdir / "bash-image"
    context.mkdir()
    bash = Path(shutil.which("bash") or "/bin/bash").resolve()
    files = [bash]
    ldd = subprocess.run(["ldd", str(bash)], capture_output=True, text=True, check=True).stdout
    files += [Path(w) for line in ldd.splitlines() for w in line.split() if w.startswith("/")]
    lines = ["FROM busybox:local"]
    for f in files:
        target = context / f.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f.resolve(), target)
        lines.append(f"COPY {f.relative_to('/')} /{f.relative_to('/')}")
    lines.append(f"RUN ln -sf {bash} /bin/bash 2>/dev/null || true")
    (context / "Dockerfile").write_text("\n".join(lines) + "\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], check=True, capture_output=True)
    return tag


def test_our_wheels_replace_an_installed_upstream_torchx(tmp_path: Path, nemo_python: str) -> None:
    """pip replaces upstream torchx 0.7.0 with ours: no file of it is left, the `torchx`
    command is ours, and the environment is consistent."""
    wheels = os.environ.get("TORCHX_TEST_WHEELS")
    if not wheels:
        pytest.skip("TORCHX_TEST_WHEELS names no wheels (scripts/test.sh with TORCHX_TEST_NEMO=1)")
    venv = tmp_path / "venv"
    subprocess.run([nemo_python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "torchx==0.7.0"], check=True, capture_output=True)
    upstream_only = venv.glob("lib/python3*/site-packages/torchx/schedulers/ray_scheduler.py")
    assert list(upstream_only), "upstream torchx 0.7.0 was not installed"
    ours = sorted(str(w) for w in Path(wheels).glob("*.whl"))
    done = subprocess.run([*pip, *ours], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not list(venv.glob("lib/python3*/site-packages/torchx/schedulers/ray_scheduler.py"))
    version = subprocess.run([str(venv / "bin" / "torchx"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("torchx "), version
    check = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
