"""The programs builtin components run inside jobs (``python -m torchx.apps...``), run for real
as local_cwd jobs with this package in the job's Python."""

import os
import sys
from pathlib import Path

import pytest
from torchx.runner import get_runner
from torchx.runtime.tracking import FsspecResultTracker
from torchx.specs import AppState


@pytest.fixture
def job_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Replicas run `python`: the one of this environment, which has the package.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)


def _run(component: str, args: list) -> AppState:
    with get_runner() as runner:
        handle = runner.run_component(component, args, scheduler="local_cwd")
        status = runner.wait(handle, wait_interval=0.2, timeout=120)
        assert status is not None
        if status.state != AppState.SUCCEEDED:
            print("".join(runner.log_lines(handle, runner.describe(handle).roles[0].name)))
        return status.state


def test_utils_copy(job_python: None, tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("payload\n")
    dst = tmp_path / "out" / "dst.txt"
    assert _run("utils.copy", ["--src", str(tmp_path / "src.txt"), "--dst", str(dst)]) == AppState.SUCCEEDED
    assert dst.read_text() == "payload\n"


def test_utils_booth_records_the_result(job_python: None, tmp_path: Path) -> None:
    base = tmp_path / "booth"
    state = _run("utils.booth", ["--x1", "1", "--x2", "3", "--trial_idx", "7", "--tracker_base", str(base)])
    assert state == AppState.SUCCEEDED
    assert FsspecResultTracker(str(base))[7] == {"booth_eval": 0.0}


def test_process_monitor_stops_a_program_at_the_timeout(job_python: None, tmp_path: Path) -> None:
    from torchx.apps.utils import process_monitor

    with pytest.raises(SystemExit) as exited:
        process_monitor.main(["--timeout", "0.5", "--poll_rate", "0.1", "--kill_timeout", "5", "--", "sleep", "30"])
    assert exited.value.code == -15  # terminated
    marker = tmp_path / "go"
    marker.touch()
    with pytest.raises(SystemExit) as exited:
        process_monitor.main(["--start_on_file", str(marker), "--poll_rate", "0.1", "--", "sh", "-c", "exit 3"])
    assert exited.value.code == 3
    with pytest.raises(SystemExit) as exited:
        process_monitor.main(
            ["--start_on_file", str(tmp_path / "never"), "--timeout", "0.3", "--poll_rate", "0.1", "true"]
        )
    assert exited.value.code == process_monitor.TIMEOUT_EXIT_CODE


def test_serve_registers_the_model_with_torchserve(tmp_path: Path) -> None:
    """A stand-in TorchServe management API: it fetches the model from the URL it is given
    while handling the POST, as TorchServe does."""
    import threading
    import urllib.parse
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from torchx.apps.serve import serve

    seen: dict = {}

    class Management(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            seen["path"] = urllib.parse.urlparse(self.path).path
            seen["params"] = {k: v[0] for k, v in query.items()}
            with urllib.request.urlopen(seen["params"]["url"], timeout=10) as r:
                seen["model"] = r.read()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"status": "registered"}')

        def log_message(self, *args: object) -> None:
            pass

    api = ThreadingHTTPServer(("127.0.0.1", 0), Management)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        model = tmp_path / "m.mar"
        model.write_bytes(b"model bytes")
        serve.main(
            [
                "--model_path",
                str(model),
                "--management_api",
                f"http://127.0.0.1:{api.server_port}",
                "--port",
                "0",
                "--model_name",
                "resnet",
                "--initial_workers",
                "2",
            ]
        )
    finally:
        api.shutdown()
    assert seen["path"] == "/models" and seen["model"] == b"model bytes"
    assert seen["params"]["model_name"] == "resnet" and seen["params"]["initial_workers"] == "2"
