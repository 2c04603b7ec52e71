"""The extension after ``os.fork()``: the child gets a runtime and schedulers of its own (the
parent's copies lost their threads), so calls into the core work there instead of hanging."""

import os
import signal
import time

from torchx import _native


def test_the_core_works_in_a_forked_child(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHX_STATE_DIR", str(tmp_path))
    assert _native.ext.describe("local_cwd", "not-there") is None  # the parent's runtime is up
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the core answers
        try:
            code = 0 if _native.ext.describe("local_cwd", "not-there") is None else 1
        except BaseException:
            code = 2
        os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the core hung in the forked child")
