"""TorchX's ``torchx.util.shlex``."""

import shlex
from typing import Iterable


def join(args: Iterable[str]) -> str:
    """The command line ``args`` as a shell would read it back (each argument quoted as needed)."""
    return " ".join(shlex.quote(arg) for arg in args)
