"""TorchX's ``torchx.util.strings``."""

import re

_NOT_ALLOWED = re.compile(r"[^a-z0-9\-]")


def normalize_str(data: str) -> str:
    """``data`` lower-cased with every character outside ``[a-z0-9-]`` removed, then every
    leading ``-`` stripped (0.8): a name Kubernetes accepts (the Rust core's Kubernetes
    renders use the same rule)."""
    return _NOT_ALLOWED.sub("", data.lower()).lstrip("-")
