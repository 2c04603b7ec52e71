"""TorchX's ``torchx.util.strings``."""

import re

_NOT_ALLOWED = re.compile(r"[^a-z0-9\-]")


def normalize_str(data: str) -> str:
    """``data`` lower-cased with every character outside ``[a-z0-9-]`` removed, and one
    leading ``-`` dropped: a name Kubernetes and GCP Batch accept."""
    if data.startswith("-"):
        data = data[1:]
    return _NOT_ALLOWED.sub("", data.lower())
