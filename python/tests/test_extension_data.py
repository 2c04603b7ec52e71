"""The core's data crosses the extension as plain Python values in the serde shape of the
torchx crate (no JSON text): what `json.dumps` would take goes in, the rest is refused with a
specific error before the core runs."""

import enum
from typing import Any, Dict

import pytest
from torchx import _native


def _record(**changes: Any) -> Dict[str, Any]:
    return {"scheduler": "local_cwd", "session": "s", "group_id": "~g", **changes}


def test_values_come_back_as_plain_python_values() -> None:
    options = {o["name"]: o for o in _native.ext.run_opts("local_cwd")}
    assert type(options["prepend_cwd"]["required"]) is bool
    resource = _native.ext.named_resource("aws_p3.2xlarge")
    assert type(resource["cpu"]) is int and type(resource["capabilities"]) is dict


def test_subclasses_of_builtins_and_tuples_go_in_as_json_dumps_takes_them() -> None:
    class State(str, enum.Enum):
        RUNNING = "RUNNING"
        SUCCEEDED = "SUCCEEDED"

    assert _native.ext.group_state([State.SUCCEEDED, State.RUNNING]) == "RUNNING"
    assert _native.ext.group_state(("SUCCEEDED",)) == "SUCCEEDED"


@pytest.mark.parametrize(
    "value, error, says",
    [
        ({(1, 2): "a"}, TypeError, "keys must be str, int, float, bool or None, not tuple"),
        ({"a"}, TypeError, "Object of type set is not JSON serializable"),
        (2**70, ValueError, "does not fit in 64 bits"),
        (float("nan"), ValueError, "not a finite number"),
    ],
)
def test_what_json_cannot_hold_is_refused(value: Any, error: type, says: str) -> None:
    with pytest.raises(error, match=says):
        _native.ext.save_group(_record(tasks=[value]))


def test_keys_that_json_dumps_writes_as_text_are_taken() -> None:
    from torchx.runner import get_runner
    from torchx.specs import AppDef, Role

    role = Role(name="r", image="/tmp", entrypoint="true", metadata={"ids": {1: "a", 2.5: "b", None: "c", False: "d"}})
    get_runner().dryrun(AppDef(name="keys", roles=[role]), "local_cwd")


def test_a_value_that_contains_itself_is_refused_not_a_crash() -> None:
    loop: Dict[str, Any] = {}
    loop["again"] = loop
    with pytest.raises(ValueError, match="nested over 128 levels"):
        _native.ext.save_group(_record(tasks=[loop]))


def test_a_value_of_the_wrong_shape_names_what_was_expected() -> None:
    with pytest.raises(ValueError, match="unknown variant `NOPE`"):
        _native.ext.group_state(["NOPE"])
    with pytest.raises(ValueError, match="missing field"):
        _native.ext.save_group({"scheduler": "local_cwd"})
