"""Named resources for AWS instance types (``aws_p4d.24xlarge``, ...), as TorchX's
``torchx.specs.named_resources_aws``. Memory is the instance's minus a 4 % tax
(``GiB == int(1024 * 0.96)``) so a replica fits next to the node's own daemons.

Each instance type is a factory function (``aws_p3_2xlarge()``); ``NAMED_RESOURCES`` maps the
resource names to them. The values come from the Rust core's table, which the CLI uses too.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Mapping, Optional

from torchx.specs.api import Resource

EFA_DEVICE = "vpc.amazonaws.com/efa"
NEURON_DEVICE = "aws.amazon.com/neurondevice"
K8S_ITYPE = "node.kubernetes.io/instance-type"
# Instances lose ~4% of their memory to the system: a resource of N GiB asks for
# N * int(GiB * MEM_TAX) MB. (0.7.0 defined GiB as the taxed 983; 0.8 as 1024.)
MEM_TAX = 0.96
GiB: int = 1024


def instance_type_from_resource(resource: Resource) -> Optional[str]:
    """The instance type named by ``resource``'s ``K8S_ITYPE`` capability (warns if none)."""
    instance_type = resource.capabilities.get(K8S_ITYPE)
    if instance_type is None:
        warnings.warn(
            "Cannot determine the resource's instance type, which can cause issues for"
            " non-homogeneous compute environments and multi-node jobs. Consider providing"
            f" the {K8S_ITYPE} resource capability (torchx.specs.named_resources_aws.K8S_ITYPE).",
            stacklevel=2,
        )
    return instance_type


def _factories() -> Dict[str, Callable[[], Resource]]:
    from torchx.specs import _tables

    return _tables.family("aws_")


def __getattr__(name: str) -> Any:
    # NAMED_RESOURCES and the factory functions are made on first use (they read the Rust
    # table), then kept as module attributes.
    factories = _factories()
    namespace: Dict[str, Any] = {f.__name__: f for f in factories.values()}
    namespace["NAMED_RESOURCES"] = factories
    globals().update(namespace)
    if name in namespace:
        return namespace[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


NAMED_RESOURCES: Mapping[str, Callable[[], Resource]]
