"""The core's errors in Python: one class per kind (torchx.errors), each still the builtin
TorchX code catches for it, with the core's cause chain as ``__cause__``."""

import pytest
from torchx import _native, errors


def test_bad_input_is_invalid_argument_and_a_value_error() -> None:
    with pytest.raises(errors.InvalidArgumentError) as e:
        _native.ext.describe("local_cwd", "not/one/component")
    assert isinstance(e.value, ValueError) and e.value.kind == "invalid_argument"


def test_an_unknown_scheduler_is_not_found_and_a_lookup_error() -> None:
    with pytest.raises(LookupError) as e:
        _native.ext.run_opts("no_such_scheduler")
    assert isinstance(e.value, errors.NotFoundError) and e.value.kind == "not_found"


def test_an_unreachable_engine_keeps_its_cause(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    with pytest.raises(errors.UnavailableError) as e:
        _native.ext.docker_build_workspace("local_docker", "busybox:local", str(tmp_path), True)
    assert isinstance(e.value, RuntimeError) and e.value.kind == "unavailable"
    assert e.value.__cause__ is not None, "the engine's own error is the cause"
    assert "no-such.sock" in str(e.value.__cause__) or "No such file" in str(e.value.__cause__)


def test_every_kind_has_a_class_deriving_from_its_builtin() -> None:
    builtins = {
        "invalid_argument": ValueError,
        "invalid_spec": ValueError,
        "invalid_config": ValueError,
        "not_found": LookupError,
        "unsupported": NotImplementedError,
        "timeout": TimeoutError,
        "backend": RuntimeError,
        "already_exists": RuntimeError,
        "permission_denied": RuntimeError,
        "unavailable": RuntimeError,
    }
    assert set(errors.BY_KIND) == set(builtins)
    for kind, base in builtins.items():
        assert issubclass(errors.BY_KIND[kind], base) and issubclass(errors.BY_KIND[kind], errors.TorchXError)


def test_a_way_around_an_error_is_worded_for_python(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx.runner import get_runner

    monkeypatch.chdir(tmp_path)
    with get_runner() as runner, pytest.raises(errors.InvalidConfigError) as e:
        runner.dryrun_component("utils.echo", [], "aws_batch", cfg={"queue": "q"}, workspace=".")
    message = str(e.value)
    assert "set the run option image_repo" in message
    assert message.endswith("Or pass workspace=None to run the image as is."), message
    assert "--workspace" not in message, "the CLI's flag is the CLI's to name"
