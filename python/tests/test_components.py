"""The builtin components as Python functions: TorchX's module paths and signatures, and the
same AppDefs as `torchx run <component>` builds (one builder, in the Rust core)."""

import inspect

import pytest
import torchx
from torchx import specs
from torchx.components import dist, metrics, serve, utils
from torchx.components._builtin import build
from torchx.runner import get_runner
from torchx.specs import AppDef, BindMount


def test_functions_build_what_the_cli_builds() -> None:
    cases = [
        (
            dist.ddp("--lr", "0.1", script="train.py", j="2x2", env={"A": "1"}),
            "dist.ddp",
            ["--script", "train.py", "-j", "2x2", "--env", "A=1", "--", "--lr", "0.1"],
        ),
        (dist.spmd(script="train.py"), "dist.spmd", ["--script", "train.py"]),
        (
            dist.torchrun("--lr", "0.1", script="train.py", h="aws_p4d.24xlarge", j="2"),
            "dist.torchrun",
            ["--script", "train.py", "-h", "aws_p4d.24xlarge", "-j", "2", "--", "--lr", "0.1"],
        ),
        (utils.echo(msg="hi", num_replicas=2), "utils.echo", ["--msg", "hi", "--num_replicas", "2"]),
        (utils.sh("echo", "hi", h="gpu.small"), "utils.sh", ["-h", "gpu.small", "echo", "hi"]),
        (utils.python("-x", m="pkg.main"), "utils.python", ["-m", "pkg.main", "--", "-x"]),
        (utils.binary("--v", entrypoint="/bin/app"), "utils.binary", ["--entrypoint", "/bin/app", "--", "--v"]),
        (utils.copy("a", "b"), "utils.copy", ["--src", "a", "--dst", "b"]),
        (utils.booth(1.0, 2.5), "utils.booth", ["--x1", "1.0", "--x2", "2.5"]),
        (utils.touch("f"), "utils.touch", ["--file", "f"]),
        (metrics.tensorboard("/logs", port=7000), "metrics.tensorboard", ["--logdir", "/logs", "--port", "7000"]),
        (
            serve.torchserve("m.mar", "http://api", dryrun=True),
            "serve.torchserve",
            ["--model_path", "m.mar", "--management_api", "http://api", "--dryrun", "True"],
        ),
    ]
    for app, name, tokens in cases:
        assert isinstance(app, AppDef)
        assert app == build(name, tokens), name


def test_ddp_as_torchx_builds_it() -> None:
    app = dist.ddp(script="train.py", j="2x2", mounts=["type=bind", "src=/a", "dst=/b"])
    role = app.roles[0]
    assert (app.name, role.name, role.num_replicas, role.entrypoint) == ("train", "train", 2, "bash")
    assert "--nnodes 2 --nproc_per_node 2" in role.args[1]
    assert role.mounts == [BindMount(src_path="/a", dst_path="/b")]
    assert role.resource.cpu == 2 and role.resource.memMB == 1024
    with pytest.raises(ValueError, match="exactly one of --script and -m"):
        dist.ddp(j="2x2")


def test_torchrun_is_ddp_with_a_gpu_hosts_bare_j_as_nodes() -> None:
    assert dist.torchrun(script="train.py", j="2x2") == dist.ddp(script="train.py", j="2x2")
    app = dist.torchrun(script="train.py", h="aws_p4d.24xlarge", j="2")
    assert app.roles[0].num_replicas == 2 and "--nnodes 2 --nproc_per_node 8" in app.roles[0].args[1]
    assert inspect.signature(dist.torchrun).parameters == inspect.signature(dist.ddp).parameters


def test_signatures_are_torchx_s() -> None:
    sig = inspect.signature(dist.ddp)
    assert list(sig.parameters)[:4] == ["script_args", "script", "m", "image"]
    assert sig.parameters["script_args"].kind is inspect.Parameter.VAR_POSITIONAL
    assert sig.parameters["j"].default == "1x2"
    assert sig.parameters["image"].default == torchx.IMAGE
    assert inspect.signature(utils.echo).parameters["msg"].default == "hello world"
    assert inspect.signature(utils.binary).parameters["entrypoint"].kind is (inspect.Parameter.KEYWORD_ONLY)
    assert utils.echo.__doc__ and "message to echo" in utils.echo.__doc__


def test_runner_runs_a_component_from_a_dict_of_arguments() -> None:
    runner = get_runner()
    handle = runner.run_component("utils.echo", {"msg": "from a dict"}, scheduler="local_cwd")
    assert runner.wait(handle, wait_interval=0.05).state.name == "SUCCEEDED"
    assert list(runner.log_lines(handle, "echo")) == ["from a dict\n"]
    from torchx.specs.finder import ComponentNotFoundException

    with pytest.raises(ComponentNotFoundException, match="does not exist"):
        runner.dryrun_component("./no_such_component.py:greet", [], "local_cwd")


def test_log_lines_keep_one_newline_each_whatever_the_bytes() -> None:
    """Empty lines, a last line without its newline and bytes that are not UTF-8 come out as
    TorchX's schedulers yield them: one line each, with one newline."""
    runner = get_runner()
    app = specs.AppDef(
        "bytes",
        roles=[
            specs.Role(
                "sh",
                image="x",
                entrypoint="sh",
                args=["-c", "printf 'a\\n\\nb\\377c\\nlast'"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )
    handle = runner.run(app, "local_cwd")
    runner.wait(handle, wait_interval=0.05)
    assert list(runner.log_lines(handle, "sh")) == ["a\n", "\n", "b\ufffdc\n", "last\n"]
