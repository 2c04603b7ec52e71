"""Component files loaded as real modules, as the nightly loads them (#1414): registered in
``sys.modules`` under the name the interpreter would give them (``pkg.mod`` inside a package,
with the package root on ``sys.path``; the file's stem otherwise, with its directory on
``sys.path``), so their own imports (siblings, relative ones) work and what they define has its
real ``__module__``. Unlike the nightly, and as TorchX 0.7, TorchX's names stay at hand: a
component file that uses ``AppDef`` without importing it still loads."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Optional, Tuple

# The finder's logger: where TorchX's loader warns.
log: logging.Logger = logging.getLogger("torchx.specs.finder")

# Re-entrant: loading a component file may load another.
_LOAD_LOCK = threading.RLock()


def _package_identity(path: str) -> Optional[Tuple[str, str]]:
    """``(dotted module name, sys.path root)`` of a file inside a package (its directories
    carry ``__init__.py``); None for a standalone file. A name that is not an identifier
    cannot be imported, so it ends the walk."""
    stem = Path(path).stem
    if not stem.isidentifier():
        return None
    directory = os.path.dirname(path)
    parts = [stem]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        name = os.path.basename(directory)
        parent = os.path.dirname(directory)
        if not name.isidentifier() or parent == directory:
            break
        parts.append(name)
        directory = parent
    return (".".join(reversed(parts)), directory) if len(parts) > 1 else None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _load(path: str, name: str, root: str, names: Dict[str, Any]) -> ModuleType:
    """``path`` as module ``name`` with ``root`` appended to ``sys.path`` (kept on success; on
    failure ``sys.modules`` and ``sys.path`` are as they were). The same file again is the
    module already loaded; a name another file took gets a ``_<n>`` suffix."""
    base = name
    with _LOAD_LOCK:
        n = 0
        while (existing := sys.modules.get(name)) is not None:
            if _same_file(getattr(existing, "__file__", None) or "", path):
                return existing
            n += 1
            name = f"{base}_{n}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            from torchx.specs._component_errors import ComponentNotFoundException

            raise ComponentNotFoundException(f"cannot load `{path}` as a Python module")
        module = importlib.util.module_from_spec(spec)
        for key, value in names.items():
            module.__dict__.setdefault(key, value)
        added_root = root not in sys.path
        if added_root:
            sys.path.append(root)
        parent_name, _, leaf = name.rpartition(".")
        parent: Optional[ModuleType] = None
        sys.modules[name] = module
        try:
            if parent_name:
                parent = importlib.import_module(parent_name)
                parent_dir = os.path.dirname(getattr(parent, "__file__", "") or "")
                if parent_dir and not _same_file(parent_dir, os.path.dirname(path)):
                    log.warning(
                        "package `%s` resolves to `%s` (earlier on sys.path), which shadows the "
                        "package of component file `%s`: its sibling imports resolve there",
                        parent_name,
                        parent_dir,
                        path,
                    )
                    parent = None
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            if added_root and root in sys.path:
                sys.path.remove(root)
            raise
        if parent is not None:
            setattr(parent, leaf, module)
        return module


def _synthetic(path: str, source: str, names: Dict[str, Any]) -> ModuleType:
    """A component file that is not on this file system (its source served by a
    ``torchx.file`` entry point) as a module of a name made from its path."""
    absolute = os.path.abspath(path)
    name = (
        "torchx_component_file_"
        + re.sub(r"\W", "_", absolute).strip("_")
        + "_"
        + hashlib.blake2b(absolute.encode(), digest_size=4).hexdigest()
    )
    with _LOAD_LOCK:
        existing = sys.modules.get(name)
        if existing is not None:
            return existing
        module = ModuleType(name)
        module.__dict__.update({k: v for k, v in names.items() if not k.startswith("__")})
        module.__file__ = absolute
        sys.modules[name] = module
        try:
            exec(compile(source, absolute, "exec"), module.__dict__)  # noqa: S102 - the user's component file
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module


def load_component_file(path: str, names: Dict[str, Any], read: Callable[[str], str]) -> ModuleType:
    """The component file ``path`` as a module, TorchX's ``names`` at hand (see the module's
    docstring); ``read`` gives the source of a file this file system does not have."""
    names = {k: v for k, v in names.items() if not k.startswith("__")}
    absolute = os.path.abspath(path)
    if not os.path.isfile(absolute):
        return _synthetic(path, read(path), names)
    identity = _package_identity(absolute)
    if identity:
        name, root = identity
        try:
            return _load(absolute, name, root, names)
        except ModuleNotFoundError as e:
            parent = name.rpartition(".")[0]
            if not (e.name and (parent == e.name or parent.startswith(f"{e.name}."))):
                raise
            # Its package is not importable here: the file loads standalone.
    return _load(absolute, Path(absolute).stem, os.path.dirname(absolute), names)
