"""The hang watchdog (``--hang_timeout``) on local_cwd, local_docker and the real Slurm cluster
with real PyTorch: two DDP ranks over gloo (``dist.ddp -j 1x2``) where rank 1 stops calling
``all_reduce`` and sleeps, so rank 0 blocks inside it. The job fails as ``hung``, the stacks (by ``py-spy``, installed with the test extra)
show rank 0 in ``all_reduce`` and rank 1 in its sleep, and nothing of it is left; under the
recovery options the hung attempt is requeued and the next one resumes from the checkpoint
rank 1 saved on the checkpoint signal. Also the Python spelling (``Role(hang_timeout=...)``,
``torchx.recovery.heartbeat()``). PyTorch is installed by CI (TORCHX_TEST_TORCH)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, List

import pytest

TRAIN = """
import os, sys, time
import torch
import torch.distributed as dist
import torchx.recovery

dist.init_process_group("gloo")
rank = dist.get_rank()
ckpt = os.path.join(os.environ.get("TORCHX_CHECKPOINT_DIR") or ".", "step")
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
step = start

def save(*_):
    if rank == 1:
        with open(ckpt, "w") as f:
            f.write(str(step))
        print(f"rank 1 saved step {step}", flush=True)
    os._exit(75)

def stall():
    time.sleep(100000)

if os.environ.get("TORCHX_CHECKPOINT_DIR"):
    import signal
    signal.signal(signal.SIGUSR1, save)
print(f"rank {rank} attempt {torchx.recovery.attempt()} from step {start}", flush=True)
t = torch.ones(1)
for step in range(start, 10):
    if rank == 1 and step == 5 and torchx.recovery.attempt() == 0:
        print("rank 1 stalls", flush=True)
        stall()
    dist.all_reduce(t)
    print(f"rank {rank} step {step}", flush=True)
    time.sleep(0.1)
print(f"rank {rank} done", flush=True)
"""


def _torch() -> None:
    if "torch" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
        import torch  # noqa: F401  (CI installed it: a missing PyTorch is a failure)
    else:
        pytest.importorskip("torch")


def _env(tmp_path: pathlib.Path) -> Dict[str, str]:
    # py-spy and torchrun are this interpreter's (the venv need not be activated).
    bin_dir = os.path.dirname(sys.executable)
    return {
        **os.environ,
        "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        "TORCHX_STATE_DIR": str(tmp_path / "state"),
    }


def _torchx(args: List[str], tmp_path: pathlib.Path, timeout: float = 300) -> "subprocess.CompletedProcess[str]":
    exe = os.environ.get("TORCHX_BIN") or shutil.which("torchx") or "torchx"
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, cwd=str(tmp_path), env=_env(tmp_path), timeout=timeout
    )


def _status(handle: str, tmp_path: pathlib.Path) -> Dict[str, Any]:
    said = _torchx(["status", "--json", handle], tmp_path)
    assert said.returncode == 0 and said.stdout.strip(), f"status {handle}: {said.returncode} {said.stderr}"
    status: Dict[str, Any] = json.loads(said.stdout)
    return status


def _left(script: str) -> List[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if script in line and "ps -eo" not in line]


def _train(tmp_path: pathlib.Path) -> str:
    script = f"hang_{uuid.uuid4().hex[:8]}.py"
    (tmp_path / script).write_text(TRAIN)
    return script


def _where(scheduler: str) -> List[str]:
    """`-s SCHEDULER` and what it needs: for slurm `--wait --log` (its `run` returns at
    submission); for local_docker the image and mounts that give it PyTorch (the stacks are
    taken from the host: py-spy attaches to the container's processes)."""
    if scheduler == "local_cwd":
        return ["-s", "local_cwd"]
    from _engines import docker_up, slurm_up, torch_image, torch_mounts

    if scheduler == "slurm":
        if not slurm_up():
            pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
        # The batch script's watch: its nodes are this machine, so this venv's py-spy.
        return ["-s", "slurm", "--wait", "--log"]

    if not docker_up():
        pytest.skip("no Docker engine (scripts/docker/up.sh)")
    return ["-s", scheduler, "dist.ddp", "--image", torch_image(), *torch_mounts()]


def _ddp(where: List[str], options: List[str], script: str) -> List[str]:
    """`run OPTIONS dist.ddp -j 1x2 --script SCRIPT` on the scheduler `where` names."""
    run_opts = [w for w in where[2:] if w.startswith("--") and w in ("--wait", "--log")]
    component = [w for w in where[2:] if w not in run_opts] or ["dist.ddp"]
    return ["run", *where[:2], *run_opts, *options, *component, "-j", "1x2", "--script", script]


SCHEDULERS = ["local_cwd", "local_docker", "slurm"]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_hung_ddp_job_fails_with_every_ranks_stack(tmp_path: pathlib.Path, scheduler: str) -> None:
    _torch()
    assert shutil.which("py-spy", path=os.path.dirname(sys.executable)), "py-spy (the test extra) is missing"
    where = _where(scheduler)
    script = _train(tmp_path)
    started = time.monotonic()
    run = _torchx(_ddp(where, ["--hang_timeout", "20s"], script), tmp_path)
    took = time.monotonic() - started
    assert run.returncode == 1, run.stderr[-3000:]
    handle = run.stdout.strip().splitlines()[-1]
    said = run.stderr + _torchx(["log", "--streams", "stdout", handle], tmp_path).stdout
    assert "rank 1 stalls" in said, said[-3000:]
    # 20 s of silence, then the stacks and the stop: well within 35 s of the last line.
    assert took < 120, took
    status = _status(handle, tmp_path)
    assert status["state"] == "FAILED", status
    attempts = status["roles"][0]["replicas"][0]["attempts"]
    assert [a["reason"] for a in attempts] == ["hung"], status
    assert "rank 0 in all_reduce" in status["msg"], status["msg"]
    stacks = json.loads(_torchx(["log", "--stacks", "--json", handle], tmp_path).stdout)
    text = stacks[0]["text"]
    blocks = {b.split("\n", 1)[0]: b for b in text.split("=== ")[1:]}
    rank0 = next(b for head, b in blocks.items() if " rank 0 " in head)
    rank1 = next(b for head, b in blocks.items() if " rank 1 " in head)
    assert "all_reduce" in rank0, text
    assert "stall" in rank1 and "all_reduce" not in rank1, text
    plain = _torchx(["log", "--stacks", handle], tmp_path).stdout
    # dist.ddp names its role after the script.
    assert plain.startswith(f"--- {script[:-3]}/0 attempt 0 ---\n=== {script[:-3]}/0 pid "), plain[:200]
    assert not _left(script), _left(script)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_hung_ddp_attempt_is_requeued_from_its_checkpoint(tmp_path: pathlib.Path, scheduler: str) -> None:
    _torch()
    where = _where(scheduler)
    script = _train(tmp_path)
    run = _torchx(_ddp(where, ["--hang_timeout", "20s", "--max_requeues", "1"], script), tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    handle = run.stdout.strip().splitlines()[-1]
    status = _status(handle, tmp_path)
    attempts = status["roles"][0]["replicas"][0]["attempts"]
    assert [a["reason"] for a in attempts] == ["hung", "succeeded"], status
    log = _torchx(["log", "--streams", "stdout", handle], tmp_path).stdout
    # Rank 1 saved on the checkpoint signal (its line may be lost with torchrun, which the
    # signal ends), and the next attempt resumed there.
    assert "rank 0 attempt 1 from step 5" in log and "rank 1 attempt 1 from step 5" in log, log[-3000:]
    assert not _left(script), _left(script)


def test_the_python_api_sets_the_timeout_and_beats(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx.runner import get_runner
    from torchx.specs import AppDef, AppState, Role

    monkeypatch.setenv("TORCHX_STATE_DIR", str(tmp_path / "state"))
    beats = "import time, torchx.recovery\nfor _ in range(5):\n    torchx.recovery.heartbeat()\n    time.sleep(1)\n"
    (tmp_path / "beats.py").write_text(beats)
    (tmp_path / "quiet.py").write_text("import time\ntime.sleep(60)\n")
    with get_runner() as runner:
        handles = {
            name: runner.run(
                AppDef(
                    name,
                    [
                        Role(
                            name,
                            image=str(tmp_path),
                            entrypoint=sys.executable,
                            args=[str(tmp_path / f"{name}.py")],
                            hang_timeout="2s",
                        )
                    ],
                ),
                "local_cwd",
                cfg={"log_dir": str(tmp_path / "logs")},
            )
            for name in ("beats", "quiet")
        }
        done = {name: runner.wait(h, wait_interval=0.2) for name, h in handles.items()}
    assert done["beats"] is not None and done["beats"].state == AppState.SUCCEEDED, done["beats"]
    assert done["quiet"] is not None and done["quiet"].state == AppState.FAILED, done["quiet"]
    assert "quiet/0 hung" in done["quiet"].msg, done["quiet"].msg
