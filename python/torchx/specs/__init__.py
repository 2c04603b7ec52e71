"""TorchX's job specification: ``AppDef`` and its parts, states and statuses, app handles,
mounts and named resources (``torchx.specs``)."""

from typing import TYPE_CHECKING, Dict

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

if TYPE_CHECKING:
    from torchx.specs._named_resources import (
        GiB as GiB,
        _NamedResourcesLibrary as _NamedResourcesLibrary,
        get_named_resources as get_named_resources,
        named_resources as named_resources,
        resource as resource,
    )
    from torchx.specs.builders import materialize_appdef as materialize_appdef
    from torchx.specs.capabilities import CapabilityKey as CapabilityKey
    from torchx.specs.metadata_keys import (
        NA as NA,
        TORCHX_CONTEXT_NAME as TORCHX_CONTEXT_NAME,
        app_metadata as app_metadata,
    )

# Made on first use, not by every `import torchx.specs`: each module is a file to find and
# load, `CapabilityKey` a frozen generic dataclass, and `materialize_appdef` needs argparse,
# ast and the docstring parser.
_LAZY: Dict[str, str] = {
    "GiB": "torchx.specs._named_resources",
    "_NamedResourcesLibrary": "torchx.specs._named_resources",
    "get_named_resources": "torchx.specs._named_resources",
    "named_resources": "torchx.specs._named_resources",
    "resource": "torchx.specs._named_resources",
    "materialize_appdef": "torchx.specs.builders",
    "CapabilityKey": "torchx.specs.capabilities",
    "NA": "torchx.specs.metadata_keys",
    "TORCHX_CONTEXT_NAME": "torchx.specs.metadata_keys",
    "app_metadata": "torchx.specs.metadata_keys",
}

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
    # _named_resource_factories``; here it is loaded on first use (and read anew each time:
    # 0.7.0's tests patch it).
    if name == "_named_resource_factories":
        from torchx.specs import _named_resources

        return _named_resources.factories()
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
