"""Component functions as TorchX treats them: the linter, the argparse command line built from
annotations and docstrings, the finder (builtins and ``file.py:fn``), structured arguments."""

import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from torchx import specs
from torchx.components import dist, utils
from torchx.components.component_test_base import ComponentTestCase
from torchx.components.structured_arg import StructuredJArgument, StructuredNameArgument
from torchx.specs.builders import _create_args_parser, materialize_appdef
from torchx.specs.file_linter import get_fn_docstring, validate
from torchx.specs.finder import (
    ComponentNotFoundException,
    ComponentValidationException,
    get_component,
    get_components,
)
from torchx.util.types import decode_from_string, to_dict


def _app(*args: str, **kw: object) -> specs.AppDef:
    return specs.AppDef(name="app", metadata={"args": repr(args), **{k: repr(v) for k, v in kw.items()}})


def component(
    name: str,
    *script_args: str,
    count: int = 1,
    ratio: float = 0.5,
    flag: bool = False,
    tags: Optional[List[str]] = None,
    env: Optional[Dict[str, int]] = None,
    j: str = "1x1",
) -> specs.AppDef:
    """Does a thing.

    Longer text.

    Args:
        name: the name
        count: how many
    """
    return _app(*script_args, name=name, count=count, ratio=ratio, flag=flag, tags=tags, env=env, j=j)


def test_materialize_decodes_every_annotation() -> None:
    app = materialize_appdef(
        component,
        [
            "--name",
            "x",
            "--count",
            "3",
            "--flag",
            "true",
            "--tags",
            "a,b",
            "--env",
            "A=1,B=2",
            "-j",
            "2x2",
            "--",
            "--lr",
            "0.1",
        ],
    )
    assert app.metadata == {
        "args": "('--lr', '0.1')",
        "name": "'x'",
        "count": "3",
        "ratio": "0.5",
        "flag": "True",
        "tags": "['a', 'b']",
        "env": "{'A': 1, 'B': 2}",
        "j": "'2x2'",
    }


def test_defaults_from_config_override_declared_ones_and_required_exits() -> None:
    app = materialize_appdef(component, ["--name", "x"], {"count": "7", "flag": "True"})
    assert app.metadata["count"] == "7" and app.metadata["flag"] == "True"
    with pytest.raises(SystemExit):
        materialize_appdef(component, [])  # --name is required


def test_help_comes_from_the_docstring(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _create_args_parser(component)
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    out = capsys.readouterr().out
    assert "Does a thing.\nLonger text." in out
    assert "the name (required)" in out and "how many (default: 1)" in out
    assert get_fn_docstring(component)[1]["ratio"] == " "


def test_linter_names_each_problem(tmp_path: Path) -> None:
    f = tmp_path / "comp.py"
    f.write_text(
        textwrap.dedent("""
        def bad(a, b: Dict[str, List[str]], c: Set[int]) -> int:
            pass
        def good(a: Optional[List[str]], b: dict[str, int], c: int | None = None) -> specs.AppDef:
            pass
    """)
    )
    assert [m.description for m in validate(str(f), "bad")] == [
        "Missing type annotation for argument 'a' in function 'bad'",
        "Non-primitive value type 'List[str]' for argument 'b: Dict[str, List[str]]' in function 'bad'",
        "Unsupported container type 'Set' for argument 'c: Set[int]' in function 'bad'",
        "Function: bad has incorrect return annotation, supported annotation: AppDef",
    ]
    assert validate(str(f), "good") == []
    assert [m.description for m in validate(str(f), "nope")] == ["Function nope not found"]


def test_component_file_runs_with_appdef_in_scope(tmp_path: Path) -> None:
    f = tmp_path / "my_component.py"
    f.write_text(
        textwrap.dedent('''
        from torchx.specs import Role

        def greet(user: str = "world") -> AppDef:
            """Says hello.

            Args:
                user: who to greet
            """
            return AppDef(name="greet", roles=[Role(name="r", image="/tmp", entrypoint="echo", args=[user])])

        def broken(x) -> AppDef:
            return AppDef(name="x")
    ''')
    )
    comp = get_component(f"{f}:greet")
    assert comp.description == "Says hello."
    app = materialize_appdef(comp.fn, ["--user", "you"])
    assert app.roles[0].args == ["you"]
    with pytest.raises(ComponentValidationException, match="Missing type annotation for argument 'x'"):
        get_component(f"{f}:broken")
    with pytest.raises(ComponentNotFoundException):
        get_component(f"{tmp_path / 'missing.py'}:greet")


def test_builtins_pass_the_linter_and_are_found_by_name() -> None:
    names = get_components()
    for name in (
        "dist.ddp",
        "dist.spmd",
        "dist.torchrun",
        "utils.echo",
        "utils.sh",
        "utils.copy",
        "metrics.tensorboard",
        "serve.torchserve",
    ):
        assert name in names, name
    case = ComponentTestCase("setUp")
    case.setUp()
    try:
        for module, fn in ((dist, "ddp"), (dist, "torchrun"), (utils, "python"), (utils, "booth")):
            case.validate(module, fn)
    finally:
        case.tearDown()


def test_dist_helpers_come_from_the_core() -> None:
    assert dist.parse_nnodes("1:2x3") == (1, 2, 3, "1:2")
    assert dist.parse_nnodes("4") == (1, 1, 4, "1")
    for bad in ("1x", "x2", ":3", "1x2:3"):
        with pytest.raises(ValueError):
            dist.parse_nnodes(bad)
    env = dist.ddp(script="t.py", debug=True).roles[0].env
    assert dist._TORCH_DEBUG_FLAGS and all(env[k] == v for k, v in dist._TORCH_DEBUG_FLAGS.items())


def test_structured_arguments() -> None:
    assert StructuredNameArgument.parse_from("exp/", script="a/train.py") == StructuredNameArgument("exp", "train")
    assert StructuredNameArgument.parse_from("run", m="a.b") == StructuredNameArgument("default-experiment", "run")
    with pytest.raises(ValueError, match="No main module or script"):
        StructuredNameArgument.parse_from("x/y")
    assert str(StructuredJArgument.parse_from(h="aws_p4d.24xlarge", j="2")) == "2x8"
    with pytest.raises(ValueError, match="not a GPU instance"):
        StructuredJArgument.parse_from(h="aws_trn1.32xlarge", j="2")


def test_types_decode_text_like_the_cli() -> None:
    assert to_dict("FOO=v1,v2;BAR=v3") == {"FOO": "v1,v2", "BAR": "v3"}
    assert to_dict("FOO=''") == {"FOO": ""}
    with pytest.raises(ValueError):
        to_dict("FOO=")
    assert decode_from_string("1=1.5,2=3", Dict[int, float]) == {1: 1.5, 2: 3.0}
    with pytest.raises(ValueError):
        decode_from_string("1", List[List[int]])


def test_annotated_parameters_add_flags(tmp_path: Path) -> None:
    from typing import Annotated

    def comp(
        src: Annotated[str, "-s"],
        tags: Annotated[Optional[List[str]], "-t"] = None,
        dry: Annotated[bool, "-d"] = False,
    ) -> specs.AppDef:
        return _app(src=src, tags=tags, dry=dry)

    app = materialize_appdef(comp, ["-s", "a", "-t", "x,y", "-d", "true"])
    assert app.metadata == {"args": "()", "src": "'a'", "tags": "['x', 'y']", "dry": "True"}
    assert materialize_appdef(comp, ["--src", "b"]).metadata["src"] == "'b'"
    f = tmp_path / "c.py"
    f.write_text("def c(a: Annotated[str, '-a'], b: Annotated[Dict[str, List[str]], '-b']) -> AppDef:\n    pass\n")
    assert [m.description for m in validate(str(f), "c")] == [
        "Non-primitive value type 'List[str]' for argument \"b: Annotated[Dict[str, List[str]], '-b']\" in function 'c'"
    ]
