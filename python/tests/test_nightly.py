"""What TorchX's nightly (2026.10) added to the API, as the nightly behaves (issue #55)."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, List

import pytest
from torchx.specs import AppDef, Role

if TYPE_CHECKING:
    from torchx.specs import runopts


def _app() -> AppDef:
    return AppDef(
        name="my_train",
        roles=[Role(name="trainer", image="img"), Role(name="reader", image="img")],
    )


def test_get_role_returns_the_role_itself() -> None:
    app = _app()
    assert app.get_role("trainer") is app.roles[0]
    assert app["reader"] is app.roles[1]
    app["trainer"].image = "other"
    assert app.roles[0].image == "other"


def test_a_missing_role_is_a_key_error_naming_the_roles() -> None:
    with pytest.raises(KeyError, match="app `my_train` has no role named `ps`; available roles: trainer, reader"):
        _app().get_role("ps")
    with pytest.raises(KeyError, match="available roles: none"):
        AppDef(name="empty")["x"]


def test_membership_is_by_role_name() -> None:
    app = _app()
    assert "trainer" in app
    assert "ps" not in app
    assert app.roles[0] not in app  # a Role object is never "in" an app


def test_an_app_is_not_iterable() -> None:
    with pytest.raises(TypeError):
        iter(_app())
    with pytest.raises(TypeError):
        for _ in _app():  # pragma: no cover - never runs
            pass
    # Still a record: fields, equality and repr as before.
    assert _app() == _app()
    assert repr(_app()).startswith("AppDef(name='my_train'")


def test_ddp_and_spmd_are_aliases_of_torchrun_that_warn() -> None:
    import warnings

    from torchx.components import dist

    for alias in ("ddp", "spmd"):
        with pytest.warns(
            UserWarning, match=rf"\[Deprecated\] dist\.{alias} is deprecated; use dist\.torchrun instead\."
        ):
            getattr(dist, alias)(script="train.py")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app = dist.torchrun(script="train.py", j="2x2")
    with pytest.warns(UserWarning):
        assert dist.ddp(script="train.py", j="2x2") == app
    # The alias keeps its own reading of a bare -j: processes on one node (torchrun's with a
    # named host is nodes).
    with pytest.warns(UserWarning):
        assert dist.ddp(script="train.py", j="4").roles[0].num_replicas == 1


def test_the_cli_warns_for_the_aliases_too(torchx_bin: str, tmp_path: pathlib.Path) -> None:
    import subprocess

    for component, warned in (("dist.ddp", True), ("dist.torchrun", False)):
        out = subprocess.run(
            [torchx_bin, "run", "--dryrun", "-s", "local_cwd", component, "--script", "t.py"],
            capture_output=True,
            text=True,
            cwd=str(tmp_path),
            check=True,
        )
        said = f"[Deprecated] {component} is deprecated; use dist.torchrun instead." in out.stderr
        assert said == warned, out.stderr


def test_run_and_status_json_name_the_app_as_the_nightly(torchx_bin: str, tmp_path: pathlib.Path) -> None:
    import json
    import subprocess

    def cli(*args: str) -> dict[str, object]:
        out = subprocess.run([torchx_bin, *args], capture_output=True, text=True, cwd=str(tmp_path), check=True)
        value: dict[str, object] = json.loads(out.stdout)  # stdout holds the one JSON object
        return value

    ran = cli("run", "--json", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    handle = str(ran["handle"])
    assert handle.startswith("local_cwd://")
    assert ran["app_id"] == handle.rsplit("/", 1)[1]
    assert ran["scheduler"] == "local_cwd"
    assert ran["state"] == "SUCCEEDED"
    assert str(ran["ui_url"]).startswith("file://")
    status = cli("status", "--json", handle)
    for key in ("handle", "app_id", "scheduler", "state", "num_restarts", "roles", "msg", "url", "ui_url"):
        assert key in status, key
    assert status["handle"] == handle and status["ui_url"] == status["url"]
    dry = cli("run", "--dryrun", "--json", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    for key in ("scheduler", "cfg", "app", "request"):
        assert key in dry, key


def _opts() -> "runopts":
    from torchx.specs import runopts

    opts = runopts()
    opts.add("cluster_name", type_=str, default="c", help="a cluster")
    opts.add("tags", type_=List[str], default=None, help="tags")
    return opts


def test_unknown_run_options_raise_unless_ignored() -> None:
    from torchx.specs import InvalidRunConfigException

    opts = _opts()
    for call in (
        lambda: opts.resolve({"nope": 1}),
        lambda: opts.cfg_from_str("nope=1"),
        lambda: opts.cfg_from_json_repr('{"nope": 1}'),
    ):
        with pytest.raises(
            InvalidRunConfigException, match="Unknown run option `nope`. Valid options are: cluster_name, tags"
        ):
            call()
    assert opts.resolve({"nope": 1}, ignore_unknown=True) == {"nope": 1, "cluster_name": "c", "tags": None}
    assert opts.cfg_from_json_repr('{"nope": 1, "tags": ["a"]}', ignore_unknown=True) == {"tags": ["a"]}


def test_camel_case_spellings_are_canonicalised() -> None:
    from torchx.specs import InvalidRunConfigException

    opts = _opts()
    assert opts.canonical_key("clusterName") == "cluster_name"
    assert opts.canonical_key("cluster_name") == "cluster_name"
    assert opts.canonical_key("nope") is None
    assert opts.resolve({"clusterName": "x"}) == {"cluster_name": "x", "tags": None}
    assert opts.cfg_from_str("clusterName=x,tags=a;b") == {"cluster_name": "x", "tags": ["a", "b"]}
    assert opts.resolve({"clusterName": "x", "cluster_name": "x"})["cluster_name"] == "x"
    with pytest.raises(InvalidRunConfigException, match="passed under two spellings"):
        opts.resolve({"clusterName": "x", "cluster_name": "y"})


def test_resource_h_is_the_one_lookup_and_ignores_case() -> None:
    import warnings

    from torchx import specs

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert specs.resource(h="AWS_T3.Medium") == specs.resource(h="aws_t3.medium")
        assert "Gpu.Small" in specs.named_resources
    with pytest.warns(
        FutureWarning, match=r"`named_resources\[name\]` is deprecated, use `resource\(h=name\)` instead"
    ):
        assert specs.named_resources["gpu.small"] == specs.resource(h="gpu.small")
    with pytest.warns(FutureWarning, match=r"`get_named_resources\(\)` is deprecated"):
        specs.get_named_resources("gpu.small")
    with pytest.raises(KeyError, match="Did you mean `gpu.small`"):
        specs.resource(h="gpu.smal")


def test_a_name_that_spells_two_resources_ignoring_case_is_ambiguous(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx import specs

    table = {"Big": lambda: specs.Resource(cpu=1, gpu=0, memMB=1), "BIG": lambda: specs.Resource(cpu=2, gpu=0, memMB=1)}
    monkeypatch.setattr(specs, "_named_resource_factories", table, raising=False)
    assert specs.resource(h="BIG").cpu == 2  # an exact name wins
    with pytest.raises(KeyError, match="matches more than one registered named resource, ignoring case"):
        specs.resource(h="big")


def test_dryrun_info_app_and_cfg_are_plain_attributes_with_the_0_7_names_too() -> None:
    from torchx.runner import get_runner
    from torchx.specs import AppDryRunInfo

    info = AppDryRunInfo("request", str)
    assert info.app is None and info.cfg == {}
    app = _app()
    info._app = app  # NeMo-Run sets the 0.7 names
    info._cfg = {"a": 1}
    assert info.app is app and info.cfg == {"a": 1}
    info.cfg["b"] = 2  # the nightly's cfg is the scheduler's own mapping, not read-only
    assert info._cfg == {"a": 1, "b": 2}
    with get_runner() as runner:
        dry = runner.dryrun(AppDef("echo", [Role("echo", image="x", entrypoint="echo", args=["hi"])]), "local_cwd")
    assert dry.app is not None and dry.app.name == "echo"
    assert dry.cfg["prepend_cwd"] is False and dry._cfg is dry.cfg


def test_set_overlay_takes_dataclass_instances() -> None:
    import dataclasses
    import enum
    from typing import Optional

    from torchx.specs.overlays import get_overlay, set_overlay

    class Policy(enum.Enum):
        ALWAYS = "Always"

    @dataclasses.dataclass
    class Container:
        name: str
        image_pull_policy: Policy = Policy.ALWAYS
        args: Optional[list[str]] = None

    @dataclasses.dataclass
    class Spec:
        containers: list[Container]
        node_selector: dict[str, str] = dataclasses.field(default_factory=dict)

    role = Role(name="r", image="img")
    set_overlay(role, "kubernetes", "V1Pod", {"spec": Spec(containers=[Container(name="c")])})
    assert get_overlay(role, "kubernetes", "V1Pod") == {
        "spec": {"containers": [{"name": "c", "image_pull_policy": "Always"}], "node_selector": {}}
    }
    with pytest.raises(TypeError, match="overlay must be a dict or dataclass instance"):
        set_overlay(role, "kubernetes", "V1Pod", Spec)  # type: ignore[arg-type]

    @dataclasses.dataclass
    class Bad:
        value: object

    with pytest.raises(TypeError, match=r"overlay\.value: unsupported dataclass overlay value object"):
        set_overlay(role, "kubernetes", "V1Pod", Bad(value=object()))


def test_a_join_set_twice_merges_its_items_by_key() -> None:
    from torchx.specs.overlays import JOIN, apply_overlay, get_overlay, set_overlay

    role = Role(name="r", image="img")
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {JOIN("containers", on="name"): [{"name": "a", "image": "x"}]}})
    set_overlay(
        role,
        "kubernetes",
        "V1Pod",
        {"spec": {JOIN("containers", on="name"): [{"name": "a", "args": ["1"]}, {"name": "b"}]}},
    )
    stored = get_overlay(role, "kubernetes", "V1Pod")
    assert stored == {
        "spec": {JOIN("containers", on="name"): [{"name": "a", "image": "x", "args": ["1"]}, {"name": "b"}]}
    }
    base = {"spec": {"containers": [{"name": "a", "image": "old"}, {"name": "c"}]}}
    apply_overlay(base, stored)
    assert base == {"spec": {"containers": [{"name": "a", "image": "x", "args": ["1"]}, {"name": "c"}, {"name": "b"}]}}


def test_describe_native_reads_back_what_local_cwd_was_sent(tmp_path: pathlib.Path) -> None:
    from torchx.runner import get_runner
    from torchx.schedulers.local_scheduler import create_scheduler

    app = AppDef("echo", [Role("echo", image=str(tmp_path), entrypoint="echo", args=["hi"])])
    with get_runner() as runner:
        info = runner.dryrun(app, "local_cwd")
        handle = runner.schedule(info)
        runner.wait(handle, wait_interval=0.1)
        native = runner.describe_native(handle)
        assert native is not None
        assert native.request.to_json() == info.request.to_json()
        assert native._scheduler == "local_cwd"
        assert runner.describe_native("local_cwd://torchx/echo-no-such-app") is None
    assert create_scheduler("s").describe_native(handle.rsplit("/", 1)[-1]) is not None


def test_describe_native_is_none_where_a_scheduler_cannot_read_back() -> None:
    from typing import Any, Mapping, Optional

    from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
    from torchx.specs import AppDryRunInfo

    class Plain(Scheduler[Mapping[str, Any]]):
        def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
            return "x"

        def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Any]:
            return AppDryRunInfo(app, repr)

        def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
            return None

        def list(self) -> List[ListAppResponse]:
            return []

        def _cancel_existing(self, app_id: str) -> None:
            pass

    assert Plain("plain", "s").describe_native("anything") is None


def test_describe_native_reads_slurms_batch_script_back(tmp_path: pathlib.Path) -> None:
    from _engines import slurm_up

    if not slurm_up():
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
    from torchx.runner import get_runner

    app = AppDef("echo", [Role("echo", image=str(tmp_path), entrypoint="echo", args=["hi"])])
    with get_runner() as runner:
        info = runner.dryrun(app, "slurm", cfg={"job_dir": str(tmp_path / "job")})
        handle = runner.schedule(info)
        native = runner.describe_native(handle)
        assert native is not None
        assert native.request.to_json()["script"] == info.request.to_json()["script"]
        runner.wait(handle, wait_interval=0.2)


def test_describe_native_inspects_local_dockers_containers(tmp_path: pathlib.Path) -> None:
    from _engines import docker_up

    if not docker_up():
        pytest.skip("no Docker engine (scripts/docker/up.sh)")
    from torchx.runner import get_runner

    app = AppDef("echo", [Role("echo", image="busybox:local", entrypoint="echo", args=["native"])])
    with get_runner() as runner:
        handle = runner.run(app, "local_docker")
        runner.wait(handle, wait_interval=0.2)
        native = runner.describe_native(handle)
        assert native is not None
        (container,) = native.request.to_json()["containers"]
        assert container["Config"]["Image"] == "busybox:local"
        assert container["Config"]["Cmd"] == ["echo", "native"]
        runner.delete(handle)
        assert runner.describe_native(handle) is None


def test_build_workspace_has_nothing_to_prebuild_where_jobs_read_the_directory(tmp_path: pathlib.Path) -> None:
    from torchx.runner import get_runner
    from torchx.specs import Workspace

    role = Role("echo", image=str(tmp_path), entrypoint="echo", args=["hi"], workspace=Workspace({str(tmp_path): ""}))
    with get_runner() as runner:
        assert runner.build_workspace(AppDef("a", [role]), "local_cwd") == {}
        assert runner.build_workspace(role, "local_cwd") is None
    assert role.workspace  # not changed


def test_build_workspace_builds_once_and_pins_onto_other_apps(tmp_path: pathlib.Path) -> None:
    from _engines import docker_up

    if not docker_up():
        pytest.skip("no Docker engine (scripts/docker/up.sh)")
    import subprocess

    from torchx.runner import get_runner
    from torchx.specs import Workspace
    from torchx.workspace import pin_workspace_images

    (tmp_path / "hello.txt").write_text("built once\n")
    ws = Workspace({str(tmp_path): ""})

    def app() -> AppDef:
        return AppDef("ws", [Role("cat", image="busybox:local", entrypoint="cat", args=["hello.txt"], workspace=ws)])

    with get_runner() as runner:
        authored = app()
        images = runner.build_workspace(authored, "local_docker")
        assert authored.roles[0].image == "busybox:local" and authored.roles[0].workspace == ws
        ((key, built),) = images.items()
        assert key == ("busybox:local", ws) and built != "busybox:local"
        assert subprocess.run(["docker", "image", "inspect", built], capture_output=True).returncode == 0
        assert runner.build_workspace(authored.roles[0], "local_docker") == built
        other = app()
        pin_workspace_images(other, images)
        assert other.roles[0].image == built and not other.roles[0].workspace
        handle = runner.run(other, "local_docker")
        status = runner.wait(handle, wait_interval=0.2)
        assert status is not None and status.state.name == "SUCCEEDED"
        assert "".join(runner.log_lines(handle, "cat")).strip() == "built once"
        runner.delete(handle)


def test_components_by_module_path_and_class_components(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx.specs.file_linter import validate
    from torchx.specs.finder import ComponentNotFoundException, get_component

    pkg = tmp_path / "nightly_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "comps.py").write_text(
        "import torchx.specs as specs\n\n\n"
        "def hello(msg: str = 'hi') -> specs.AppDef:\n"
        "    return specs.AppDef(name='h', roles=[specs.Role(name='h', image='i', entrypoint='echo', args=[msg])])\n\n\n"
        "class Greeter:\n"
        "    def __init__(self, msg: str = 'hey') -> None:\n"
        "        self.msg = msg\n\n"
        "    def build(self) -> specs.AppDef:\n"
        "        return specs.AppDef(name='g', roles=[specs.Role(name='g', image='i', entrypoint='echo', args=[self.msg])])\n\n\n"
        "class NoBuild:\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in (
        "nightly_pkg.comps:hello",
        "nightly_pkg.comps.hello",
        "nightly_pkg.comps:Greeter",
        "nightly_pkg.comps.Greeter",
    ):
        component = get_component(name)
        assert component.name == name
        assert component.fn(msg="x").roles[0].args == ["x"]
    assert validate(str(pkg / "comps.py"), "Greeter") == []
    with pytest.raises(Exception, match="must define a `build"):
        get_component("nightly_pkg.comps:NoBuild")
    with pytest.raises(ComponentNotFoundException, match="Module `nightly_pkg.nope` not found on the python path"):
        get_component("nightly_pkg.nope:hello")
    with pytest.raises(ComponentNotFoundException, match="Or addressable as"):
        get_component("no_such_pkg.mod.fn")


def test_a_new_runner_describes_a_slurm_jobs_image_and_entrypoint(tmp_path: pathlib.Path) -> None:
    # Monarch's `info` describes a job from a new Runner: as TorchX, the role's image is the
    # job's working directory and its entrypoint the batch script.
    from _engines import slurm_up

    if not slurm_up():
        pytest.skip("no Slurm cluster (scripts/slurm/up.sh)")
    from torchx.runner import get_runner

    job_dir = tmp_path / "job"
    app = AppDef("sleeper", [Role("sleeper", image=str(tmp_path), entrypoint="sleep", args=["5"])])
    with get_runner() as runner:
        handle = runner.run(app, "slurm", cfg={"job_dir": str(job_dir)})
    with get_runner() as other:
        described = other.describe(handle)
        assert described is not None
        (role,) = described.roles
        assert role.name == "sleeper" and role.num_replicas == 1
        assert role.image == str(job_dir) and role.entrypoint.endswith("torchx-sbatch.sh")
        other.cancel(handle)


def test_torchxconfig_spellings_canonicalise_and_must_agree() -> None:
    import io

    from torchx.runner.config import load
    from torchx.specs.api import InvalidRunConfigException

    cfg: dict = {}
    load("slurm", io.StringIO("[slurm]\njobDir = /tmp/x\n"), cfg)
    assert cfg == {"job_dir": "/tmp/x"}
    kept = {"job_dir": "/mine"}
    load("slurm", io.StringIO("[slurm]\njobDir = /tmp/x\n"), kept)
    assert kept == {"job_dir": "/mine"}
    with pytest.raises(InvalidRunConfigException, match="two spellings"):
        load("slurm", io.StringIO("[slurm]\njob_dir = /a\njobDir = /b\n"), {})


def test_structured_opts_spellings_must_agree() -> None:
    from torchx.schedulers.slurm_scheduler import SlurmOpts
    from torchx.specs.api import InvalidRunConfigException

    assert SlurmOpts.from_cfg({"job_dir": "/a", "jobDir": "/a"}).job_dir == "/a"
    with pytest.raises(InvalidRunConfigException, match="job_dir.*two spellings"):
        SlurmOpts.from_cfg({"job_dir": "/a", "jobDir": "/b"})


def test_a_component_file_is_a_real_module_with_torchxs_names_at_hand(tmp_path: pathlib.Path) -> None:
    import sys

    from torchx.specs.finder import get_component

    pkg = tmp_path / "file_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("ROLE = 'from-a-sibling'\n")
    (pkg / "comp.py").write_text(
        "from torchx.specs import Role\n\nfrom .helpers import ROLE\n\n\n"
        "def main() -> AppDef:  # AppDef unimported, as TorchX 0.7 allowed\n"
        "    return AppDef(name='m', roles=[Role(name=ROLE, image='i', entrypoint='true')])\n"
    )
    component = get_component(f"{pkg / 'comp.py'}:main")
    assert component.fn.__module__ == "file_pkg.comp" and sys.modules["file_pkg.comp"].__file__ == str(pkg / "comp.py")
    assert component.fn().roles[0].name == "from-a-sibling"
    assert get_component(f"{pkg / 'comp.py'}:main").fn is component.fn  # loaded once


def test_registered_components_replace_the_builtins_only_in_torchxs_own_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx.specs import finder

    custom = finder.ModuleComponentsFinder("torchx.components.utils", "mine").find()
    monkeypatch.setattr(finder, "_load_custom_components", lambda validators=None: custom)
    monkeypatch.setattr(finder, "_components", None)
    assert set(finder._load_components()) == {c.name for c in custom}  # as TorchX's
    everything = finder._find_components()
    assert "dist.ddp" in everything and "mine.echo" in everything  # ours adds


def test_a_builtin_schedulers_submit_dryrun_takes_its_typed_options_or_a_dict() -> None:
    # The nightly hands `_submit_dryrun` a StructuredOpts (#1461); 0.7 code (NeMo-Run) a dict.
    from torchx.schedulers.slurm_scheduler import SlurmOpts, create_scheduler

    app = AppDef("a", [Role("r", image="/tmp", entrypoint="echo", args=["hi"])])
    scheduler = create_scheduler("s")
    typed = scheduler._submit_dryrun(app, SlurmOpts(slurm_version="24.11", partition="p"))
    plain = scheduler._submit_dryrun(app, {"slurm_version": "24.11", "partition": "p"})
    for info in (typed, plain):
        assert "--partition=p" in str(info.request.to_json()["script"])
