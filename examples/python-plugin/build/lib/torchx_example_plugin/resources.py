"""Named resources registered under ``torchx.named_resources``."""

from torchx.specs import Resource


def example_gpu_x2() -> Resource:
    return Resource(cpu=8, gpu=2, memMB=32 * 1024, capabilities={"example/instance": "gpu-x2"})
