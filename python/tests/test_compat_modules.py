"""Small TorchX modules that custom schedulers, components and scripts import:
``torchx.version``, ``torchx.util.strings``, ``torchx.schedulers.devices`` and
``python -m torchx.cli.main``."""

import subprocess
import sys

import pytest
from torchx.specs.api import DeviceMount
from torchx.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE


def test_version_names_the_default_image() -> None:
    import torchx
    from torchx.version import TORCHX_IMAGE, __version__

    assert TORCHX_IMAGE == "ghcr.io/pytorch/torchx:0.7.0"
    assert __version__ == torchx.__version__


def test_normalize_str_keeps_what_kubernetes_accepts() -> None:
    from torchx.util.strings import normalize_str

    assert normalize_str("-My_App.v2-x") == "myappv2-x"
    assert normalize_str("--a") == "a"  # 0.8 strips every leading `-`
    assert normalize_str("_-job") == "job"
    assert normalize_str("ok-123") == "ok-123"


def test_device_mounts_of_named_devices() -> None:
    from torchx.schedulers.devices import get_device_mounts

    assert get_device_mounts({EFA_DEVICE: 2, NEURON_DEVICE: 1}) == [
        DeviceMount("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"),
        DeviceMount("/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"),
        DeviceMount("/dev/neuron0", "/dev/neuron0"),
    ]
    with pytest.warns(UserWarning, match="Could not find named device: tpu"):
        assert get_device_mounts({"tpu": 4}) == []


def test_python_m_torchx_cli_main_is_the_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torchx.cli.main", "runopts", "local_cwd"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "log_dir" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "torchx.cli.main", "status", "nope"], capture_output=True, text=True)
    assert bad.returncode != 0 and "nope" in bad.stderr


def test_entry_points_are_read_the_way_torchx_tests_patch_them() -> None:
    from importlib.metadata import EntryPoint, EntryPoints
    from unittest.mock import patch

    from torchx.util.entrypoints import load, load_group

    eps = EntryPoints(
        [
            EntryPoint("j", "json:dumps", "grp.a"),
            EntryPoint("s", "shlex:quote", "grp.b"),
        ]
    )
    with patch("torchx.util.entrypoints.metadata.entry_points", return_value=eps):
        group = load_group("grp.a")
        assert group is not None and list(group) == ["j"]
        assert group["j"]([1]) == "[1]"
        assert load("grp.b", "s")("a b") == "'a b'"
        assert load_group("grp.none") == {}  # 0.8 (0.7.0 gave None)


def test_submit_builds_role0s_workspace_through_the_mixin() -> None:
    from typing import Any, Mapping

    from _inert import InertScheduler
    from torchx.specs import AppDef, AppDryRunInfo, Role
    from torchx.workspace import WorkspaceMixin

    class Plain(InertScheduler[None]):
        def __init__(self) -> None:
            super().__init__("plain", "s")

        def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[None]:
            return AppDryRunInfo(None, str)

        def schedule(self, dryrun_info: AppDryRunInfo[None]) -> str:
            assert dryrun_info._app is not None
            return dryrun_info._app.roles[0].image

    class Building(Plain, WorkspaceMixin[None]):
        def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, Any]) -> None:
            role.image = f"built:{workspace}"

    app = AppDef("a", [Role("r", "img", entrypoint="true")])
    assert Building().submit(app, {}, workspace="/ws") == "built:/ws"
    with pytest.raises(ValueError, match="scheduler `plain` does not support workspaces"):
        Plain().submit(AppDef("a", [Role("r", "img", entrypoint="true")]), {}, workspace="/ws")


def test_cmd_run_and_cmd_status_helpers(tmp_path, monkeypatch) -> None:
    import argparse

    import pytest
    from torchx.cli.cmd_run import TorchXRunArgs, torchx_run_args_from_argparse, torchx_run_args_from_json
    from torchx.cli.cmd_status import parse_list_arg

    monkeypatch.chdir(tmp_path)
    args = torchx_run_args_from_json({"component_name": "utils.echo", "scheduler": "local_cwd", "scheduler_args": {}})
    assert (args.workspace, args.dryrun, args.component_args_str) == (str(tmp_path), False, [])
    with pytest.raises(ValueError, match="missing: scheduler, scheduler_args"):
        torchx_run_args_from_json({"component_name": "x"})
    with pytest.raises(ValueError, match="not part of the run command: bogus"):
        torchx_run_args_from_json({"component_name": "x", "scheduler": "s", "scheduler_args": {}, "bogus": 1})
    ns = argparse.Namespace(
        scheduler="slurm", dryrun=True, wait=False, log=False, workspace="w", parent_run_id=None, tee_logs=False
    )
    built = torchx_run_args_from_argparse(ns, "utils.echo", ["--msg", "hi"], {"partition": "p"})
    assert built == TorchXRunArgs(
        "utils.echo", "slurm", {}, {"partition": "p"}, True, workspace="w", component_args_str=["--msg", "hi"]
    )
    assert parse_list_arg("a,b") == ["a", "b"] and parse_list_arg("") is None
