"""The modules of `codemodekit` import each other as a tree of stages: no circle, of any length.

Every import counts, wherever it stands (module level, `TYPE_CHECKING`, inside a function):
a circle through a deferred import is still a design circle, only hidden from Python.
Importing `a.b.c` runs the `__init__` of `a.b` too, so that package is a target as well, except
for a module's own packages (they are always imported before it). The top-level
`codemodekit/__init__.py` is the public face that names everything and is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import codemodekit

PACKAGE_ROOT = Path(codemodekit.__file__).parent


def _module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _targets(imported: str, modules: dict[str, Path]) -> set[str]:
    """The modules an import of `imported` runs: it and every package above it, the root aside."""
    parts = imported.split(".")
    found = {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
    return {name for name in found if name in modules}


def _import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name == "codemodekit":
            continue
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    edges |= _targets(alias.name, modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                edges |= _targets(source, modules)
                for alias in node.names:
                    edges |= _targets(f"{source}.{alias.name}", modules)
        own_packages = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = edges - own_packages - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_graph_is_read_from_the_real_package() -> None:
    graph = _import_graph()
    assert "codemodekit.bridge.bridge" in graph["codemodekit.run"]
    assert "codemodekit.compiler.compile" in graph["codemodekit.sandbox._worker"]
    assert len(graph) > 100


def test_a_planted_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_import_circle_among_codemodekit_modules() -> None:
    circles = _circles(_import_graph())
    assert circles == [], "import circles (break each at its cause): " + "; ".join(
        " ↔ ".join(component) for component in circles
    )
