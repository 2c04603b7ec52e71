"""Turning a component function and its command line into an ``AppDef``, as TorchX's
``torchx.specs.builders``: ``torchx run comp.py:fn --arg v`` and ``--help`` go through
``materialize_appdef`` and ``_create_args_parser``."""

from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

from torchx.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    VolumeMount,
    make_app_handle,
    parse_mounts,
)
from torchx.specs.file_linter import TorchXArgumentHelpFormatter, get_fn_docstring
from torchx.util.types import (
    annotated_flags,
    decode,
    decode_optional,
    get_argparse_param_type,
    is_bool,
)

__all__ = [
    "BindMount",
    "DeviceMount",
    "VolumeMount",
    "make_app_handle",
    "materialize_appdef",
    "parse_args",
    "parse_mounts",
]


def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    # Annotations written as text (``from __future__ import annotations``) are evaluated, so
    # a component file may use either spelling.
    try:
        return inspect.signature(fn, eval_str=True).parameters
    except Exception:
        return inspect.signature(fn).parameters


class _RemainderAction(argparse.Action):
    """``*args``: what is left of the command line, or the default's words if nothing is
    (a value the namespace was seeded with is kept: ``parse_args`` seeds one to tell what the
    command line gave)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        if len(values) == 0:
            if getattr(namespace, self.dest, None) is not self.default:
                return  # nothing on the command line: keep what the namespace was seeded with
            values = (self.default or "").split()
        setattr(namespace, self.dest, values)


def _create_args_parser(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_defaults: Optional[Dict[str, str]] = None,
    config: Optional[Dict[str, Any]] = None,
) -> argparse.ArgumentParser:
    """The ``argparse`` parser of ``cmpnt_fn``'s command line: ``--param`` (and ``-p`` for
    one-letter names) per parameter, ``*args`` as the remainder, help from the docstring.
    ``cmpnt_defaults`` (text, e.g. from ``.torchxconfig``) override the declared defaults; a
    parameter with neither a default nor a ``config`` value is required."""
    description, arg_help = get_fn_docstring(cmpnt_fn)
    parser = argparse.ArgumentParser(
        prog=f"torchx run <run args...> {cmpnt_fn.__name__} ",
        description=description,
        formatter_class=TorchXArgumentHelpFormatter,
        # "-h" stays free for components (dist.ddp's host type); --help is added below.
        add_help=False,
    )
    parser.add_argument("--help", action="help", default=argparse.SUPPRESS, help="show this help message and exit")
    for name, param in _parameters(cmpnt_fn).items():
        kwargs: Dict[str, Any] = {
            "help": arg_help.get(name, " "),
            "type": get_argparse_param_type(param),
        }
        if param.default is not inspect.Parameter.empty:
            # bools are parsed from text ("True"/"false"), so their default is text too.
            kwargs["default"] = str(param.default) if is_bool(type(param.default)) else param.default
        if cmpnt_defaults and name in cmpnt_defaults:
            kwargs["default"] = cmpnt_defaults[name]

        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            parser.add_argument(name, nargs=argparse.REMAINDER, action=_RemainderAction, **kwargs)
            continue
        flags = [f"-{name}", f"--{name}"] if len(name) == 1 else [f"--{name}"]
        # `Annotated[str, "-s"]` adds flags (TorchX's newer builders).
        flags = [f for f in annotated_flags(param.annotation) if f not in flags] + flags
        if "default" not in kwargs and not (config and name in config):
            kwargs["required"] = True
        parser.add_argument(*flags, dest=name, **kwargs)
    return parser


class ComponentArgs(NamedTuple):
    """A component function's arguments as parsed from a command line."""

    positional_args: Dict[str, Any]
    var_args: List[str]
    kwargs: Dict[str, Any]


def parse_args(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: List[str],
    cmpnt_defaults: Optional[Dict[str, Any]] = None,
    config: Optional[Dict[str, Any]] = None,
) -> argparse.Namespace:
    """``cmpnt_args`` parsed for ``cmpnt_fn``. Precedence, highest first: what the command line
    gives, then ``config`` (from ``--stdin``/a config file), then ``cmpnt_defaults`` (from
    ``.torchxconfig``), then the function's own defaults."""
    parser = _create_args_parser(cmpnt_fn, cmpnt_defaults, config)
    parsed = parser.parse_args(cmpnt_args)
    if config:
        # Which parameters the command line set: parse again onto a namespace of sentinels.
        unset = object()
        seeded = argparse.Namespace(**dict.fromkeys(_parameters(cmpnt_fn), unset))
        parser.parse_args(cmpnt_args, namespace=seeded)
        given = {name for name, value in vars(seeded).items() if value is not unset}
        for key, value in config.items():
            if key in parsed and key not in given:
                setattr(parsed, key, value)
    return parsed


def component_args_from_str(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: List[str],
    cmpnt_args_defaults: Optional[Dict[str, Any]] = None,
    config: Optional[Dict[str, Any]] = None,
) -> ComponentArgs:
    """``cmpnt_args`` (``--name value`` or ``--name=value``, then ``*args``) parsed and decoded
    to ``cmpnt_fn``'s annotations (``int``, ``List[str]``, ``Dict[str, int]``, ``bool`` from
    ``True``/``false``, ...), split into positional, ``*args`` and keyword-only arguments. A
    leading ``--`` of ``*args`` is dropped; a ``**kwargs`` parameter is a ``TypeError``."""
    parsed = parse_args(cmpnt_fn, cmpnt_args, cmpnt_args_defaults, config)
    positional: Dict[str, Any] = {}
    var_args: List[Any] = []
    kwargs: Dict[str, Any] = {}
    for name, param in _parameters(cmpnt_fn).items():
        value = getattr(parsed, name)
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"component fn param `{name}` is a '**kwargs' which is not supported; consider"
                " changing the type to a dict or explicitly declare the params"
            )
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            var_args = list(value or [])
            continue
        annotation = decode_optional(param.annotation)
        if annotation != value.__class__:
            value = decode(value, annotation)
        if param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[name] = value
        else:
            positional[name] = value
    if var_args and var_args[0] == "--":
        var_args = var_args[1:]
    return ComponentArgs(positional, var_args, kwargs)


def materialize_appdef(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: List[str],
    cmpnt_defaults: Optional[Dict[str, Any]] = None,
    config: Optional[Dict[str, Any]] = None,
) -> AppDef:
    """The ``AppDef`` ``cmpnt_fn`` returns for the command line ``cmpnt_args`` (see
    :func:`component_args_from_str`); ``TypeError`` if it returns anything else. Bad arguments
    exit as argparse does."""
    args = component_args_from_str(cmpnt_fn, cmpnt_args, cmpnt_defaults, config)
    app = cmpnt_fn(*args.positional_args.values(), *args.var_args, **args.kwargs)
    if not isinstance(app, AppDef):
        raise TypeError(f"Expected a component that returns `AppDef`, but got `{type(app)}`")
    return app
