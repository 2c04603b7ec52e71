"""The Python package's structure check (the crates' is `crates/torchx/tests/structure.rs`): no
module of ``torchx`` needs itself through a chain of others (every import counts, at module
level, in a function or under ``TYPE_CHECKING``; an import of a package's ``__init__``, a
re-exporting facade, is not followed), none is over 700 lines, no run of more than 7
significant lines stands in two places, and the public modules are the reviewed
``pub_surface.txt``."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

PACKAGE = Path(__file__).resolve().parents[1] / "torchx"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = PACKAGE) -> Dict[str, Set[str]]:
    """Each module of the package with the (non-package) modules of it that it imports."""
    paths = sorted(root.rglob("*.py"))
    modules = {_module_name(p, root) for p in paths}
    packages = {_module_name(p, root) for p in paths if p.name == "__init__.py"}
    graph: Dict[str, Set[str]] = {}
    for path in paths:
        name = _module_name(path, root)
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        needs = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import mod` names a module; `from mod import item` the module.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target not in packages:
                    needs.add(target)
    return graph


def a_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """A cycle of ``graph`` (its modules in order, the first again at the end), if any."""
    done: Set[str] = set()

    def visit(node: str, path: List[str]) -> Optional[List[str]]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, path)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_no_module_needs_itself_through_others() -> None:
    graph = import_graph()
    assert len(graph) > 80, sorted(graph)
    # The scanner sees what is there (so the check can fail).
    assert "torchx.specs.api" in graph["torchx.runner.api"]
    assert "torchx.plugins._resource_tags" in graph["torchx.specs.api"]
    assert a_cycle(graph) is None


def test_the_scanner_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "torchx"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from torchx.sub.a import f\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torchx.sub.a import f\n"
    )
    graph = import_graph(pkg)
    assert graph["torchx.sub.a"] == {"torchx.sub.b"}
    assert a_cycle(graph) == ["torchx.sub.a", "torchx.sub.b", "torchx.sub.a"]


#: Lines a module may hold.
MAX_LINES = 700
#: Significant lines in a run that may stand in two places: more is one piece of code to share.
MAX_REPEATED_LINES = 7


def _modules(root: Path = PACKAGE) -> List[Tuple[str, str]]:
    """Each module's path (relative to the package's parent) and text."""
    return [(str(p.relative_to(root.parent)), p.read_text()) for p in sorted(root.rglob("*.py"))]


def test_no_module_is_over_the_size_limit() -> None:
    over = [f"{rel}: {n}" for rel, text in _modules() if (n := len(text.splitlines())) > MAX_LINES]
    assert not over, f"split these modules: {over}"


def significant(text: str) -> List[Tuple[int, str]]:
    """A module's lines that say something, with their numbers: stripped, neither blank, nor a
    comment, nor an import, nor punctuation alone, nor a function's signature or docstring (the
    package mirrors TorchX's signatures, which its wrappers repeat on purpose)."""
    skipped: Set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            skipped.update(range(node.lineno, first.lineno))
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if i not in skipped]
    return [
        (i, line)
        for i, line in lines
        if line and not line.startswith(("#", "import ", "from ")) and any(c.isalnum() for c in line)
    ]


def repeated_runs(modules: Sequence[Tuple[str, str]]) -> List[str]:
    """Every place where a run of more than ``MAX_REPEATED_LINES`` significant lines stands
    again, as ``a.py:L ~ b.py:M``, one per pair of modules."""
    window = MAX_REPEATED_LINES + 1
    first: Dict[Tuple[str, ...], Tuple[str, int]] = {}
    pairs: Dict[Tuple[str, str], str] = {}
    for rel, text in modules:
        lines = significant(text)
        for k in range(len(lines) - window + 1):
            key = tuple(line for _, line in lines[k : k + window])
            at = lines[k][0]
            if key not in first:
                first[key] = (rel, at)
                continue
            was, was_at = first[key]
            if was == rel and at - was_at < window:
                continue
            pairs.setdefault((was, rel), f"{was}:{was_at} ~ {rel}:{at}")
    return sorted(pairs.values())


def test_no_code_is_written_twice() -> None:
    repeated = repeated_runs(_modules())
    assert not repeated, f"these places repeat more than {MAX_REPEATED_LINES} lines: {repeated}"


def test_the_repeat_finder_sees_a_copied_run_and_not_a_new_one() -> None:
    body = "".join(f"    x{i} = f({i})\n" for i in range(MAX_REPEATED_LINES + 1))
    a = f'def a(\n    p: int,\n) -> None:\n    """Doc."""\n{body}'
    b = f"def b() -> None:\n    # why\n{body}"
    c = f"def c() -> None:\n{body.replace('f(3)', 'g(3)')}"
    assert repeated_runs([("a.py", a), ("b.py", b)]) == ["a.py:5 ~ b.py:3"]
    assert repeated_runs([("a.py", a), ("c.py", c)]) == []
    signature = "def s(\n" + "".join(f"    p{i}: int,\n" for i in range(10)) + ") -> None:\n    pass\n"
    assert repeated_runs([("s.py", signature), ("t.py", signature.replace("def s", "def t"))]) == []


def public_modules(root: Path = PACKAGE) -> List[str]:
    """The package's public modules: no part of the dotted name starts with ``_``."""
    names = (_module_name(p, root) for p in root.rglob("*.py"))
    return sorted(n for n in names if not any(part.startswith("_") for part in n.split(".")))


def test_the_public_modules_are_the_reviewed_ones() -> None:
    """A module made public is a decision seen in review (``TORCHX_BLESS=1`` writes the file
    anew)."""
    surface = "\n".join(public_modules()) + "\n"
    path = Path(__file__).with_name("pub_surface.txt")
    if os.environ.get("TORCHX_BLESS"):
        path.write_text(surface)
    assert "torchx.specs.api" in surface
    assert surface == path.read_text(), "the public modules changed: review them, then TORCHX_BLESS=1"
