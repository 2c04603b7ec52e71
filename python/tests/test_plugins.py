"""Plugins registered the TorchX way, as Python entry points of an installed distribution:
schedulers, named resources, components and trackers. They add to the builtins; a plugin with
a builtin's name is ignored with a warning (the project's rule; TorchX lets it replace)."""

import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest
import torchx.specs as specs
from torchx.plugins import registry
from torchx.runner import get_runner
from torchx.schedulers import get_default_scheduler_name, get_scheduler_factories
from torchx.tracker.api import build_trackers


@pytest.fixture
def plugin_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed distribution `my-plugins` with a module and entry points."""
    pkg = tmp_path / "my_plugins"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent("""
        from typing import Any, List, Mapping, Optional
        from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
        from torchx.specs import AppDef, AppDryRunInfo, AppState, Resource, runopts

        class EchoScheduler(Scheduler):
            def __init__(self, session_name: str, **kwargs: Any) -> None:
                super().__init__("echo_sched", session_name)
            def _run_opts(self) -> runopts:
                return runopts()
            def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
                return AppDryRunInfo(app.name, str)
            def schedule(self, dryrun_info: AppDryRunInfo) -> str:
                return f"id-{dryrun_info.request}"
            def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
                return DescribeAppResponse(app_id=app_id, state=AppState.SUCCEEDED)
            def list(self) -> List[ListAppResponse]:
                return []
            def _cancel_existing(self, app_id: str) -> None:
                pass

        def create_scheduler(session_name: str, **kwargs: Any) -> EchoScheduler:
            return EchoScheduler(session_name)

        def gpu_x4() -> Resource:
            return Resource(cpu=32, gpu=4, memMB=65536)

        def small() -> Resource:
            return Resource(cpu=1, gpu=0, memMB=1)

        class Tracker:
            def __init__(self, config: Optional[str]) -> None:
                self.config = config

        def create_tracker(config: Optional[str]) -> "Tracker":
            return Tracker(config)
    """)
    )
    (pkg / "components.py").write_text(
        textwrap.dedent('''
        import torchx.specs as specs

        def hello(who: str = "world") -> specs.AppDef:
            """Says hello.

            Args:
                who: whom to greet
            """
            return specs.AppDef(name="hello", roles=[specs.Role(name="hello", image="x", entrypoint="echo", args=[who])])
    ''')
    )
    dist = tmp_path / "my_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent("""
        [torchx.schedulers]
        echo_sched = my_plugins:create_scheduler
        slurm = my_plugins:create_scheduler

        [torchx.named_resources]
        gpu_x4 = my_plugins:gpu_x4
        gpu.small = my_plugins:small

        [torchx.components]
        myco = my_plugins.components

        [torchx.tracker]
        my_tracker = my_plugins:create_tracker
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    specs.named_resources.reset()
    registry.cache_clear()
    yield tmp_path
    registry.cache_clear()
    specs.named_resources.reset()
    for name in [m for m in sys.modules if m.startswith("my_plugins")]:
        del sys.modules[name]


def test_scheduler_plugin_beside_the_builtins(plugin_dist: Path) -> None:
    with pytest.warns(UserWarning, match="scheduler `slurm`.*ignored"):
        factories = dict(get_scheduler_factories())
    assert list(factories)[:2] == ["local_docker", "local_cwd"] and "echo_sched" in factories
    assert get_default_scheduler_name() == "local_docker"
    runner = get_runner()
    handle = runner.run(
        specs.AppDef("app", roles=[specs.Role("r", "img", entrypoint="true", resource=specs.resource())]),
        "echo_sched",
    )
    assert handle == "echo_sched://torchx/id-app"
    assert runner.status(handle).state == specs.AppState.SUCCEEDED
    assert runner._scheduler("slurm").backend == "slurm"  # the builtin, not the plugin


def test_named_resource_plugins(plugin_dist: Path) -> None:
    with pytest.warns(UserWarning, match="`gpu.small`.*ignored"):
        assert specs.resource(h="gpu_x4").gpu == 4
    assert specs.named_resources["gpu.small"].cpu == 8


def test_component_and_tracker_plugins(plugin_dist: Path) -> None:
    info = get_runner().dryrun_component("myco.hello", ["--who", "you"], "local_cwd")
    assert "you" in repr(info)
    (tracker,) = build_trackers({"my_tracker": "cfg.txt"})
    assert tracker.config == "cfg.txt"
