"""Named resources of an example cluster: a whole 8-GPU node, its power-of-two slices, and an
alias."""

from torchx.plugins import WHOLE, powers_of_two_gpus, register
from torchx.specs import Resource


@register.named_resource(aliases=["example_host"], fractionals=powers_of_two_gpus)
def example_node(fractional: float = WHOLE) -> Resource:
    return Resource(cpu=int(64 * fractional), gpu=int(8 * fractional), memMB=int(512_000 * fractional))
