"""AppDefs to and from the Rust core's JSON shape (the serde shape of the ``torchx`` crate)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Dict

from torchx.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
)


def _mount_to_json(m: Any) -> Dict[str, Any]:
    kind = {BindMount: "bind", VolumeMount: "volume", DeviceMount: "device"}.get(type(m))
    if kind is None:
        raise TypeError(f"not a mount: {m!r} (BindMount, VolumeMount or DeviceMount)")
    return {"type": kind, **asdict(m)}


def _count(role: Role, key: str, value: Any) -> Any:
    """``value`` if it is a whole number >= 0 (or None); else which role and key it breaks."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError(f"role `{role.name}`: {key} must be a whole number >= 0, got {value!r}")


def role_to_json(role: Role) -> Dict[str, Any]:
    for key in ("num_replicas", "min_replicas", "max_retries", "max_requeues"):
        _count(role, key, getattr(role, key))
    return {
        "name": role.name,
        "image": role.image,
        "entrypoint": role.entrypoint,
        "args": [str(a) for a in role.args],
        "env": {str(k): str(v) for k, v in role.env.items()},
        "num_replicas": role.num_replicas,
        "min_replicas": role.min_replicas,
        "max_retries": role.max_retries,
        "retry_policy": RetryPolicy(role.retry_policy).value,
        "resource": resource_to_json(role.resource),
        "port_map": dict(role.port_map),
        "metadata": {k: _tuples_as_put(v) for k, v in role.metadata.items()},
        "mounts": [_mount_to_json(m) for m in role.mounts],
        "workspace": dict(role.workspace.projects) if role.workspace else None,
        **{
            key: value
            for key, value in (
                ("time_limit", role.time_limit),
                ("checkpoint_signal", role.checkpoint_signal),
                ("requeue_exit_code", role.requeue_exit_code),
                ("max_requeues", role.max_requeues),
                ("checkpoint_dir", role.checkpoint_dir),
                ("hang_timeout", role.hang_timeout),
            )
            if value is not None
        },
    }


def _tuples_as_put(value: Any) -> Any:
    """Metadata as JSON: a tuple inside a dict (an overlay's "replace this list") becomes the
    ``PUT`` operator's key, which says the same in JSON."""
    if isinstance(value, dict):
        from torchx.specs.overlays import PUT

        return {
            (PUT(k) if isinstance(v, tuple) and isinstance(k, str) else k): _tuples_as_put(v) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_tuples_as_put(v) for v in value]
    return value


def app_to_json(app: AppDef) -> Dict[str, Any]:
    """``app`` in the core's shape; ``ValueError``/``TypeError`` for what it cannot hold."""
    return {
        "name": app.name,
        "roles": [role_to_json(r) for r in app.roles],
        "metadata": {str(k): str(v) for k, v in app.metadata.items()},
    }


def _mount_from_json(m: Dict[str, Any]) -> Any:
    m = dict(m)
    kind = m.pop("type")
    return {"bind": BindMount, "volume": VolumeMount, "device": DeviceMount}[kind](**m)


def resource_to_json(r: Resource) -> Dict[str, Any]:
    # Tags are the Python side's metadata: no scheduler reads them.
    return {
        "cpu": r.cpu,
        "gpu": r.gpu,
        "memMB": r.memMB,
        "capabilities": dict(r.capabilities),
        "devices": dict(r.devices),
    }


def resource_from_json(r: Dict[str, Any]) -> Resource:
    return Resource(
        cpu=r["cpu"],
        gpu=r["gpu"],
        memMB=r["memMB"],
        capabilities=dict(r.get("capabilities", {})),
        devices=dict(r.get("devices", {})),
    )


def role_from_json(r: Dict[str, Any]) -> Role:
    res = r.get("resource")
    role = Role(name=r["name"], image=r["image"])
    role.entrypoint = r.get("entrypoint", role.entrypoint)
    role.args = list(r.get("args", []))
    role.env = dict(r.get("env", {}))
    role.num_replicas = r.get("num_replicas", 1)
    role.min_replicas = r.get("min_replicas")
    role.max_retries = r.get("max_retries", 0)
    role.retry_policy = RetryPolicy(r.get("retry_policy", "APPLICATION"))
    role.time_limit = r.get("time_limit")
    role.checkpoint_signal = r.get("checkpoint_signal")
    role.requeue_exit_code = r.get("requeue_exit_code")
    role.max_requeues = r.get("max_requeues")
    role.checkpoint_dir = r.get("checkpoint_dir")
    role.hang_timeout = r.get("hang_timeout")
    if res is not None:
        role.resource = resource_from_json(res)
    role.port_map = dict(r.get("port_map", {}))
    role.metadata = dict(r.get("metadata", {}))
    role.mounts = [_mount_from_json(m) for m in r.get("mounts", [])]
    return role


def app_from_json(a: Dict[str, Any]) -> AppDef:
    return AppDef(
        name=a["name"],
        roles=[role_from_json(r) for r in a.get("roles", [])],
        metadata=dict(a.get("metadata", {})),
    )
