"""Named resources: TorchX's module layout and lookup errors over the Rust tables, plus
registrations (``TORCHX_CUSTOM_NAMED_RESOURCES``) that may add names but never replace a builtin."""

import textwrap
from pathlib import Path
from typing import Iterator

import pytest
import torchx.specs as specs
from torchx.specs import named_resources_aws as aws, named_resources_generic as generic


@pytest.fixture
def fresh_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    specs.named_resources.reset()
    yield
    specs.named_resources.reset()


def test_aws_factories_match_the_table() -> None:
    p4d = aws.aws_p4d_24xlarge()
    assert (p4d.cpu, p4d.gpu, p4d.memMB) == (96, 8, 1152 * int(aws.GiB * aws.MEM_TAX))
    assert p4d.devices == {aws.EFA_DEVICE: 4}
    assert p4d.capabilities[aws.K8S_ITYPE] == "p4d.24xlarge"
    assert aws.NAMED_RESOURCES["aws_p4d.24xlarge"]() == p4d == specs.named_resources["aws_p4d.24xlarge"]
    assert all(f().cpu >= 1 for f in generic.NAMED_RESOURCES.values())
    assert aws.aws_p4d_24xlarge() is not aws.aws_p4d_24xlarge()  # fresh objects


def test_unknown_names_suggest_the_closest() -> None:
    with pytest.raises(KeyError, match="Did you mean `aws_p3.16xlarge`"):
        specs.named_resources["aws_p316xlarge"]
    assert specs.named_resources["MISSING"] == specs.NULL_RESOURCE
    assert "gpu.small" in specs.named_resources and "nope" not in specs.named_resources


def test_custom_module_adds_names_but_builtins_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_table: None
) -> None:
    (tmp_path / "my_resources.py").write_text(
        textwrap.dedent("""
        from torchx.specs import Resource
        NAMED_RESOURCES = {
            "gpu_x2": lambda: Resource(cpu=8, gpu=2, memMB=16384),
            "gpu.small": lambda: Resource(cpu=1, gpu=99, memMB=1),
        }
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TORCHX_CUSTOM_NAMED_RESOURCES", "my_resources")
    with pytest.warns(UserWarning, match="`gpu.small`.*is ignored"):
        assert specs.resource(h="gpu_x2").gpu == 2
    assert specs.named_resources["gpu.small"].gpu != 99
