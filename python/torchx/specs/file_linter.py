"""Checks that a function is a valid TorchX component, from its source (TorchX's
``torchx.specs.file_linter``), and reads its Google-style docstring for ``--help``.

A component's parameters are annotated with ``int``, ``str``, ``float``, ``bool``,
``List[prim]``, ``Dict[prim, prim]`` or ``Optional`` of those (``list``/``dict`` and
``X | None`` spellings too), and it returns ``AppDef``."""

from __future__ import annotations

import abc
import argparse
import ast
import inspect
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from torchx.util.io import read_conf_file

_DOCS_URL = "https://pytorch.org/torchx/latest/component_best_practices.html"


def _default_arg_descriptions(fn: Callable[..., object]) -> Dict[str, str]:
    # argparse hides an empty or None help, so the default description is a blank.
    return {name: " " for name in inspect.signature(fn).parameters}


class TorchXArgumentHelpFormatter(
    argparse.RawDescriptionHelpFormatter,
    argparse.ArgumentDefaultsHelpFormatter,
    argparse.MetavarTypeHelpFormatter,
):
    """Help formatter for component arguments: appends ``(required)`` or
    ``(default: VALUE)`` to each argument's help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is argparse.SUPPRESS:  # --help itself
            return text
        if action.required:
            return text + " (required)"
        return text + f" (default: {action.default})"


# Google-style section titles; the ones that list parameters come first.
_ARG_SECTIONS = ("Args", "Arguments", "Parameters", "Params")
_SECTIONS = _ARG_SECTIONS + (
    "Attributes", "Example", "Examples", "Except", "Exceptions", "Note", "Notes",
    "Raises", "Return", "Returns", "See Also", "Todo", "Warning", "Warnings", "Yield", "Yields",
)


def _parse_google_docstring(doc: str) -> Tuple[str, str, Dict[str, str]]:
    """``(short description, long description, {param: description})`` of a cleaned
    Google-style docstring: the description is what precedes the first section title
    (``Args:``, ``Returns:``, ...), its first line the short one; each ``name (type): text``
    entry of an ``Args:`` section, with its more-indented continuation lines, describes a
    parameter."""
    lines = doc.splitlines()
    first_section = next(
        (i for i, line in enumerate(lines) if line.strip().rstrip(":") in _SECTIONS
         and line.strip().endswith(":")),
        len(lines),
    )
    description = "\n".join(lines[:first_section]).strip()
    short, _, long = description.partition("\n")
    params: Dict[str, str] = {}
    i = first_section
    while i < len(lines):
        title = lines[i].strip().rstrip(":")
        i += 1
        body: List[str] = []
        while i < len(lines) and not (
            lines[i].strip().rstrip(":") in _SECTIONS and lines[i].strip().endswith(":")
        ):
            body.append(lines[i])
            i += 1
        if title in _ARG_SECTIONS:
            params.update(_parse_args_section(body))
    return short.strip(), long.strip(), params


def _parse_args_section(body: List[str]) -> Dict[str, str]:
    entries = [line for line in body if line.strip()]
    if not entries:
        return {}
    indent = min(len(line) - len(line.lstrip()) for line in entries)
    params: Dict[str, str] = {}
    name: Optional[str] = None
    text: List[str] = []

    def flush() -> None:
        if name is not None:
            params[name] = inspect.cleandoc("\n".join(text)).strip()

    for line in body:
        stripped = line.strip()
        at_entry = stripped and len(line) - len(line.lstrip()) == indent and ":" in stripped
        if at_entry:
            flush()
            head, _, rest = stripped.partition(":")
            name = head.split("(", 1)[0].strip().lstrip("*")
            text = [rest.strip()]
        elif name is not None:
            text.append(line)
    flush()
    return params


def get_fn_docstring(fn: Callable[..., object]) -> Tuple[str, Dict[str, str]]:
    """``(description, {parameter: description})`` from ``fn``'s Google-style docstring.
    Without a docstring the description is the function's name and a tip; a parameter the
    docstring does not describe gets ``" "``."""
    default_description = (
        f"{fn.__name__} TIP: improve this help string by adding a docstring\n"
        f"to your component (see: {_DOCS_URL})"
    )
    arg_descriptions = _default_arg_descriptions(fn)
    doc = inspect.getdoc(fn)
    if not doc:
        return default_description, arg_descriptions
    short, long, params = _parse_google_docstring(doc)
    for name, text in params.items():
        if name in arg_descriptions and text:
            arg_descriptions[name] = text
    description = short or default_description
    if long:
        description += "\n" + long
    return description, arg_descriptions


@dataclass
class LinterMessage:
    name: str
    description: str
    line: int
    char: int
    severity: str = "error"


class TorchxFunctionValidator(abc.ABC):
    @abc.abstractmethod
    def validate(self, app_specs_func_def: ast.FunctionDef) -> List[LinterMessage]:
        """The problems of the component function ``app_specs_func_def``."""

    def _gen_linter_message(self, description: str, lineno: int) -> LinterMessage:
        return LinterMessage(
            name="TorchxFunctionValidator", description=description, line=lineno, char=0
        )


def _type_name(node: ast.expr) -> Optional[str]:
    """``List`` for ``List``, ``typing.List`` and ``list``; None for anything else."""
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        return None
    return {"list": "List", "dict": "Dict"}.get(name, name)


def _optional_inner(node: ast.expr) -> Optional[ast.expr]:
    """``X`` for ``Optional[X]`` and ``X | None``; None if ``node`` is neither."""
    if isinstance(node, ast.Subscript) and _type_name(node.value) == "Optional":
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for inner, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, ast.Constant) and other.value is None:
                return inner
    return None


class TorchxFunctionArgsValidator(TorchxFunctionValidator):
    def validate(self, app_specs_func_def: ast.FunctionDef) -> List[LinterMessage]:
        args = app_specs_func_def.args
        params = list(args.args)
        if args.vararg:
            params.append(args.vararg)
        params += args.kwonlyargs
        errors: List[LinterMessage] = []
        for arg in params:
            errors += self._validate_arg_def(app_specs_func_def.name, arg)
        return errors

    def _validate_arg_def(self, function_name: str, arg_def: ast.arg) -> List[LinterMessage]:
        annotation = arg_def.annotation
        if annotation is None:
            return [
                self._gen_linter_message(
                    f"Arg {arg_def.arg} missing type annotation", arg_def.lineno
                )
            ]
        if isinstance(annotation, ast.Subscript) and _type_name(annotation.value) == "Annotated":
            # Annotated[T, ...]: T is checked.
            sub = annotation.slice
            annotation = sub.elts[0] if isinstance(sub, ast.Tuple) and sub.elts else sub
        if isinstance(annotation, (ast.Name, ast.Attribute, ast.Constant)):
            return []
        inner = _optional_inner(annotation)
        if inner is not None:
            if isinstance(inner, (ast.Name, ast.Attribute)):
                return []  # Optional[primitive]
            annotation = inner
        type_name = (
            _type_name(annotation.value) if isinstance(annotation, ast.Subscript) else None
        )
        if type_name not in ("Dict", "List"):
            shown = type_name or ast.unparse(annotation)
            return [
                self._gen_linter_message(
                    f"`{function_name}` allows only Dict, List as complex types."
                    f"Argument `{arg_def.arg}` has: {shown}",
                    arg_def.lineno,
                )
            ]
        assert isinstance(annotation, ast.Subscript)
        sub = annotation.slice
        if type_name == "Dict":
            elements = sub.elts if isinstance(sub, ast.Tuple) else [sub]
            if not all(isinstance(e, (ast.Name, ast.Attribute)) for e in elements):
                return [
                    self._gen_linter_message(
                        "Dict can only have primitive types", arg_def.lineno
                    )
                ]
        elif not isinstance(sub, (ast.Name, ast.Attribute)):
            return [self._gen_linter_message("List can only have primitive types", arg_def.lineno)]
        return []


class TorchxReturnValidator(TorchxFunctionValidator):
    """The function must be annotated to return ``AppDef`` (or ``specs.AppDef``)."""

    def _get_return_annotation(self, app_specs_func_def: ast.FunctionDef) -> Optional[str]:
        returns = app_specs_func_def.returns
        if isinstance(returns, ast.Attribute):
            return returns.attr
        if isinstance(returns, ast.Name):
            return returns.id
        if isinstance(returns, ast.Constant) and isinstance(returns.value, str):
            return returns.value.rpartition(".")[2]
        return None

    def validate(self, app_specs_func_def: ast.FunctionDef) -> List[LinterMessage]:
        returns = self._get_return_annotation(app_specs_func_def)
        name = app_specs_func_def.name
        if not returns:
            return [
                self._gen_linter_message(
                    f"Function: {name} missing return annotation or has unknown annotations."
                    " Supported return annotation: AppDef",
                    app_specs_func_def.lineno,
                )
            ]
        if returns != "AppDef":
            return [
                self._gen_linter_message(
                    f"Function: {name} has incorrect return annotation,"
                    " supported annotation: AppDef",
                    app_specs_func_def.lineno,
                )
            ]
        return []


class TorchFunctionVisitor(ast.NodeVisitor):
    """Finds the component function and runs the validators on it."""

    def __init__(self, component_function_name: str) -> None:
        self.validators: List[TorchxFunctionValidator] = [
            TorchxFunctionArgsValidator(),
            TorchxReturnValidator(),
        ]
        self.linter_errors: List[LinterMessage] = []
        self.component_function_name = component_function_name
        self.visited_function = False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name != self.component_function_name:
            return
        self.visited_function = True
        for validator in self.validators:
            self.linter_errors += validator.validate(node)


def validate(path: str, component_function: str) -> List[LinterMessage]:
    """The problems of ``component_function`` in the Python file ``path``: a syntax error,
    the function not found, unannotated or unsupported parameters, a missing or wrong return
    annotation. Empty when the function is a valid component."""
    source = read_conf_file(path)
    try:
        module = ast.parse(source)
    except SyntaxError as e:
        return [
            LinterMessage(
                name="TorchXValidator",
                description=e.msg,
                line=e.lineno or 0,
                char=e.offset or 0,
            )
        ]
    visitor = TorchFunctionVisitor(component_function)
    visitor.visit(module)
    errors = visitor.linter_errors
    if not visitor.visited_function:
        errors.append(
            LinterMessage(
                name="TorchXValidator",
                description=f"Function {component_function} not found",
                line=0,
                char=0,
            )
        )
    return errors
