"""Components registered under ``torchx.components`` as ``example``."""

import torchx.specs as specs


def hello(who: str = "world", times: int = 1) -> specs.AppDef:
    """Says hello.

    Args:
        who: whom to greet
        times: how many times
    """
    return specs.AppDef(
        name="hello",
        roles=[
            specs.Role(
                name="hello",
                image="/tmp",
                entrypoint="sh",
                args=["-c", " ".join([f"echo hello {who};"] * times)],
                resource=specs.Resource(cpu=1, gpu=0, memMB=128),
            )
        ],
    )
