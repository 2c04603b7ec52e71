"""TorchX's ``torchx.schedulers.devices``: named devices of a resource (``Resource.devices``)
turned into the device files a container needs."""

import warnings
from functools import partial
from typing import Callable, Dict, List, Mapping

from torchx.specs.api import DeviceMount
from torchx.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE


def to_devicemounts(num_devices: int, device_type: str) -> List[DeviceMount]:
    """``{device_type}0`` … ``{device_type}{n-1}``, each mounted at the same path."""
    return [DeviceMount(src_path=f"{device_type}{i}", dst_path=f"{device_type}{i}") for i in range(num_devices)]


neuron_to_devicemounts: Callable[[int], List[DeviceMount]] = partial(to_devicemounts, device_type="/dev/neuron")
efa_to_devicemounts: Callable[[int], List[DeviceMount]] = partial(to_devicemounts, device_type="/dev/infiniband/uverbs")

DEVICES: Mapping[str, Callable[[int], List[DeviceMount]]] = {
    EFA_DEVICE: efa_to_devicemounts,
    NEURON_DEVICE: neuron_to_devicemounts,
}


def get_device_mounts(devices: Dict[str, int]) -> List[DeviceMount]:
    """The device mounts of ``devices`` (name → count); an unknown name is skipped with a
    warning."""
    mounts: List[DeviceMount] = []
    for name, count in devices.items():
        if name not in DEVICES:
            warnings.warn(f"Could not find named device: {name}", stacklevel=2)
            continue
        mounts += DEVICES[name](count)
    return mounts
