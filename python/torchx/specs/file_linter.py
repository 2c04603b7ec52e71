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

_DOCS_URL = "https://meta-pytorch.org/torchx/latest/component_best_practices.html"


def _default_arg_descriptions(fn: Callable[..., object]) -> Dict[str, str]:
    # argparse hides an empty or None help, so the default description is a blank.
    return dict.fromkeys(inspect.signature(fn).parameters, " ")


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
    "Attributes",
    "Example",
    "Examples",
    "Except",
    "Exceptions",
    "Note",
    "Notes",
    "Raises",
    "Return",
    "Returns",
    "See Also",
    "Todo",
    "Warning",
    "Warnings",
    "Yield",
    "Yields",
)


def _parse_google_docstring(doc: str) -> Tuple[str, str, Dict[str, str]]:
    """``(short description, long description, {param: description})`` of a cleaned
    Google-style docstring: the description is what precedes the first section title
    (``Args:``, ``Returns:``, ...), its first line the short one; each ``name (type): text``
    entry of an ``Args:`` section, with its more-indented continuation lines, describes a
    parameter."""
    lines = doc.splitlines()
    first_section = next(
        (i for i, line in enumerate(lines) if line.strip().rstrip(":") in _SECTIONS and line.strip().endswith(":")),
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
        while i < len(lines) and not (lines[i].strip().rstrip(":") in _SECTIONS and lines[i].strip().endswith(":")):
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
        f"{fn.__name__} TIP: improve this help string by adding a docstring\nto your component (see: {_DOCS_URL})"
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


class ComponentFunctionValidator(abc.ABC):
    """A check of a component function's definition (0.8's name; 0.7.0's was
    ``TorchxFunctionValidator``)."""

    @abc.abstractmethod
    def validate(self, app_specs_func_def: ast.FunctionDef) -> List[LinterMessage]:
        """The problems of the component function ``app_specs_func_def``."""

    def _gen_linter_message(self, description: str, lineno: int) -> LinterMessage:
        return LinterMessage(name="TorchxFunctionValidator", description=description, line=lineno, char=0)


TorchxFunctionValidator = ComponentFunctionValidator


def is_primitive(arg: ast.expr) -> bool:
    """Any bare name (``int``, ``str``, ``MyType``) counts as a primitive type."""
    return isinstance(arg, ast.Name)


def get_generic_type(arg: ast.expr) -> ast.expr:
    """``T`` of ``C[T]``."""
    if not isinstance(arg, ast.Subscript):
        raise TypeError(f"expected a subscripted type (C[T]), got {ast.unparse(arg)!r}")
    return arg.slice


def get_optional_type(arg: ast.expr) -> Optional[ast.expr]:
    """``T`` of ``Optional[T]``, ``T | None`` or ``None | T``; None for anything else."""
    if isinstance(arg, ast.Subscript) and getattr(arg.value, "id", None) == "Optional":
        return get_generic_type(arg)
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.BitOr):
        for inner, other in ((arg.left, arg.right), (arg.right, arg.left)):
            if isinstance(other, ast.Constant) and other.value is None:
                return inner
    return None


class ArgTypeValidator(ComponentFunctionValidator):
    """Every parameter (``*args`` and keyword-only ones too) is annotated with a primitive
    (any bare name), ``Optional`` of one, ``Dict[K, V]``/``List[T]`` of primitives, or a
    ``Tuple[T1, T2, ...]`` of primitives; ``Annotated[T, ...]`` is checked as ``T``."""

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

    def _validate_arg_def(self, function_name: str, arg: ast.arg) -> List[LinterMessage]:
        problem = self._problem(arg.annotation)
        if problem is None:
            return []
        return [
            self._gen_linter_message(
                f"{problem} for argument {ast.unparse(arg)!r} in function {function_name!r}",
                arg.lineno,
            )
        ]

    @staticmethod
    def _problem(arg_type: Optional[ast.expr]) -> Optional[str]:
        if arg_type is None:
            return "Missing type annotation"
        if isinstance(arg_type, ast.Subscript) and getattr(arg_type.value, "id", None) == "Annotated":
            inner = arg_type.slice
            if isinstance(inner, ast.Tuple) and inner.elts:
                arg_type = inner.elts[0]
        arg_type = get_optional_type(arg_type) or arg_type
        if is_primitive(arg_type):
            return None
        if not isinstance(arg_type, ast.Subscript):
            return f"Unsupported argument type {ast.unparse(arg_type)!r}"
        container = getattr(arg_type.value, "id", ast.unparse(arg_type.value))
        params = arg_type.slice
        if container in ("Dict", "dict"):
            if not isinstance(params, ast.Tuple) or len(params.elts) != 2:
                return (
                    f"Malformed dict type {ast.unparse(arg_type)!r}, expected exactly two type parameters (dict[K, V])"
                )
            key, value = params.elts
            if not is_primitive(key):
                return f"Non-primitive key type {ast.unparse(key)!r}"
            if not is_primitive(value):
                return f"Non-primitive value type {ast.unparse(value)!r}"
            return None
        if container in ("List", "list"):
            return None if is_primitive(params) else f"Non-primitive element type {ast.unparse(params)!r}"
        if container in ("Tuple", "tuple"):
            if not isinstance(params, ast.Tuple):
                return (
                    f"Unsupported tuple type {ast.unparse(arg_type)!r}: single-element tuples"
                    " are valid typing but not supported for components; expected element"
                    " types (tuple[T1, T2, ...])"
                )
            for element in params.elts:
                if not is_primitive(element):
                    return f"Non-primitive element type '{ast.unparse(element)!r}'"
            return None
        return f"Unsupported container type {container!r}"


TorchxFunctionArgsValidator = ArgTypeValidator


class ReturnTypeValidator(ComponentFunctionValidator):
    """The function must be annotated to return ``supported_return_type`` (``AppDef``, as
    ``AppDef``, ``specs.AppDef`` or a string)."""

    def __init__(self, supported_return_type: str = "AppDef") -> None:
        super().__init__()
        self._supported_return_type = supported_return_type

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
        supported = self._supported_return_type
        if not returns:
            return [
                self._gen_linter_message(
                    f"Function: {name} missing return annotation or has unknown annotations."
                    f" Supported return annotation: {supported}",
                    app_specs_func_def.lineno,
                )
            ]
        if returns != supported:
            return [
                self._gen_linter_message(
                    f"Function: {name} has incorrect return annotation, supported annotation: {supported}",
                    app_specs_func_def.lineno,
                )
            ]
        return []


TorchxReturnValidator = ReturnTypeValidator


class ComponentFnVisitor(ast.NodeVisitor):
    """Finds the component function and runs the validators on it (by default
    :class:`ArgTypeValidator` and ``ReturnTypeValidator("AppDef")``)."""

    def __init__(
        self,
        component_function_name: str,
        validators: Optional[List[ComponentFunctionValidator]] = None,
    ) -> None:
        self.validators: List[ComponentFunctionValidator] = (
            [ArgTypeValidator(), ReturnTypeValidator("AppDef")] if validators is None else validators
        )
        self.linter_errors: List[LinterMessage] = []
        self.component_function_name = component_function_name
        self.visited_function = False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name != self.component_function_name:
            return
        self.visited_function = True
        for validator in self.validators:
            self.linter_errors += validator.validate(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """A class component (``cls(**args).build()``, the nightly's): only the return annotation
        of a ``build`` in its body is checked here (an inherited one, by the finder)."""
        if node.name != self.component_function_name:
            return
        self.visited_function = True
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "build":
                self.linter_errors += ReturnTypeValidator("AppDef").validate(stmt)


TorchFunctionVisitor = ComponentFnVisitor


def validate(
    path: str,
    component_function: str,
    validators: Optional[List[ComponentFunctionValidator]] = None,
) -> List[LinterMessage]:
    """The problems of ``component_function`` in the Python file ``path``: a syntax error,
    the function not found, and what the ``validators`` find (by default: unannotated or
    unsupported parameters, a missing or wrong return annotation). Empty when the function is
    a valid component."""
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
    visitor = ComponentFnVisitor(component_function, validators)
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
