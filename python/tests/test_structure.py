"""The Python package's structure check (the crates' is `crates/torchx/tests/structure.rs`): no
module of ``torchx`` needs itself through a chain of others. Every import counts, at module
level, in a function or under ``TYPE_CHECKING``; an import of a package's ``__init__`` (a
re-exporting facade) is not followed."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

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
