"""Warm hosts of Python scheduler plugins (torchx.cli._warm_host): the native CLI's second
command forks its host from the interpreter the first one left, and still behaves exactly as a
fresh interpreter would: the command's environment and directory, a changed plugin reloaded,
errors and hangs reported as a cold host's."""

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List

import pytest

PLUGIN = """
    import os
    from torchx.plugins import register
    from torchx.schedulers.api import Scheduler
    from torchx.specs import AppDryRunInfo, runopts

    IMPORTED_WITH = os.environ.get("WARM_TEST_AT_IMPORT", "")
    VERSION = "{version}"

    class Probe(Scheduler):
        def __init__(self, session_name, **kwargs):
            super().__init__("warm_probe", session_name)

        def _run_opts(self):
            opts = runopts()
            opts.add("knob", type_=str, default="x", help="probe version " + VERSION)
            return opts

        def _submit_dryrun(self, app, cfg):
            if os.environ.get("WARM_TEST_HANG"):
                import time
                with open(os.environ["WARM_TEST_HANG"], "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(60)
            seen = dict(
                version=VERSION,
                at_import=IMPORTED_WITH,
                at_call=os.environ.get("WARM_TEST_AT_CALL", ""),
                cwd=os.getcwd(),
                host=os.getpid(),
                parent=os.getppid(),
            )
            return AppDryRunInfo(seen, repr)

        def schedule(self, dryrun_info):
            raise NotImplementedError

        def describe(self, app_id):
            return None

        def _cancel_existing(self, app_id):
            pass

        def list(self):
            return []

    @register.scheduler()
    def warm_probe(session_name, **kwargs):
        return Probe(session_name)
"""


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    write_probe(tmp_path / "plugins", "1")
    return tmp_path / "plugins"


def write_probe(root: Path, version: str) -> None:
    path = root / "torchx_plugins" / "schedulers" / "warm_probe.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(PLUGIN.format(version=version)))


def dryrun(torchx_bin: str, env: Dict[str, str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [torchx_bin, "run", "--dryrun", "-s", "warm_probe", "utils.echo"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def probe(torchx_bin: str, env: Dict[str, str], cwd: Path) -> Dict[str, object]:
    out = dryrun(torchx_bin, env, cwd)
    assert out.returncode == 0, out.stderr
    line = next(text for text in out.stdout.splitlines() if text.startswith("{"))
    return eval(line)  # the probe's own repr of a dict of str and int


@pytest.fixture
def env(plugin_dir: Path, tmp_path: Path) -> Dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    return {
        **os.environ,
        "TORCHX_PYTHON": sys.executable,
        "PYTHONPATH": str(plugin_dir),
        "XDG_RUNTIME_DIR": str(runtime),
        "TORCHX_PLUGIN_HOST_IDLE": "30",
        "TORCHX_STATE_DIR": str(tmp_path / "state"),
    }


def warm_hosts(env: Dict[str, str]) -> List[Path]:
    return sorted((Path(env["XDG_RUNTIME_DIR"]) / "torchx").glob("host-*.sock"))


def test_second_command_is_forked_from_the_warm_host(torchx_bin: str, env: Dict[str, str], tmp_path: Path) -> None:
    first = probe(torchx_bin, env, tmp_path)
    assert len(warm_hosts(env)) == 1
    second = probe(torchx_bin, env, tmp_path)
    # Both hosts are children of the same warm interpreter, each a process of its own.
    assert first["parent"] == second["parent"]
    assert first["host"] != second["host"]
    assert second["version"] == "1"


def test_each_command_gets_its_environment_and_directory(torchx_bin: str, env: Dict[str, str], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe(torchx_bin, env, tmp_path)
    seen = probe(torchx_bin, {**env, "WARM_TEST_AT_CALL": "b"}, elsewhere)
    assert seen["at_call"] == "b"
    assert seen["cwd"] == str(elsewhere)
    # A variable the plugin reads when imported: another environment, another warm host.
    seen = probe(torchx_bin, {**env, "WARM_TEST_AT_IMPORT": "c"}, tmp_path)
    assert seen["at_import"] == "c"
    assert len(warm_hosts(env)) == 3


def test_a_changed_plugin_is_reloaded(torchx_bin: str, env: Dict[str, str], plugin_dir: Path, tmp_path: Path) -> None:
    before = probe(torchx_bin, env, tmp_path)
    time.sleep(0.01)  # a distinct modification time
    write_probe(plugin_dir, "2")
    # Python's own bytecode cache keys on whole seconds and the size, which a rewrite within
    # the second keeps: it would serve the old module to any importer, warm host or not.
    shutil.rmtree(plugin_dir / "torchx_plugins" / "schedulers" / "__pycache__", ignore_errors=True)
    after = probe(torchx_bin, env, tmp_path)
    assert (before["version"], after["version"]) == ("1", "2")
    assert before["parent"] != after["parent"]
    opts = subprocess.run([torchx_bin, "runopts", "warm_probe"], capture_output=True, text=True, env=env, timeout=120)
    assert "probe version 2" in opts.stdout, opts.stderr


def test_idle_zero_starts_no_warm_host(torchx_bin: str, env: Dict[str, str], tmp_path: Path) -> None:
    cold = {**env, "TORCHX_PLUGIN_HOST_IDLE": "0"}
    first, second = probe(torchx_bin, cold, tmp_path), probe(torchx_bin, cold, tmp_path)
    assert warm_hosts(env) == []
    assert first["parent"] != second["parent"]  # each started by its own command
    bad = subprocess.run(
        [torchx_bin, "runopts", "warm_probe"],
        capture_output=True,
        text=True,
        env={**env, "TORCHX_PLUGIN_HOST_IDLE": "soon"},
        timeout=120,
    )
    assert bad.returncode != 0 and "TORCHX_PLUGIN_HOST_IDLE" in bad.stderr


def test_a_hung_forked_host_is_killed(torchx_bin: str, env: Dict[str, str], tmp_path: Path) -> None:
    hang = {**env, "WARM_TEST_HANG": str(tmp_path / "hung.pid"), "TORCHX_PLUGIN_TIMEOUT": "2"}
    subprocess.run([torchx_bin, "runopts", "warm_probe"], env=hang, capture_output=True, timeout=120)
    started = time.monotonic()
    out = dryrun(torchx_bin, hang, tmp_path)
    assert out.returncode != 0
    assert "no answer within 2s" in out.stderr
    assert time.monotonic() - started < 30
    hung = int((tmp_path / "hung.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{hung}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{hung}").exists(), "the hung host was not killed"
    # Its warm host serves on.
    assert probe(torchx_bin, {**hang, "WARM_TEST_HANG": ""}, tmp_path)["version"] == "1"
