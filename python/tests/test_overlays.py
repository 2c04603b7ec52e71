"""``torchx.specs.overlays`` and the Rust render agree: a role's ``V1Pod`` overlay merged by the
core into the Kubernetes/MCAD dry run is exactly the Python ``apply_overlay`` of the same overlay
on the pod rendered without it (operators, tuples, files and the app-level CLI spelling)."""

import copy
from pathlib import Path
from typing import Any, Dict, List

import pytest
from torchx import specs
from torchx.runner import get_runner
from torchx.specs.overlays import DEL, JOIN, PUT, apply_overlay, get_overlay, set_overlay

# Set by the scheduler after the overlay is applied: not the overlay's to change.
_LABELS = "labels"

OVERLAYS: List[Dict[str, Any]] = [
    {"spec": {"nodeSelector": {"pool": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}},
    {"spec": {"volumes": ({"name": "scratch", "emptyDir": {}},)}},  # a tuple replaces
    {"spec": {PUT("volumes"): [{"name": "v", "emptyDir": {}}], DEL("restartPolicy"): None}},
    {
        "spec": {
            JOIN("containers", on="name"): [
                {"name": "r-0", "imagePullPolicy": "Always"},
                {"name": "side", "image": "busybox"},
            ]
        }
    },
    {"metadata": {"annotations": {"team": "ml"}}, "spec": {"hostNetwork": True}},
]


def _app(overlay: Any = None) -> specs.AppDef:
    role = specs.Role("r", "img", entrypoint="echo", args=["hi"], resource=specs.resource(cpu=1, memMB=2048))
    if overlay is not None:
        set_overlay(role, "kubernetes", "V1Pod", overlay)
    return specs.AppDef("a", roles=[role])


def _pod(app: specs.AppDef, scheduler: str = "kubernetes") -> Dict[str, Any]:
    cfg = {"queue": "default"} if scheduler == "kubernetes" else {}
    info = get_runner().dryrun(app, scheduler, cfg=cfg)
    data = info.request.to_json()
    pod = data["objects"][0]["spec"]["tasks"][0]["template"] if scheduler == "kubernetes" else data
    pod = copy.deepcopy(pod)
    pod["metadata"].pop(_LABELS, None)
    return pod  # type: ignore[no-any-return]


def _without_env(pod: Dict[str, Any]) -> Dict[str, Any]:
    # The session id differs between two dry runs.
    for container in pod["spec"]["containers"]:
        container.pop("env", None)
    return pod


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_core_merges_as_apply_overlay_does(overlay: Dict[str, Any]) -> None:
    expected = _without_env(_pod(_app()))
    apply_overlay(expected, copy.deepcopy(overlay))
    assert _without_env(_pod(_app(overlay))) == expected


def test_file_overlays_and_the_app_level_cli_spelling(tmp_path: Path) -> None:
    overlay = tmp_path / "pod.yaml"
    overlay.write_text(
        "spec:\n  nodeSelector: {pool: h100}\n  volumes: !!python/tuple\n    - name: w\n      emptyDir: {}\n"
    )
    role_level = _app()
    role_level.roles[0].metadata["kubernetes"] = f"file://{overlay}"
    assert get_overlay(role_level.roles[0], "kubernetes", "V1Pod")["spec"]["volumes"] == (
        {"name": "w", "emptyDir": {}},
    )
    pod = _pod(role_level)
    assert pod["spec"]["nodeSelector"] == {"pool": "h100"}
    assert pod["spec"]["volumes"] == [{"name": "w", "emptyDir": {}}]
    # `--metadata kubernetes=file://...` of the builtin components sets the app's metadata.
    app_level = _app()
    app_level.metadata["kubernetes"] = str(overlay)
    assert _without_env(_pod(app_level)) == _without_env(pod)


def test_a_bad_overlay_is_a_spec_error_naming_it() -> None:
    with pytest.raises(ValueError, match="V1Pod overlay"):
        _pod(_app({"spec": {"containers": {"not": "a list"}}}))
