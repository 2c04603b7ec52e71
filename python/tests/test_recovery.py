"""The recovery contract through the Python API: the same fields on ``specs.Role`` and the
same behaviour through ``Runner.run`` as through ``torchx run``."""

import os
from pathlib import Path

import pytest
from torchx import specs
from torchx.runner import get_runner
from torchx.specs import AppDef, AppState, Role

# Counts to $GOAL, resuming from $TORCHX_CHECKPOINT_DIR/n; on SIGUSR1 saves and exits 75.
COUNTER = """\
f="$TORCHX_CHECKPOINT_DIR/n"
n=$(cat "$f" 2>/dev/null || echo 0)
trap 'echo $n > "$f"; exit 75' USR1
while [ "$n" -lt "$GOAL" ]; do n=$((n+1)); sleep 0.1 & wait $!; done
echo "reached $n"
"""


def counter_app(tmp_path: Path, **recovery: object) -> AppDef:
    script = tmp_path / "count.sh"
    script.write_text(COUNTER)
    role = Role(
        name="trainer",
        image=str(tmp_path),
        entrypoint="bash",
        args=[str(script)],
        env={"GOAL": "25"},
        **recovery,  # type: ignore[arg-type]
    )
    return AppDef(name="count", roles=[role])


def test_role_fields_round_trip_through_the_core() -> None:
    role = Role(
        name="r",
        image="i",
        entrypoint="echo",
        time_limit="4h",
        checkpoint_signal="USR2@60",
        max_requeues=5,
    )
    assert (role.time_limit, role.checkpoint_signal, role.requeue_exit_code) == ("4h", "USR2@60", None)
    with get_runner() as runner:
        text = str(runner.dryrun(AppDef(name="a", roles=[role]), "local_cwd"))
    # The local_cwd request carries them as the supervisor enforces them.
    assert '"time_limit": 14400' in text, text
    assert '"checkpoint_signal": "USR2@60"' in text, text
    assert '"max_requeues": 5' in text, text


def test_a_checkpointing_job_reaches_its_goal_through_runner_run(tmp_path: Path) -> None:
    app = counter_app(tmp_path, time_limit=2, checkpoint_signal="USR1@1")
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd")
        status = runner.wait(handle, wait_interval=0.1)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        described = runner.describe(handle)
    assert described is not None
    final = get_runner().status(handle)
    assert final is not None
    attempts = final.roles[0].replicas[0].attempts
    reasons = [a["reason"] for a in attempts]
    assert len(reasons) >= 2 and reasons[-1] == "succeeded", reasons
    assert set(reasons[:-1]) == {"requeued"}, reasons
    assert all(a["exit_code"] == 75 for a in attempts[:-1]), attempts


@pytest.mark.parametrize(
    ("recovery", "error"),
    [
        ({"checkpoint_signal": "KILL@1"}, ValueError),
        ({"time_limit": "soon"}, ValueError),
        ({"time_limit": 60, "checkpoint_signal": "USR1@90"}, ValueError),
        ({"requeue_exit_code": 0}, ValueError),
    ],
)
def test_bad_recovery_values_are_refused(tmp_path: Path, recovery: dict, error: type) -> None:
    with get_runner() as runner, pytest.raises(error):
        runner.dryrun(counter_app(tmp_path, **recovery), "local_cwd")


def test_a_scheduler_that_cannot_honour_them_says_so() -> None:
    resource = specs.Resource(cpu=1, gpu=0, memMB=512)
    role = Role(name="r", image="img", entrypoint="echo", requeue_exit_code=3, resource=resource)
    with get_runner() as runner, pytest.raises(NotImplementedError, match="requeue_exit_code"):
        runner.dryrun(AppDef(name="a", roles=[role]), "kubernetes_mcad")


def test_slurm_renders_its_native_time_limit_signal_and_requeue() -> None:
    role = Role(name="r", image="/tmp", entrypoint="echo", time_limit="1h", max_requeues=3)
    with get_runner() as runner:
        info = runner.dryrun(AppDef(name="a", roles=[role]), "slurm", cfg={"slurm_version": "24.11"})
    script = str(info)
    for native in ("--time=60", "--signal=B:USR1@90", "--requeue", "scontrol requeue"):
        assert native in script, native


def test_role_keeps_torchx_positional_fields() -> None:
    # The new fields come last, with defaults: TorchX code that builds roles is unchanged.
    role = specs.Role("r", "i")
    assert role.time_limit is None and role.max_requeues is None
    assert os.environ["TORCHX_STATE_DIR"]


def test_checkpoint_dir_is_the_roles_own(tmp_path: Path) -> None:
    app = counter_app(tmp_path, checkpoint_dir=str(tmp_path / "ckpt"), max_requeues=1)
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd")
        status = runner.wait(handle, wait_interval=0.05)
    assert status is not None and status.state == AppState.SUCCEEDED
    assert (tmp_path / "ckpt").is_dir()


def test_container_schedulers_need_a_mounted_checkpoint_dir() -> None:
    resource = specs.Resource(cpu=1, gpu=0, memMB=512)
    role = Role(name="r", image="img", entrypoint="echo", time_limit="1h", resource=resource)
    with get_runner() as runner, pytest.raises(ValueError, match="checkpoint_dir"):
        runner.dryrun(AppDef(name="a", roles=[role]), "kubernetes", cfg={"queue": "q"})
    role.mounts = [specs.VolumeMount(src="ckpt", dst_path="/ckpt")]
    role.checkpoint_dir = "/ckpt"
    with get_runner() as runner:
        info = runner.dryrun(AppDef(name="a", roles=[role]), "kubernetes", cfg={"queue": "q"})
    assert "TORCHX_CHECKPOINT_DIR" in str(info)


# A Python trainer under TorchX's shell wrapper: on SIGUSR1 it saves and asks for a requeue
# with torchx.recovery.request_requeue(), then exits 0 (which alone would be a success).
PY_TRAINER = """\
import signal, sys, time
from torchx import recovery
f = recovery.checkpoint_dir() / "n"
n = int(f.read_text()) if f.exists() else 0
def save(*_):
    f.write_text(str(n))
    recovery.request_requeue()
    sys.exit(0)
signal.signal(signal.SIGUSR1, save)
while n < 25:
    n += 1
    time.sleep(0.1)
print(f"reached {n} in attempt {recovery.attempt()}")
"""


def test_request_requeue_from_python_under_a_shell_wrapper(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(PY_TRAINER)
    import sys

    role = Role(
        name="trainer",
        image=str(tmp_path),
        entrypoint="sh",
        args=["-c", f"{sys.executable} {script}; echo wrapper done"],
        time_limit=2,
        checkpoint_signal="USR1@1",
    )
    with get_runner() as runner:
        handle = runner.run(AppDef(name="pytrain", roles=[role]), "local_cwd")
        status = runner.wait(handle, wait_interval=0.1)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        text = str(status)
        assert "requeued" in text, text
        lines = "".join(runner.log_lines(handle, "trainer", 0))
        assert "reached 25 in attempt" in lines, lines


def test_request_requeue_outside_the_contract_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx import recovery

    monkeypatch.delenv("TORCHX_REQUEUE_FILE", raising=False)
    monkeypatch.delenv("TORCHX_CHECKPOINT_DIR", raising=False)
    with pytest.raises(RuntimeError, match="did not opt into the recovery contract"):
        recovery.request_requeue()
    assert recovery.checkpoint_dir() is None and recovery.attempt() == 0


def test_after_holds_a_job_until_its_dependency_ended(tmp_path: Path) -> None:
    """``Runner.run(after=)``, as ``torchx run --after``: the dependent starts after its
    dependency ended; one whose dependency failed is CANCELLED without running."""
    from torchx.errors import UnsupportedError

    def app(name: str, script: str) -> AppDef:
        return AppDef(name=name, roles=[Role(name="r", image=str(tmp_path), entrypoint="sh", args=["-c", script])])

    with get_runner() as runner:
        first = runner.run(app("first", "sleep 0.5; exit 3"), "local_cwd")
        ok = runner.run(app("ok", "true"), "local_cwd", after=[first])
        notok = runner.run(app("notok", "true"), "local_cwd", after=[f"{first}:notok"])
        pending = runner.status(ok)
        assert pending is not None and pending.state in (AppState.PENDING, AppState.CANCELLED), pending
        for handle, state in ((ok, AppState.CANCELLED), (notok, AppState.SUCCEEDED)):
            status = runner.wait(handle, wait_interval=0.1)
            assert status is not None and status.state == state, status
        assert "not started" in str(runner.status(ok))
        with pytest.raises(LookupError):
            runner.run(app("x", "true"), "local_cwd", after=["local_cwd://torchx/ghost-1"])
        on_kubernetes = app("x", "true")
        on_kubernetes.roles[0].resource = specs.Resource(cpu=1, gpu=0, memMB=128)
        with pytest.raises(UnsupportedError):
            runner.dryrun(on_kubernetes, "kubernetes", after=[first])
