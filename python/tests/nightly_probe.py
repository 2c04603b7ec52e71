"""Calls of the API TorchX's nightly (2026.10) added, each reduced to plain data, printed as one
JSON object: run with the nightly's interpreter and with ours, the two must be equal
(``test_nightly_differential.py``). A call that raises is reduced to its exception's class
name: messages are ours to word."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional

PROBES: Dict[str, Callable[[], Any]] = {}


def probe(fn: Callable[[], Any]) -> Callable[[], Any]:
    PROBES[fn.__name__] = fn
    return fn


def raised(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the class name of what it raised."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the class is the probe's answer
        return {"raises": type(e).__name__}


def raised_a(kind: type, fn: Callable[[], Any]) -> bool:
    """Whether ``fn()`` raises a ``kind`` (where the two name their classes differently)."""
    try:
        fn()
    except kind:
        return True
    return False


def warned(fn: Callable[[], Any]) -> List[str]:
    """The categories of the warnings ``fn()`` gives, in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w.category.__name__ for w in caught]


def _app() -> Any:
    from torchx.specs import AppDef, Role

    return AppDef(name="my_train", roles=[Role(name="trainer", image="img"), Role(name="reader", image="img")])


@probe
def get_role() -> Any:
    app = _app()
    return {
        "get_role": app.get_role("trainer").name,
        "item": app["reader"].name,
        "is_the_role": app["trainer"] is app.roles[0],
        "in": ["trainer" in app, "ps" in app],
        "missing": raised(lambda: app.get_role("ps")),
        "iter": raised(lambda: iter(app)),
    }


@probe
def torchrun_and_its_aliases() -> Any:
    from torchx.components import dist

    def role(app: Any) -> Any:
        r = app.roles[0]
        return {"replicas": r.num_replicas, "entrypoint": r.entrypoint, "gpu": r.resource.gpu}

    return {
        "torchrun": role(dist.torchrun(script="train.py", j="2x1")),
        "ddp_warns": warned(lambda: dist.ddp(script="train.py", j="1x1")),
        "spmd_warns": warned(lambda: dist.spmd(script="train.py", j="1x1")),
        "torchrun_warns": warned(lambda: dist.torchrun(script="train.py", j="1x1")),
        "named_host_nodes": role(dist.torchrun(script="train.py", j="2", h="aws_p4d.24xlarge")),
    }


def _opts() -> Any:
    from torchx.specs import runopts

    opts = runopts()
    opts.add("cluster_name", type_=str, help="the cluster", default="c")
    opts.add("retries", type_=int, help="how many", default=0)
    return opts


@probe
def strict_run_options() -> Any:
    opts = _opts()
    return {
        "unknown": raised(lambda: opts.resolve({"nope": 1})),
        "ignore_unknown": raised(lambda: sorted(opts.resolve({"nope": 1}, ignore_unknown=True).items())),
        "camel": raised(lambda: sorted(opts.resolve({"clusterName": "x"}).items())),
        "two_spellings": raised(lambda: opts.resolve({"clusterName": "x", "cluster_name": "y"})),
        "same_twice": raised(lambda: sorted(opts.resolve({"clusterName": "x", "cluster_name": "x"}).items())),
        "canonical": [opts.canonical_key("clusterName"), opts.canonical_key("cluster_name"), opts.canonical_key("x")],
        "from_str": raised(lambda: opts.cfg_from_str("cluster_name=a,nope=b")),
        "from_str_known": raised(lambda: sorted(opts.cfg_from_str("cluster_name=a,retries=2").items())),
        "from_json": raised(lambda: opts.cfg_from_json_repr('{"nope": 1}')),
        "wrong_type": raised(lambda: opts.resolve({"retries": "two"})),
    }


@probe
def dryrun_info_attributes() -> Any:
    from torchx.specs import AppDryRunInfo

    info = AppDryRunInfo("request", str)
    before = [info.app is None, info.cfg]
    app = _app()
    info.app = app
    info.cfg = {"a": 1}
    return {"before": before, "app": info.app is app, "cfg": info.cfg, "str": str(info)}


@probe
def named_resources() -> Any:
    from torchx import specs

    return {
        "exact": specs.resource(h="aws_p4d.24xlarge").gpu,
        "any_case": raised(lambda: specs.resource(h="AWS_P4D.24XLARGE").gpu),
        "unknown": raised(lambda: specs.resource(h="no_such_host")),
        "subscript_warns": warned(lambda: specs.named_resources["aws_p4d.24xlarge"]),
    }


@probe
def overlays() -> Any:
    import dataclasses

    from torchx.specs import Role
    from torchx.specs.overlays import JOIN, apply_overlay, get_overlay, set_overlay

    @dataclasses.dataclass
    class Container:
        name: str
        image: Optional[str] = None

    @dataclasses.dataclass
    class Spec:
        containers: List[Container]

    role = Role(name="r", image="i")
    set_overlay(role, "kubernetes", "V1Pod", {"spec": Spec(containers=[Container(name="sidecar", image="s")])})
    base = {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}
    apply_overlay(base, {JOIN("containers", on="name"): [{"name": "b", "image": "z"}, {"name": "c"}]})
    return {"dataclass": get_overlay(role, "kubernetes", "V1Pod"), "join": base}


@probe
def pin_workspace_images() -> Any:
    from torchx.specs import AppDef, Role, Workspace
    from torchx.workspace import pin_workspace_images

    ws = Workspace({"/src": ""})
    app = AppDef(
        "a",
        [
            Role(name="built", image="base", workspace=ws),
            Role(name="other_base", image="base2", workspace=ws),
            Role(name="none", image="base"),
        ],
    )
    pin_workspace_images(app, {("base", Workspace({"/src": ""})): "built:1"})
    return [[r.image, bool(r.workspace)] for r in app.roles]


@probe
def describe_native_default() -> Any:
    from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
    from torchx.specs import AppDef, AppDryRunInfo

    class Plain(Scheduler):  # type: ignore[type-arg]
        def schedule(self, dryrun_info: AppDryRunInfo) -> str:  # type: ignore[type-arg]
            return "x"

        def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:  # type: ignore[type-arg]
            return AppDryRunInfo(app, repr)

        def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
            return None

        def list(self, cfg: Any = None) -> List[ListAppResponse]:
            return []

        def _cancel_existing(self, app_id: str) -> None:
            pass

        def log_iter(self, *args: Any, **kwargs: Any) -> Any:
            return iter(())

    return Plain("plain", "s").describe_native("x")


@probe
def components_by_module_and_class() -> Any:
    from torchx.specs.file_linter import validate
    from torchx.specs.finder import get_component

    root = tempfile.mkdtemp()
    os.makedirs(os.path.join(root, "probe_pkg"))
    open(os.path.join(root, "probe_pkg", "__init__.py"), "w").close()
    with open(os.path.join(root, "probe_pkg", "comps.py"), "w") as f:
        f.write(
            "import torchx.specs as specs\n\n\n"
            "def hello(msg: str = 'hi') -> specs.AppDef:\n"
            "    return specs.AppDef(name='h', roles=[specs.Role(name='h', image='i', entrypoint='echo', args=[msg])])\n\n\n"
            "class Greeter:\n"
            "    def __init__(self, msg: str = 'hey') -> None:\n"
            "        self.msg = msg\n\n"
            "    def build(self) -> specs.AppDef:\n"
            "        return specs.AppDef(name='g', roles=[specs.Role(name='g', image='i', entrypoint='echo', args=[self.msg])])\n"
        )
    sys.path.insert(0, root)
    names = ["probe_pkg.comps:hello", "probe_pkg.comps.hello", "probe_pkg.comps:Greeter", "probe_pkg.comps.Greeter"]
    return {
        "found": {n: raised(lambda n=n: get_component(n).fn(msg="x").roles[0].args) for n in names},
        "missing_module": raised(lambda: get_component("probe_pkg.nope:hello")),
        "missing_dotted": raised(lambda: get_component("probe_pkg.nope.hello")),
        "class_lints_clean": validate(os.path.join(root, "probe_pkg", "comps.py"), "Greeter") == [],
    }


@probe
def describe_native_of_a_local_app() -> Any:
    from torchx.runner import get_runner
    from torchx.specs import AppDef, Role

    with tempfile.TemporaryDirectory() as cwd, get_runner() as runner:
        app = AppDef("echo", [Role("echo", image=cwd, entrypoint="echo", args=["hi"])])
        handle = runner.run(app, "local_cwd", cfg={"log_dir": os.path.join(cwd, "logs")})
        runner.wait(handle, wait_interval=0.1)
        native = runner.describe_native(handle)
        unknown = runner.describe_native(handle.rsplit("/", 1)[0] + "/echo-no-such-app")
        return {
            "read_back": native is not None,
            "scheduler": getattr(native, "_scheduler", None),
            "unknown": unknown,
        }


@probe
def event_handler_plugins() -> Any:
    from torchx.plugins import PluginType, register
    from torchx.runner.events.handlers import get_logging_handler

    @register.event_handler(name="probe_sink")
    def probe_sink() -> Any: ...

    return {
        "group": PluginType.EVENT_HANDLER.value,
        "tagged": [probe_sink._plugin_type.value, probe_sink._plugin_name],  # type: ignore[attr-defined]
        "null": type(get_logging_handler("null")).__name__,
        "unknown": raised(lambda: get_logging_handler("no_such_destination")),
    }


@probe
def testing_package() -> Any:
    """The modules ``torchx.testing`` ships (not imported: the nightly's need torch, which its
    venv here has not; ``test_nightly.py`` imports ours)."""
    import pkgutil

    import torchx.testing

    return sorted(
        m.name for m in pkgutil.iter_modules(torchx.testing.__path__) if m.name in ("distributed", "fixtures")
    )


@probe
def file_components_as_modules() -> Any:
    """A component file is loaded as a real module: its own imports work, it is in ``sys.modules``."""
    from torchx.specs.finder import get_component

    root = tempfile.mkdtemp()
    with open(os.path.join(root, "probe_helpers.py"), "w") as f:
        f.write("GREETING = 'from a sibling'\n")
    path = os.path.join(root, "probe_comp.py")
    with open(path, "w") as f:
        f.write(
            "import torchx.specs as specs\n"
            "from probe_helpers import GREETING\n\n\n"
            "def hello() -> specs.AppDef:\n"
            "    return specs.AppDef(name='h', roles=[specs.Role(name='h', image='i', entrypoint='echo', args=[GREETING])])\n"
        )
    sys.path.insert(0, root)
    fn = get_component(f"{path}:hello").fn
    return {"args": fn().roles[0].args, "in_sys_modules": fn.__module__ in sys.modules}


@probe
def slurm_workspace_builders() -> Any:
    """Slurm's dry run: the ``dir`` builder and the ``docker`` builder's ``srun`` line."""
    from torchx.schedulers.slurm_scheduler import create_scheduler
    from torchx.specs import AppDef, Role

    def script(cfg: Dict[str, Any], image: str) -> List[str]:
        app = AppDef("app", [Role("trainer", image=image, entrypoint="echo", args=["hi"])])
        info = create_scheduler("probe").submit_dryrun(app, cfg)
        return [line for line in info.request.materialize().splitlines() if line.startswith(("srun", "#SBATCH", "cd "))]

    return {
        "dir": raised(lambda: script({}, "/tmp")),
        "docker": raised(lambda: script({"workspace_type": "docker"}, "alpine:3")),
        "unknown_builder": raised_a(ValueError, lambda: script({"workspace_type": "zip"}, "/tmp")),
    }


@probe
def structured_run_options() -> Any:
    """A builtin scheduler's dry run keeps the options it resolved, typed (#1461)."""
    from torchx.schedulers import local_scheduler, slurm_scheduler
    from torchx.specs import AppDef, Role

    app = AppDef("app", [Role("trainer", image="/tmp", entrypoint="echo", args=["hi"])])
    local = local_scheduler.create_scheduler("probe").submit_dryrun(app, {"log_dir": "/tmp/probe-logs"}).cfg
    slurm = slurm_scheduler.create_scheduler("probe").submit_dryrun(app, {"partition": "p"}).cfg
    return {
        "local": [type(local).__name__, local.log_dir, local["log_dir"], isinstance(local, Mapping)],
        "slurm": [type(slurm).__name__, slurm.partition, slurm["partition"], slurm.job_dir],
    }


def _torchx() -> str:
    """The ``torchx`` executable of this interpreter's install (``$TORCHX_BIN`` wins)."""
    return os.environ.get("TORCHX_BIN") or os.path.join(os.path.dirname(sys.executable), "torchx")


def _cli(args: List[str], cwd: str) -> Any:
    out = subprocess.run([_torchx(), *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    if out.returncode != 0:
        return {"exit": out.returncode}
    return json.loads(out.stdout)


@probe
def cli_json() -> Any:
    """``run --dryrun --json`` and ``run --json``: the nightly's keys and values. (A local_cwd
    app's ``status --json`` from another process is not compared: the nightly's local
    scheduler forgets its apps when the process that ran them ends.)"""
    with tempfile.TemporaryDirectory() as cwd:
        dry = _cli(["run", "--dryrun", "--json", "-s", "local_cwd", "utils.echo", "--msg", "hi"], cwd)
        ran = _cli(["run", "--json", "-s", "local_cwd", "utils.echo", "--msg", "hi"], cwd)
    if not isinstance(dry, dict) or not isinstance(ran, dict):
        return {"dryrun": dry, "run": ran}
    return {
        "dryrun_keys": sorted(k for k in ("app", "cfg", "request", "scheduler") if k in dry),
        "dryrun_scheduler": dry["scheduler"],
        "dryrun_app_name": dry["app"]["name"] if isinstance(dry["app"], dict) else dry["app"],
        "run_keys": sorted(k for k in ("app_id", "handle", "scheduler", "state", "ui_url") if k in ran),
        "run_scheduler": ran["scheduler"],
        "run_handle_is_the_app_id": ran["handle"].endswith("/" + ran["app_id"]),
    }


def main() -> None:
    only = sys.argv[1:]
    out = {name: raised(fn) for name, fn in PROBES.items() if not only or name in only}
    json.dump(out, sys.stdout, sort_keys=True, default=repr)


if __name__ == "__main__":
    main()
