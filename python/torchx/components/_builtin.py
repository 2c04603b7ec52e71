"""Builds a builtin component's AppDef with the Rust builders, so the CLI and Python agree."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from torchx import _native
from torchx.specs import AppDef
from torchx.specs._json import app_from_json


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
    """The AppDef of ``component`` for ``args`` (command-line tokens, or a dict of parameter
    values): a builtin is built by the Rust builder (as the CLI does); ``path.py:fn`` and
    components of the ``torchx.components`` entry points are called in Python. A builtin's
    name cannot be taken by a plugin. ``ValueError`` for bad arguments, ``LookupError`` for
    an unknown builtin, ``ComponentNotFoundException`` for an unknown plugin or file."""
    if ":" in component or component not in _builtin_names():
        return _build_python(component, args, defaults)
    tokens = _as_tokens(args) if isinstance(args, dict) else [str(a) for a in args]
    app, help_text = _native.ext.build_component(component, tokens, dict(defaults or {}))
    if app is None:
        raise ValueError(help_text)
    return app_from_json(app)


def _builtin_names() -> List[str]:
    return list(_native.ext.builtin_component_names())


def _build_python(component: str, args: Union[List[str], Dict[str, Any]], defaults: Optional[Dict[str, str]]) -> AppDef:
    from torchx.specs.builders import materialize_appdef
    from torchx.specs.finder import (
        ComponentNotFoundException,
        _load_custom_components,
        get_component,
    )

    if ":" in component:
        fn = get_component(component).fn
    else:
        found = {c.name: c for c in _load_custom_components()}
        if component not in found:
            raise ComponentNotFoundException(
                f"Component `{component}` not found: it is not a builtin (`torchx builtins`),"
                " a `path.py:function` or a `torchx.components` entry-point component"
            )
        fn = found[component].fn
    if isinstance(args, dict):
        return fn(**args)
    return materialize_appdef(fn, [str(a) for a in args], defaults)
