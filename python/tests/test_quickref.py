"""The code blocks of TorchX's quick reference, as written, wherever they need no cluster; the
cluster ones as dry runs (what would be submitted). Block numbers follow the page."""

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pytest
import torchx.specs as specs
from torchx.runner import get_runner
from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, StructuredOpts
from torchx.specs import AppDef, AppDryRunInfo, CfgVal, Resource, Role, macros, resource, runopts


def test_imports_and_resources() -> None:  # blocks 1, 4
    from torchx.specs import AppState, BindMount, DeviceMount, VolumeMount  # noqa: F401

    res = resource(h="gpu.small")
    assert (res.cpu, res.gpu) == (8, 1)
    assert Resource(cpu=4, gpu=1, memMB=8192).memMB == 8192
    assert resource(h="aws_p3.2xlarge").gpu == 1


def test_runner_lifecycle_on_local_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # 5-9
    monkeypatch.chdir(tmp_path)
    app = specs.AppDef(
        name="train",
        roles=[
            specs.Role(
                name="trainer",
                image="my_image:latest",
                entrypoint="sh",
                args=["-c", "echo epoch 1; echo epoch 2"],
                resource=resource(h="gpu.small"),
                env={"CUDA_VISIBLE_DEVICES": "0"},
            )
        ],
    )
    with get_runner() as runner:
        app_handle = runner.run(app, scheduler="local_cwd")
        final_status = runner.wait(app_handle, wait_interval=1)
        assert final_status and final_status.is_terminal()
        final_status.raise_for_status()
        lines = list(runner.log_lines(app_handle, role_name="trainer", k=0))
        assert lines == ["epoch 1\n", "epoch 2\n"]
        runner.delete(app_handle)


def test_cancel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # block 8
    monkeypatch.chdir(tmp_path)
    with get_runner() as runner:
        app_handle = runner.run_component("utils.sh", ["sleep", "60"], scheduler="local_cwd")
        runner.cancel(app_handle)
        final = runner.wait(app_handle, wait_interval=0.2, timeout=30)
        assert final and final.state == specs.AppState.CANCELLED
        with pytest.raises(specs.AppStatusError, match="CANCELLED"):
            final.raise_for_status()


def test_cluster_blocks_as_dry_runs() -> None:  # blocks 5, 10, 11, 16
    with get_runner() as runner:
        info = runner.dryrun_component(
            "dist.ddp",
            ["--script", "train.py", "-j", "2x2", "--gpu", "2", "--memMB", "8192"],
            scheduler="kubernetes",
            cfg={"namespace": "default"},
        )
        assert "torchrun" in repr(info) and "default" in repr(info)
        app = specs.AppDef(
            name="ddp_train",
            roles=[
                specs.Role(
                    name="trainer",
                    image="my_image:latest",
                    entrypoint="python",
                    args=["-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "2", "train.py"],
                    num_replicas=2,
                    resource=specs.Resource(cpu=8, gpu=2, memMB=16384),
                )
            ],
        )
        info = runner.dryrun(app, scheduler="kubernetes", cfg={"namespace": "my-namespace", "queue": "default"})
        assert "torch.distributed.run" in repr(info) and "nvidia.com/gpu: '2'" in repr(info)


def test_component_file_by_name_and_called_directly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # block 12
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_component.py").write_text(
        textwrap.dedent('''
        import torchx.specs as specs
        from torchx.specs import resource

        def trainer(
            script: str,
            image: str = "my_image:latest",
            resource_name: str = "gpu.small",
        ) -> specs.AppDef:
            """Launch single-node training."""
            return specs.AppDef(
                name="trainer",
                roles=[
                    specs.Role(
                        name="trainer",
                        image=image,
                        entrypoint="python3",
                        args=["-c", f"print({script!r})"],
                        resource=resource(h=resource_name),
                    )
                ],
            )
    ''')
    )
    with get_runner() as runner:
        handle = runner.run_component(
            "my_component.py:trainer",
            ["--script", "my_train", "--resource_name", "gpu.medium"],
            scheduler="local_cwd",
        )
        status = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert status and status.state == specs.AppState.SUCCEEDED, status
        assert list(runner.log_lines(handle, "trainer")) == ["my_train\n"]
        info = runner.dryrun_component("my_component.py:trainer", ["--script", "x"], scheduler="slurm")
        assert "python3" in repr(info)


def test_env_mounts_macros() -> None:  # blocks 13-15
    role = specs.Role(
        name="trainer",
        image="my_image:latest",
        entrypoint="python",
        args=["-m", "my_train", "--job_id", macros.app_id, "--replica", macros.replica_id],
        env={"NCCL_DEBUG": "INFO", "IMG_ROOT": macros.img_root},
        mounts=[
            specs.BindMount(src_path="/data/datasets", dst_path="/mnt/data", read_only=True),
            specs.VolumeMount(src="my-pvc", dst_path="/mnt/checkpoints"),
        ],
    )
    values = macros.Values(img_root="/img", app_id="app-1", replica_id="0", rank0_env="MASTER_ADDR")
    applied = values.apply(role)
    assert applied.args[-3:] == ["app-1", "--replica", "0"] and applied.env["IMG_ROOT"] == "/img"
    assert role.args[3] == macros.app_id  # the original is untouched


@dataclass
class MyRequest:
    """Native request type — passed from _submit_dryrun to schedule."""

    job_name: str
    cmd: list[str]


@dataclass
class MyOpts(StructuredOpts):
    cluster: str = "default"
    """Cluster to submit to."""


class MyScheduler(Scheduler[Mapping[str, CfgVal]]):
    def __init__(self, session_name: str, **kwargs: object) -> None:
        super().__init__("my_backend", session_name)
        self.cancelled: list[str] = []

    def _run_opts(self) -> runopts:
        return MyOpts.as_runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[MyRequest]:
        opts = MyOpts.from_cfg(cfg)
        role = app.roles[0]
        return AppDryRunInfo(MyRequest(f"{opts.cluster}/{app.name}", [role.entrypoint, *role.args]), repr)

    def schedule(self, dryrun_info: AppDryRunInfo[MyRequest]) -> str:
        return "job-id-123"

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        return DescribeAppResponse(app_id=app_id, state=specs.AppState.RUNNING)

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [ListAppResponse(app_id="job-id-123", state=specs.AppState.RUNNING)]

    def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.append(app_id)


def create_scheduler(session_name: str, **kwargs: Any) -> MyScheduler:
    return MyScheduler(session_name)


def test_structured_opts() -> None:  # block 17
    opts = MyOpts.as_runopts()
    assert opts.get("cluster").help == "Cluster to submit to." and opts.get("cluster").default == "default"
    assert MyOpts.from_cfg({"cluster": "c1"}).cluster == "c1"
    assert dict(MyOpts(cluster="x")) == {"cluster": "x"}


def test_the_documented_scheduler_skeleton_in_a_runner() -> None:  # block 17
    from torchx.runner import Runner

    runner = Runner("s", {"my_backend": create_scheduler})
    app = AppDef(name="hello", roles=[Role(name="r", image="img", entrypoint="echo", args=["hi"], resource=resource())])
    info = runner.dryrun(app, "my_backend", cfg={"cluster": "gpu-cluster"})
    assert info.request == MyRequest("gpu-cluster/hello", ["echo", "hi"])
    handle = runner.schedule(info)
    assert handle == "my_backend://s/job-id-123"
    assert runner.status(handle).state == specs.AppState.RUNNING
    assert [a.app_handle for a in runner.list("my_backend")] == [handle]
    runner.cancel(handle)
    assert runner._scheduler("my_backend").cancelled == ["job-id-123"]


def test_workspace_tracker_and_subcommand_extension_points() -> None:  # blocks 18-20
    import argparse
    from typing import Iterable

    from torchx.cli.cmd_base import SubCommand
    from torchx.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource
    from torchx.workspace import WorkspaceMixin

    class MyWorkspaceMixin(WorkspaceMixin[None]):
        def workspace_opts(self) -> runopts:
            opts = runopts()
            opts.add("artifact_store", type_=str, required=True, help="Remote artifact store URL")
            return opts

        def caching_build_workspace_and_update_role(
            self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict[object, object]
        ) -> None:
            if not role.workspace:
                return
            role.image = f"{cfg['artifact_store']}/{role.name}"

    role = Role(name="r", image="img", workspace=specs.Workspace.from_str("/src"))
    MyWorkspaceMixin().build_workspaces([role], {"artifact_store": "s3://store"})
    assert role.image == "s3://store/r"
    assert MyWorkspaceMixin().workspace_opts().get("artifact_store").is_required

    class MyTracker(TrackerBase):
        def __init__(self, connection_str: str) -> None:
            self._conn = connection_str

        def add_artifact(
            self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
        ) -> None: ...
        def add_metadata(self, run_id: str, **kwargs: object) -> None: ...
        def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None: ...
        def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
            return {}

        def metadata(self, run_id: str) -> Mapping[str, object]:
            return {}

        def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
            return []

        def lineage(self, run_id: str) -> Lineage:
            return Lineage()

        def run_ids(self, **kwargs: str) -> Iterable[str]:
            return []

    assert MyTracker("conn").lineage("x") == Lineage()

    class CmdMyTool(SubCommand):
        def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
            subparser.add_argument("--config", type=str, help="Path to config file")
            subparser.add_argument("app_id", type=str, help="Application handle")

        def run(self, args: argparse.Namespace) -> None:
            self.seen = f"Running my_tool on {args.app_id} with config={args.config}"

    parser = argparse.ArgumentParser()
    cmd = CmdMyTool()
    cmd.add_arguments(parser)
    cmd.run(parser.parse_args(["--config", "c.yaml", "local://s/a"]))
    assert cmd.seen == "Running my_tool on local://s/a with config=c.yaml"
