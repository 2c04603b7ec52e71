"""Finding components by name, as TorchX's ``torchx.specs.finder``: builtins
(``dist.ddp``), components registered under the ``torchx.components`` entry points, component
files (``path/to/file.py:fn``) and, as the nightly, modules on the Python path
(``pkg.module:fn``, or ``pkg.module.fn`` when nothing registered has that name); a component
may be a function or a class whose ``build(self)`` returns the ``AppDef``."""

from __future__ import annotations

import abc
import functools
import importlib.util
import inspect
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from torchx.specs._component_errors import (
    ComponentNotFoundException as ComponentNotFoundException,
    ComponentValidationException as ComponentValidationException,
)
from torchx.specs.api import AppDef
from torchx.specs.file_linter import ComponentFunctionValidator, get_fn_docstring, validate
from torchx.util import entrypoints
from torchx.util.io import read_conf_file

# Checks of a component function (None: the linter's defaults).
Validators = Optional[List[ComponentFunctionValidator]]


@dataclass
class _Component:
    """A component: its name (``dist.ddp``, ``path.py:fn``), the first lines of its docstring,
    its function and what the linter found wrong with it."""

    name: str
    description: str
    fn_name: str
    fn: Callable[..., AppDef]
    validation_errors: List[str]


class ComponentsFinder(abc.ABC):
    @abc.abstractmethod
    def find(self, validators: Validators = None) -> List[_Component]:
        """The components this finder knows."""


def is_namespace_package(module: ModuleType) -> bool:
    return getattr(module, "__file__", None) is None


def is_package(module: ModuleType) -> bool:
    return hasattr(module, "__path__")


def module_relname(module: ModuleType, relative_to: ModuleType) -> str:
    """``module``'s dotted name relative to ``relative_to`` (``ValueError`` if it is not
    inside it)."""
    name, base = module.__name__, relative_to.__name__
    if name == base:
        return ""
    if not name.startswith(base + "."):
        raise ValueError(f"`{name}` is not a submodule of `{base}`")
    return name[len(base) + 1 :]


def _import(module: Union[str, ModuleType]) -> ModuleType:
    if isinstance(module, str):
        import importlib

        return importlib.import_module(module)
    return module


class ModuleComponentsFinder(ComponentsFinder):
    """The components in ``module`` and its submodules. Each is named
    ``{group}.{module path relative to module}.{function}`` (empty parts left out)."""

    def __init__(self, module: Union[str, ModuleType], group: str) -> None:
        self.base_module: ModuleType = _import(module)
        self.group = group

    def _iter_modules_recursive(self, module: Union[str, ModuleType]) -> Iterator[ModuleType]:
        module = _import(module)
        if not is_namespace_package(module):
            yield module
        if is_package(module):
            import pkgutil

            for info in pkgutil.iter_modules(module.__path__, prefix=f"{module.__name__}."):
                if info.name.rpartition(".")[2].startswith("_"):
                    continue  # private helpers, not components
                if info.ispkg:
                    yield from self._iter_modules_recursive(info.name)
                else:
                    yield _import(info.name)

    def find(self, validators: Validators = None) -> List[_Component]:
        found: List[_Component] = []
        for module in self._iter_modules_recursive(self.base_module):
            found += self._get_components_from_module(module, validators)
        return found

    def _get_components_from_module(self, module: ModuleType, validators: Validators = None) -> List[_Component]:
        path = module.__file__
        assert path, f"module must have __file__: {module}"
        path = os.path.abspath(path)
        rel_name = module_relname(module, relative_to=self.base_module)
        found = []
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ != module.__name__ or fn_name.startswith("__"):
                continue  # imported, not defined here; or a module hook (`__getattr__`)
            description, _ = get_fn_docstring(fn)
            found.append(
                _Component(
                    name=".".join(p for p in (self.group, rel_name, fn_name) if p),
                    description=description,
                    fn_name=fn_name,
                    fn=fn,
                    validation_errors=[m.description for m in validate(path, fn_name, validators)],
                )
            )
        return found


def _is_module_path(path: str) -> bool:
    """Whether ``path`` reads as a dotted module path (``pkg.module``), not a file path."""
    return not path.endswith(".py") and all(part.isidentifier() for part in path.split("."))


def _names_missing_module(module_path: str, e: ModuleNotFoundError) -> bool:
    """Whether ``e`` says ``module_path`` (or a package above it) is missing, rather than an
    import inside an existing module failing (which is the module's error, and propagates)."""
    return bool(e.name) and (module_path == e.name or module_path.startswith(f"{e.name}."))


def _import_component_module(module_path: str) -> ModuleType:
    """The module of a ``pkg.module:fn`` component."""
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as e:
        if _names_missing_module(module_path, e):
            raise ComponentNotFoundException(f"Module `{module_path}` not found on the python path") from e
        raise
    if module.__file__ is None:
        raise ComponentNotFoundException(
            f"`{module_path}` is a namespace package, not a module; components must be addressed "
            "by the module that defines them"
        )
    return module


def _component_fn_from_class(cls: Any) -> Callable[..., AppDef]:
    """A class component as a component function: its constructor's parameters are the
    component's arguments and ``cls(**args).build()`` the app (signature and docstring are
    the class's, for argument parsing and help)."""

    @functools.wraps(cls, updated=())
    def component_fn(*args: Any, **kwargs: Any) -> AppDef:
        app: AppDef = cls(*args, **kwargs).build()
        return app

    return component_fn


class CustomComponentsFinder(ComponentsFinder):
    """The component ``function_name`` of the Python file ``filepath``, or of the module
    ``filepath`` names (``pkg.module``) when no such file exists; a function, or a class with
    a ``build(self) -> AppDef`` method."""

    def __init__(self, filepath: str, function_name: str) -> None:
        self._filepath = filepath
        self._function_name = function_name

    def find(self, validators: Validators = None) -> List[_Component]:
        if not os.path.isfile(self._filepath) and _is_module_path(self._filepath):
            module = _import_component_module(self._filepath)
            source_path = str(module.__file__)
            namespace: Dict[str, Any] = vars(module)
        else:
            from torchx.specs._component_modules import load_component_file

            source_path = self._filepath
            # `read_conf_file` looked up when called: tests patch this module's.
            namespace = vars(load_component_file(self._filepath, globals(), lambda p: read_conf_file(p)))
        errors = [m.description for m in validate(source_path, self._function_name, validators)]
        fn: Any = namespace.get(self._function_name)
        if fn is None:
            raise ComponentNotFoundException(f"Function {self._function_name} does not exist in file {self._filepath}")
        if inspect.isclass(fn):
            if callable(getattr(fn, "build", None)):
                fn = _component_fn_from_class(fn)
            else:
                errors.append(f"Class component `{self._function_name}` must define a `build(self) -> AppDef` method")
        description, _ = get_fn_docstring(fn)
        return [
            _Component(
                name=f"{self._filepath}:{self._function_name}",
                description=description,
                fn_name=self._function_name,
                fn=fn,
                validation_errors=errors,
            )
        ]


def _load_custom_components(validators: Validators = None) -> List[_Component]:
    found: List[_Component] = []
    for group, load_module in (entrypoints.load_group("torchx.components", default={}) or {}).items():
        # An entry-point name starting with "_" means "no prefix".
        prefix = "" if group.startswith("_") else group
        found += ModuleComponentsFinder(load_module(), prefix).find(validators)
    return found


def _load_components(validators: Validators = None) -> Dict[str, _Component]:
    """As TorchX's: the components of the ``torchx.components`` entry points, or the builtins
    (``torchx.components``) when none are registered."""
    components = _load_custom_components(validators)
    if not components:
        components = ModuleComponentsFinder("torchx.components", "").find(validators)
    return {c.name: c for c in components}


def _all_components(validators: Validators = None) -> Dict[str, _Component]:
    """The builtins, then the components of the ``torchx.components`` entry points. Unlike
    TorchX, where registering components replaces the builtin set, a registration only adds:
    one with a builtin's name is ignored with a warning."""
    builtins = ModuleComponentsFinder("torchx.components", "").find(validators)
    components = {c.name: c for c in builtins}
    for c in _load_custom_components(validators):
        if c.name in components:
            import warnings

            warnings.warn(
                f"component `{c.name}` of the torchx.components entry points is ignored: a builtin has that name",
                stacklevel=2,
            )
            continue
        components[c.name] = c
    return components


_components: Optional[Dict[str, _Component]] = None


def _find_components(validators: Validators = None) -> Dict[str, _Component]:
    global _components
    if not _components:
        _components = _all_components(validators)
    return _components


def _is_custom_component(component_name: str) -> bool:
    return ":" in component_name


def _find_custom_components(name: str, validators: Validators = None) -> Dict[str, _Component]:
    filepath, sep, fn_name = name.rpartition(":")
    if not sep or not filepath or not fn_name:
        raise ValueError(f"Invalid custom component: {name}, valid template : `FILEPATH`:`FUNCTION_NAME`")
    if not os.path.isfile(filepath) and not _is_module_path(filepath):
        try:
            read_conf_file(filepath)  # a file served from elsewhere (the loader reads it again)
        except OSError as e:
            raise ComponentNotFoundException(f"Component file `{filepath}` does not exist") from e
    return {c.name: c for c in CustomComponentsFinder(filepath, fn_name).find(validators)}


def _find_module_components(name: str, validators: Validators = None) -> Optional[Dict[str, _Component]]:
    """``pkg.module.fn`` as the component ``fn`` of module ``pkg.module``; ``None`` when
    ``name`` is not a dotted path or there is no such module."""
    module_path, _, fn_name = name.rpartition(".")
    if not module_path or not _is_module_path(module_path):
        return None
    try:
        if importlib.util.find_spec(module_path) is None:
            return None
    except ValueError:
        return None
    except ModuleNotFoundError as e:
        if _names_missing_module(module_path, e):
            return None
        raise
    (component,) = CustomComponentsFinder(module_path, fn_name).find(validators)
    component.name = name
    return {name: component}


def get_components(validators: Validators = None) -> Dict[str, _Component]:
    """The valid components by name: the builtins and those of the ``torchx.components`` entry
    points (checked by ``validators``, by default the linter's)."""
    return {n: c for n, c in _find_components(validators).items() if not c.validation_errors}


def get_component(name: str, validators: Validators = None) -> _Component:
    """The component ``name`` (``dist.ddp``, ``path/to/file.py:fn``, ``pkg.module:fn`` or
    ``pkg.module.fn``). ``ComponentNotFoundException`` if there is none,
    ``ComponentValidationException`` if it is not a valid component."""
    if _is_custom_component(name):
        components = _find_custom_components(name, validators)
    else:
        components = _find_components(validators)
        if name not in components:
            components = _find_module_components(name, validators) or components
    if name not in components:
        raise ComponentNotFoundException(
            f"Component `{name}` not found. Please make sure it is one of the "
            "builtins: `torchx builtins`. Or registered via `[torchx.components]` "
            "entry point (see: https://pytorch.org/torchx/latest/configure.html). "
            "Or addressable as `path/to/file.py:fn` or `pkg.module:fn`"
        )
    component = components[name]
    if component.validation_errors:
        errors = "\n".join(component.validation_errors)
        raise ComponentValidationException(f"Component {name} has validation errors: \n {errors}")
    return component


def get_builtin_source(name: str, validators: Validators = None) -> str:
    """The source of component ``name``'s function, preceded by the import lines of its file
    (a starting point for a custom component)."""
    component = get_component(name, validators)
    fn_name = component.fn_name
    imports = []
    with open(inspect.getfile(component.fn)) as f:
        for line in f:
            if line.startswith(f"def {fn_name}("):
                break
            if line.startswith(("import ", "from ")):
                imports.append(line.rstrip("\n"))
    return "\n".join([*imports, "\n", inspect.getsource(component.fn), "\n"])
