"""TorchX's job specification: ``AppDef`` and its parts, states and statuses, app handles,
mounts and named resources (``torchx.specs``)."""

from torchx.specs._named_resources import (
    GiB,
    _NamedResourcesLibrary as _NamedResourcesLibrary,
    get_named_resources,
    named_resources,
    resource,
)
from torchx.specs.api import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    TORCHX_HOME,
    UNKNOWN,
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    AppStatusError,
    BindMount,
    CfgVal,
    DeviceMount,
    InvalidRunConfigException,
    MalformedAppHandleException,
    MountType,
    ParsedAppHandle,
    ReplicaState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    UnknownAppException,
    UnknownSchedulerException,
    VolumeMount,
    Workspace,
    cases,
    get_type_name,
    is_started,
    is_terminal,
    macros,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
    runopt,
    runopts,
)
from torchx.specs.capabilities import CapabilityKey
from torchx.specs.metadata_keys import NA, TORCHX_CONTEXT_NAME, app_metadata

__all__ = [
    "ALL",
    "NA",
    "TORCHX_CONTEXT_NAME",
    "CapabilityKey",
    "app_metadata",
    "cases",
    "TORCHX_HOME",
    "UNKNOWN",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "InvalidRunConfigException",
    "GiB",
    "MalformedAppHandleException",
    "MountType",
    "ParsedAppHandle",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "UnknownAppException",
    "UnknownSchedulerException",
    "VolumeMount",
    "Workspace",
    "get_named_resources",
    "get_type_name",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "materialize_appdef",
    "named_resources",
    "parse_app_handle",
    "parse_mounts",
    "resource",
    "runopt",
    "runopts",
]


def __getattr__(name: str) -> object:
    # TorchX exposes the loaded ``name -> factory`` table as ``torchx.specs.
    # _named_resource_factories``; here it is loaded on first use, not at import time.
    if name == "_named_resource_factories":
        from torchx.specs import _named_resources

        return _named_resources.factories()
    if name == "materialize_appdef":
        # argparse, ast and the docstring parser load only when a component is materialized.
        from torchx.specs.builders import materialize_appdef

        return materialize_appdef
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
