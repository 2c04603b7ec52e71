"""What a handle names, as the core decides it for every caller (the CLI, the dashboard and
this package alike): a pipeline, a group of jobs or one app."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from torchx import _native


def named(handle: str) -> Tuple[str, Optional[Dict[str, Any]]]:
    """``("pipeline", None)`` (a pipeline whose holder died gets a new one), ``("group",
    record)`` or ``("app", None)``; a group handle with no record here raises
    ``torchx.errors`` NotFound."""
    return _native.ext.named(handle)
