"""Builds a builtin component's AppDef with the Rust builders, so the CLI and Python agree."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple, Union

from torchx.specs import AppDef
from torchx.specs._json import app_from_json
from torchx.specs.api import _rs


def _as_tokens(args: Dict[str, Any]) -> List[str]:
    """Keyword arguments as the component's command line (``--name value``)."""
    tokens: List[str] = []
    for name, value in args.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "True" if value else "False"
        elif isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        tokens += [f"--{name}", str(value)]
    return tokens


def call(component: str, varargs: Tuple[str, ...], params: Dict[str, Any]) -> AppDef:
    """What a builtin component function returns: its parameters as the component's command
    line (``--name value``, varargs after ``--``) built by the Rust builder."""
    tokens = _as_tokens(params)
    if varargs:
        tokens += ["--", *(str(a) for a in varargs)]
    return build(component, tokens)


def build(
    component: str,
    args: Union[List[str], Dict[str, Any]],
    defaults: Optional[Dict[str, str]] = None,
) -> AppDef:
    """The AppDef of builtin ``component`` for ``args`` (command-line tokens, or a dict of
    parameter values). ``ValueError`` for bad arguments, ``LookupError`` for an unknown
    component; Python file components are not supported here yet."""
    if ":" in component or component.endswith(".py"):
        raise NotImplementedError(
            f"{component}: Python component files are not supported by this torchx yet; "
            "use a builtin component or build the AppDef in Python"
        )
    tokens = _as_tokens(args) if isinstance(args, dict) else [str(a) for a in args]
    kind, value = _rs().build_component(component, tokens, dict(defaults or {}))
    if kind == "help":
        raise ValueError(value)
    return app_from_json(json.loads(value))
