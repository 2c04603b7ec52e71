"""torchx.specs behaves as TorchX's: dataclass semantics, enums, sentinels, and the rules the
Rust core implements (handles, mounts, macros, named resources, the status text)."""

import copy
import dataclasses
import os
import pickle
import subprocess
import sys

import pytest
from torchx import specs
from torchx.specs import (
    MISSING,
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppState,
    AppStatus,
    AppStatusError,
    BindMount,
    DeviceMount,
    MalformedAppHandleException,
    ReplicaState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    VolumeMount,
    macros,
)


def trainer() -> Role:
    return Role(
        name="trainer",
        image="pytorch/torchx:latest",
        entrypoint="python",
        args=["train.py", "--rank", macros.replica_id],
        env={"A": "1"},
        num_replicas=2,
        resource=specs.resource(cpu=4, gpu=1, memMB=8192),
    )


def test_role_defaults_are_torchx_s() -> None:
    r = Role(name="r", image="i")
    assert r.entrypoint == MISSING
    assert r.args == [] and r.env == {} and r.port_map == {} and r.mounts == []
    assert r.num_replicas == 1 and r.max_retries == 0 and r.min_replicas is None
    assert r.retry_policy == RetryPolicy.APPLICATION
    assert r.resource is NULL_RESOURCE
    assert (NULL_RESOURCE.cpu, NULL_RESOURCE.gpu, NULL_RESOURCE.memMB) == (-1, -1, -1)
    # Mutable defaults are per instance.
    r.env["X"] = "1"
    assert Role(name="s", image="i").env == {}


def test_dataclass_behaviour() -> None:
    app = AppDef(name="app", roles=[trainer()])
    d = dataclasses.asdict(app)
    assert d["roles"][0]["resource"] == {
        "cpu": 4,
        "gpu": 1,
        "memMB": 8192,
        "capabilities": {},
        "devices": {},
        "tags": {},
    }
    assert d["roles"][0]["retry_policy"] == RetryPolicy.APPLICATION
    clone = copy.deepcopy(app)
    assert clone == app and clone is not app
    clone.roles[0].env["B"] = "2"
    clone.roles.append(Role(name="ps", image="i"))
    assert clone != app and len(app.roles) == 1 and "B" not in app.roles[0].env
    assert pickle.loads(pickle.dumps(app)) == app
    assert repr(app).startswith("AppDef(name='app', roles=[Role(name='trainer'")
    assert dataclasses.replace(app, name="other").name == "other"


def test_role_subclass_keeps_its_hook() -> None:
    class Tagged(Role):
        def pre_proc(self, scheduler: str, dryrun_info: object) -> object:
            return ("tagged", scheduler, dryrun_info)

    r = Tagged(name="t", image="i")
    assert dataclasses.is_dataclass(r)
    assert r.pre_proc("local_cwd", 1) == ("tagged", "local_cwd", 1)
    assert Role(name="t", image="i").pre_proc("x", 1) == 1


def test_states() -> None:
    assert AppState.SUCCEEDED == 4 and isinstance(AppState.FAILED, int)
    assert ReplicaState is AppState
    assert str(AppState.RUNNING) == "RUNNING"
    assert repr(AppState.RUNNING) == "RUNNING (3)"
    assert [s for s in AppState if specs.is_terminal(s)] == [
        AppState.SUCCEEDED,
        AppState.FAILED,
        AppState.CANCELLED,
    ]
    assert specs.is_started(AppState.RUNNING) and not specs.is_started(AppState.PENDING)
    assert RetryPolicy("REPLICA") is RetryPolicy.REPLICA


def test_app_handles() -> None:
    h = specs.parse_app_handle("local_cwd://torchx/echo-1234")
    assert h == ("local_cwd", "torchx", "echo-1234")
    assert (h.scheduler_backend, h.session_name, h.app_id) == ("local_cwd", "torchx", "echo-1234")
    assert specs.parse_app_handle("kubernetes:///ns:app").session_name == ""
    assert specs.make_app_handle("slurm", "s", "42") == "slurm://s/42"
    for bad in ["not-a-handle", "local_cwd://torchx/", "://x/y"]:
        with pytest.raises(MalformedAppHandleException, match="is not of the form"):
            specs.parse_app_handle(bad)


def test_mounts() -> None:
    assert specs.parse_mounts(
        [
            "type=bind",
            "src=/data",
            "dst=/mnt/data",
            "readonly",
            "type=volume",
            "src=cache",
            "dst=/cache",
            "type=device",
            "src=/dev/fuse",
        ]
    ) == [
        BindMount(src_path="/data", dst_path="/mnt/data", read_only=True),
        VolumeMount(src="cache", dst_path="/cache", read_only=False),
        DeviceMount(src_path="/dev/fuse", dst_path="/dev/fuse", permissions="rwm"),
    ]
    with pytest.raises(KeyError, match="type must be specified first"):
        specs.parse_mounts(["src=/a", "type=bind"])
    with pytest.raises(ValueError, match="invalid mount type `nfs`"):
        specs.parse_mounts(["type=nfs", "src=a", "dst=b"])


def test_macros() -> None:
    values = macros.Values(img_root="/img", app_id="app-1", replica_id="3", rank0_env="MASTER")
    role = trainer()
    role.env["DIR"] = "${img_root}/data $$HOME ${unknown}"
    role.metadata = {"nested": {"list": ["${app_id}", 7]}, "top": "${rank0_env}"}
    out = values.apply(role)
    assert out.args == ["train.py", "--rank", "3"]
    assert out.env["DIR"] == "/img/data $HOME ${unknown}"
    assert out.metadata == {"nested": {"list": ["app-1", 7]}, "top": "MASTER"}
    assert role.args[-1] == macros.replica_id, "apply works on a copy"
    assert values.substitute("${base_img_root}") == "DEPRECATED"


def test_named_resources() -> None:
    assert specs.GiB == 1024
    gpu = specs.resource(h="aws_p4d.24xlarge")
    assert (gpu.cpu, gpu.gpu) == (96, 8)
    assert gpu.capabilities == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert "aws_p4d.24xlarge" in specs.named_resources
    assert specs.get_named_resources("gpu.small") == specs.named_resources["gpu.small"]
    # Each lookup is a fresh value.
    specs.named_resources["gpu.small"].capabilities["x"] = 1
    assert "x" not in specs.named_resources["gpu.small"].capabilities
    with pytest.raises(KeyError):
        specs.get_named_resources("gpu.smal")
    assert specs.resource() == Resource(cpu=2, gpu=0, memMB=1024)
    assert specs.resource(cpu=0, gpu=1) == Resource(cpu=2, gpu=1, memMB=1024)
    copied = Resource.copy(gpu, x="y")
    assert copied.capabilities["x"] == "y" and "x" not in gpu.capabilities


def status() -> AppStatus:
    return AppStatus(
        state=AppState.FAILED,
        num_restarts=1,
        msg="trainer/1 exited with code 3",
        ui_url="file:///tmp/logs",
        roles=[
            RoleStatus(
                "trainer",
                [
                    ReplicaStatus(0, ReplicaState.SUCCEEDED, "trainer", "localhost"),
                    ReplicaStatus(1, ReplicaState.FAILED, "trainer", "localhost"),
                ],
            ),
            RoleStatus("ps", [ReplicaStatus(0, ReplicaState.RUNNING, "ps", "localhost")]),
        ],
    )


def test_status_text_and_errors() -> None:
    s = status()
    assert s.format() == (
        "AppStatus:\n"
        "    State: FAILED\n"
        "    Num Restarts: 1\n"
        "    Roles: \n"
        " *trainer[0]:SUCCEEDED\n"
        "  trainer[1]:FAILED (no reply file)\n"
        " *ps[0]:RUNNING\n"
        "    Msg: trainer/1 exited with code 3\n"
        f"    Structured Error Msg: {NONE}\n"
        "    UI URL: file:///tmp/logs\n"
        "    "
    )
    assert " *ps[0]" not in s.format(filter_roles=["trainer"])
    assert s.is_terminal()
    with pytest.raises(AppStatusError) as e:
        s.raise_for_status()
    assert e.value.status is s
    AppStatus(state=AppState.SUCCEEDED).raise_for_status()
    assert RoleStatus("r", []).to_json() == {"role": "r", "replicas": []}


def test_importing_specs_loads_no_extension() -> None:
    code = "import sys, torchx.specs; print('torchx._rs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_warns_when_upstream_torchx_is_installed_too(tmp_path) -> None:
    # This package in a site directory where upstream's nightly also installed itself.
    import torchx

    (tmp_path / "torchx").symlink_to(os.path.dirname(torchx.__file__))
    (tmp_path / "torchx_nightly-2026.10.26.dist-info").mkdir()
    code = "import warnings; warnings.simplefilter('error'); import torchx"
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "upstream TorchX (torchx_nightly-2026.10.26)" in out.stderr, out.stderr
    clean = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr


def test_readme_python_example_runs_as_written() -> None:
    import pathlib
    import re

    readme = pathlib.Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("## Python", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "README's Python section has no example"
    namespace: dict = {}
    exec(block.group(1), namespace)
    assert namespace["app"].roles[0].resource == specs.named_resources["gpu.small"]
    assert "#SBATCH" in repr(namespace["info"])


def _as_dataclass_makes_it(cls: type) -> type:
    """A plain ``@dataclass`` with ``cls``'s name and fields: what its methods are pinned to."""
    import dataclasses

    namespace: dict[str, object] = {"__annotations__": {}, "__qualname__": cls.__qualname__}
    for f in dataclasses.fields(cls):
        namespace["__annotations__"][f.name] = f.type  # type: ignore[index]
        kwargs: dict[str, object] = {"repr": f.repr, "compare": f.compare}
        if f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kwargs["default_factory"] = f.default_factory
        namespace[f.name] = dataclasses.field(**kwargs)  # type: ignore[call-overload]
    if "__post_init__" in vars(cls):
        namespace["__post_init__"] = vars(cls)["__post_init__"]
    return dataclasses.dataclass(type(cls.__name__, (), namespace))


def test_records_behave_as_dataclass_makes_them() -> None:
    """The specs' dataclasses write their ``__init__`` out and share ``__repr__``/``__eq__``
    (import time): signature, defaults, fresh factory values, repr, equality and hashing are
    what ``@dataclass`` would have made."""
    import dataclasses
    import inspect

    from torchx.runner.events.api import TorchxEvent
    from torchx.schedulers.api import DescribeAppResponse, ListAppResponse

    required = {"str": "x", "int": 3, "bool": True, "Any": "any", "CfgVal": "v", "ReplicaState": specs.AppState.RUNNING}
    records = [
        specs.Resource,
        specs.BindMount,
        specs.VolumeMount,
        specs.DeviceMount,
        specs.Workspace,
        specs.Role,
        specs.AppDef,
        specs.ReplicaStatus,
        specs.RoleStatus,
        specs.AppStatus,
        specs.runopt,
        specs.macros.Values,
        DescribeAppResponse,
        ListAppResponse,
        TorchxEvent,
    ]
    for cls in records:
        made = _as_dataclass_makes_it(cls)
        params = [inspect.signature(c).parameters for c in (cls, made)]
        assert [str(p) for p in params[0].values()] == [str(p) for p in params[1].values()], cls
        assert cls.__match_args__ == made.__match_args__  # type: ignore[attr-defined]
        args = {
            f.name: required.get(str(f.type), {"projects": {"a": ""}}.get(f.name, []))
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        ours, theirs = cls(**args), made(**args)
        if cls is not specs.AppStatus:  # TorchX's own YAML repr
            assert repr(ours) == repr(theirs), cls
        for f in dataclasses.fields(cls):
            assert getattr(ours, f.name) == getattr(theirs, f.name), (cls, f.name)
            shared = getattr(ours, f.name) is getattr(cls(**args), f.name)
            assert shared == (getattr(theirs, f.name) is getattr(made(**args), f.name)), "a factory's value each time"
        assert ours == cls(**args) and ours != theirs and ours.__eq__(theirs) is NotImplemented
        hashable = cls.__hash__ is not None
        assert hashable == (made.__hash__ is not None or cls in (specs.Workspace, ListAppResponse)), cls
    role = specs.Role(name="r", image="i")
    role.metadata["self"] = role
    assert "metadata={'self': ...}" in repr(role), "a record inside itself shows as ..."
    assert dataclasses.replace(role, name="s").name == "s"
    assert specs.Role(name="r", image="i") != specs.Role(name="r", image="j")
