"""TorchX 0.8's plugins: ``@register`` factories in ``torchx_plugins.*`` namespace packages.
The documented skeleton is pip-installed by scripts/test.sh (examples/namespace-plugin: scheduler
``my_backend``, named resource ``example_node`` with slices and an alias, tracker
``example_memory``) beside the entry-point example (examples/python-plugin)."""

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import torchx.specs as specs
import yaml
from torchx import plugins
from torchx.plugins import (
    HALF,
    WHOLE,
    PluginRegistry,
    PluginType,
    halve_mem_down_to,
    powers_of_two_gpus,
    register,
    resource_tags,
)
from torchx.plugins._registry import PluginSource
from torchx.runner import get_runner
from torchx.schedulers import get_scheduler_factories
from torchx.tracker.api import build_trackers


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("TORCHX_MY_BACKEND_DIR", str(tmp_path / "my_backend"))
    specs.named_resources.reset()
    plugins.registry.cache_clear()
    yield
    plugins.registry.cache_clear()
    specs.named_resources.reset()
    for name in [m for m in sys.modules if m.startswith("torchx_plugins")]:
        del sys.modules[name]


def write_plugins(root: Path, files: Dict[str, str]) -> Path:
    """``torchx_plugins/<path>`` modules under ``root`` (namespace packages: no __init__.py)."""
    for rel, text in files.items():
        path = root / "torchx_plugins" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


BROKEN = {
    "schedulers/broken_sched.py": "raise RuntimeError('cannot reach the cluster')\n",
    "schedulers/good_sched.py": """
        from torchx.plugins import register

        @register.scheduler()
        def good_sched(session_name, **kwargs):
            from torchx_plugins.schedulers.my_backend import MyScheduler

            return MyScheduler(session_name)
    """,
}


def test_the_documented_skeleton_is_discovered() -> None:
    reg = plugins.registry()
    schedulers = reg.get(PluginType.SCHEDULER)
    assert schedulers["my_backend"].__module__ == "torchx_plugins.schedulers.my_backend"
    # Entry points are still read (the deprecated channel), beside the namespace.
    assert "example_subprocess" in schedulers
    assert {"example_node", "example_host", "example_node_8", "example_node_1"} <= set(
        reg.get(PluginType.NAMED_RESOURCE)
    )
    assert "example_memory" in reg.get(PluginType.TRACKER)
    report = yaml.safe_load(str(reg))
    (node,) = [r for r in report["named_resource"] if r["name"] == "example_node"]
    assert node["aliases"] == ["example_host"]
    assert sorted(node["fractionals"]) == [f"example_node_{n}" for n in (1, 2, 4, 8)]
    assert report["errors"] == []


def test_runner_and_factories_use_the_namespace_scheduler() -> None:
    factories = get_scheduler_factories()
    assert list(factories)[:2] == ["local_docker", "local_cwd"]
    assert "my_backend" in factories
    app = specs.AppDef(
        "hello",
        roles=[specs.Role("r", "img", entrypoint="sh", args=["-c", "echo from-ns"], resource=specs.resource())],
    )
    with get_runner() as runner:
        handle = runner.run(app, "my_backend", cfg={"cluster": "c1"})
        assert handle.startswith("my_backend://torchx/hello-")
        assert runner.wait(handle, wait_interval=0.1).state == specs.AppState.SUCCEEDED
        assert "from-ns" in "".join(runner.log_lines(handle, "r"))


def test_named_resources_and_trackers_from_the_namespace() -> None:
    node = specs.resource(h="example_node_4")
    assert (node.gpu, node.cpu) == (4, 32)
    assert node.is_fractional() and node.get_resource_name() == "example_node_4"
    whole = specs.named_resources["example_host"]
    assert whole.gpu == 8 and not whole.is_fractional()
    assert whole.get_resource_name() == "example_node"
    (tracker,) = build_trackers({"example_memory": "cfg"})
    assert type(tracker).__name__ == "MemoryTracker" and tracker.config == "cfg"


def test_register_helpers() -> None:
    gpus8 = specs.Resource(cpu=8, gpu=8, memMB=64 * 1024)
    assert powers_of_two_gpus(gpus8) == {1.0: "8", 0.5: "4", 0.25: "2", 0.125: "1"}
    assert halve_mem_down_to(minGiB=16)(gpus8) == {1.0: "64", 0.5: "32", 0.25: "16"}
    with pytest.raises(ValueError, match="power of two"):
        powers_of_two_gpus(specs.Resource(cpu=1, gpu=6, memMB=1))
    with pytest.raises(ValueError, match="odd part"):
        halve_mem_down_to(minGiB=2)(specs.Resource(cpu=1, gpu=0, memMB=24 * 1024))

    @register.scheduler(name="named")
    def factory() -> None: ...

    assert (factory._plugin_type, factory._plugin_name) == (PluginType.SCHEDULER, "named")  # type: ignore[attr-defined]
    assert resource_tags.IS_FRACTIONAL == "torchx/named_resources.is_fractional"
    assert (WHOLE, HALF) == (1.0, 0.5)


def test_broken_and_colliding_plugins_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_plugins(
        tmp_path,
        {
            **BROKEN,
            # The entry-point example's name: the entry point wins, the collision is recorded.
            "schedulers/shadowed.py": """
                from torchx.plugins import register

                @register.scheduler()
                def example_subprocess(session_name, **kwargs): ...
            """,
            # A builtin's name: never replaces the builtin.
            "schedulers/local.py": """
                from torchx.plugins import register

                @register.scheduler()
                def local_cwd(session_name, **kwargs): ...
            """,
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = plugins.registry()
    found = reg.get(PluginType.SCHEDULER)
    assert "good_sched" in found and "broken_sched" not in found
    errors = reg.load_errors(PluginType.SCHEDULER)
    broken = [e for e in errors if e.module == "torchx_plugins.schedulers.broken_sched"]
    assert broken and "cannot reach the cluster" in broken[0].error and broken[0].name is None
    (clash,) = [e for e in errors if e.name == "example_subprocess"]
    assert "entry point wins" in clash.error
    assert found["example_subprocess"].__module__ == "torchx.util.entrypoints"
    with pytest.warns(UserWarning, match="scheduler `local_cwd` of the plugins .* ignored"):
        factories = dict(get_scheduler_factories())
    assert factories["local_cwd"].__module__ == "torchx.schedulers"  # the builtin's loader


def test_plugin_sources_gate_the_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_PLUGINS_SOURCE", "1")
    names = plugins.registry().get(PluginType.SCHEDULER)
    assert "my_backend" in names and "example_subprocess" not in names
    plugins.registry.cache_clear()
    monkeypatch.setenv("TORCHX_PLUGINS_SOURCE", "2")
    names = plugins.registry().get(PluginType.SCHEDULER)
    assert "my_backend" not in names and "example_subprocess" in names
    assert PluginRegistry(plugin_sources=PluginSource.NONE).get(PluginType.SCHEDULER) == {}
    plugins.registry.cache_clear()
    monkeypatch.setenv("TORCHX_PLUGINS_SOURCE", "7")
    with pytest.raises(ValueError, match="TORCHX_PLUGINS_SOURCE='7' is invalid"):
        plugins.registry()


# -- the native CLI ----------------------------------------------------------------------------


def cli(torchx_bin: str, args: List[str], **env: str) -> "subprocess.CompletedProcess[str]":
    full = {**os.environ, "TORCHX_PYTHON": sys.executable, **env}
    return subprocess.run([torchx_bin, *args], capture_output=True, text=True, env=full, timeout=120)


def test_cli_runs_the_namespace_scheduler(torchx_bin: str, tmp_path: Path) -> None:
    out = cli(torchx_bin, ["runopts", "my_backend"])
    assert out.returncode == 0, out.stderr
    assert "cluster=CLUSTER" in out.stdout and "Queue / partition" in out.stdout
    dry = cli(torchx_bin, ["run", "--dryrun", "-s", "my_backend", "utils.echo", "--msg", "hi"])
    assert dry.returncode == 0, dry.stderr
    assert "MyRequest(job_name='echo', cmd=['echo', 'hi']" in dry.stdout
    run = cli(torchx_bin, ["run", "-s", "my_backend", "utils.echo", "--msg", "ns-hello"])
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[-1]
    assert handle.startswith("my_backend://torchx/echo-")
    status = cli(torchx_bin, ["status", "--json", handle])
    assert json.loads(status.stdout)["state"] == "SUCCEEDED", status.stderr
    log = cli(torchx_bin, ["log", f"{handle}/echo/0"])
    assert "ns-hello" in log.stdout, log.stderr
    listed = cli(torchx_bin, ["list", "-s", "my_backend"])
    assert handle in listed.stdout, listed.stderr


def test_cli_reports_a_broken_plugin_by_name(torchx_bin: str, tmp_path: Path) -> None:
    write_plugins(tmp_path, BROKEN)
    env = {"PYTHONPATH": str(tmp_path)}
    # A command that needs no plugin is untouched.
    ok = cli(torchx_bin, ["run", "--dryrun", "-s", "local_cwd", "utils.echo"], **env)
    assert ok.returncode == 0, ok.stderr
    # A scheduler the broken module may have held: the error names the module and its failure.
    missing = cli(torchx_bin, ["run", "--dryrun", "-s", "broken_sched", "utils.echo"], **env)
    assert missing.returncode != 0
    assert "torchx_plugins.schedulers.broken_sched" in missing.stderr
    assert "cannot reach the cluster" in missing.stderr
    # Listing every scheduler still works and warns about the module.
    listing = cli(torchx_bin, ["runopts"], **env)
    assert listing.returncode == 0, listing.stderr
    assert "good_sched" in listing.stdout and "my_backend" in listing.stdout
    assert "broken_sched" in listing.stderr


def test_cli_ignores_a_namespace_plugin_with_a_builtins_name(torchx_bin: str, tmp_path: Path) -> None:
    write_plugins(
        tmp_path,
        {
            "schedulers/impostor.py": """
                from torchx.plugins import register

                @register.scheduler()
                def local_cwd(session_name, **kwargs):
                    raise AssertionError("a plugin never replaces a builtin")
            """
        },
    )
    out = cli(torchx_bin, ["run", "--dryrun", "-s", "local_cwd", "utils.echo"], PYTHONPATH=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "=== SCHEDULER REQUEST ===" in out.stdout
    listing = cli(torchx_bin, ["runopts"], PYTHONPATH=str(tmp_path))
    assert "scheduler `local_cwd` of the plugins" in listing.stderr and "ignored" in listing.stderr


def test_cli_uses_namespace_named_resources(torchx_bin: str) -> None:
    out = cli(
        torchx_bin,
        ["run", "--dryrun", "--json", "-s", "local_cwd", "dist.ddp", "-h", "example_node_4", "--script", "t.py"],
    )
    assert out.returncode == 0, out.stderr
    resource = json.loads(out.stdout)["app"]["roles"][0]["resource"]
    assert (resource["cpu"], resource["gpu"]) == (32, 4)


def test_the_schedulers_module_has_the_plugins_name_0_8_patches() -> None:
    """TorchX 0.8's registry tests patch ``torchx.schedulers.plugins``: patched, its registry is
    the one asked (a plugin still adds to the builtins here, never hides them)."""
    from unittest.mock import MagicMock, patch

    with patch("torchx.schedulers.plugins") as plugins_mock:
        sentinel = MagicMock()
        plugins_mock.registry.return_value.get.return_value = {"custom_sched": sentinel}
        factories = get_scheduler_factories()
        assert factories["custom_sched"] is sentinel
        assert "local_cwd" in factories
    assert "custom_sched" not in get_scheduler_factories()


def test_event_handler_plugins_route_the_runners_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The nightly's fourth plugin group: a handler named after a destination wins over the
    # builtin ones, and the runner's events reach it.
    write_plugins(
        tmp_path,
        {
            "event_handlers/sink.py": """
                import logging

                from torchx.plugins import register

                RECORDS = []


                class Sink(logging.Handler):
                    def emit(self, record):
                        RECORDS.append(record.getMessage())


                @register.event_handler(name="my_sink")
                def my_sink():
                    return Sink()


                @register.event_handler()
                def console():
                    return Sink()
            """,
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from torchx.runner.events import handlers

    assert type(handlers.get_logging_handler("my_sink")).__name__ == "Sink"
    assert type(handlers.get_logging_handler("console")).__name__ == "Sink"
    assert isinstance(handlers.get_logging_handler("null"), logging.NullHandler)
    with pytest.raises(KeyError):
        handlers.get_logging_handler("nowhere")

    @register.event_handler()
    def named_after_its_function() -> None: ...

    assert named_after_its_function._plugin_type is PluginType.EVENT_HANDLER  # type: ignore[attr-defined]
    assert PluginType.EVENT_HANDLER.value == "torchx.event_handlers"
