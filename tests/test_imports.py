"""No import circle in the package: every import of every module of specverify, read statically.

Each module's file is parsed with ``ast`` and every import in it (at module level, in functions and
under ``TYPE_CHECKING`` alike: a late import only hides a circle) is resolved to the modules of the
package it names; ``from . import name`` counts the submodule ``name`` when there is one, else the
package.  A package's ``__init__`` is a module like any other.  The test fails on any strongly
connected component of more than one module (or a module importing itself), naming a cycle in it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import specverify

PACKAGE = Path(specverify.__file__).parent


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (``specverify.checks`` for its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name ``from ... import`` reads from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The package module ``name`` is, or lies in (``specverify._run.Run`` -> ``specverify._run``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, path, node)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            for target in targets:
                owner = _owner(target, modules)
                if owner is not None and owner != module:
                    graph[module].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle from each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, as the path of imports."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return paths[node] + [start]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    raise AssertionError(f"{sorted(component)} is no cycle")


def test_the_graph_sees_relative_and_late_imports() -> None:
    graph = import_graph()
    assert "specverify._record.result" in graph["specverify._run._driver"]  # a relative import at module level
    assert "specverify.checks" in graph["specverify._pytest"] or "specverify._run" in graph["specverify._pytest"]


def test_the_cycle_finder_names_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle() -> None:
    found = cycles(import_graph())
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen - {start}


def test_the_layers_point_one_way():
    graph = import_graph()
    run_layer = {m for m in graph if m == "specverify._run" or m.startswith("specverify._run.")}
    for module in graph:  # the checks hold checks only: no plan, no Run, no driver
        if module == "specverify.checks" or module.startswith("specverify.checks."):
            assert not graph[module] & run_layer, f"{module} imports the run layer: {sorted(graph[module] & run_layer)}"
    # the record is pure: reading a result needs no check, no plan, no run layer
    below = _reach(graph, "specverify._record.result")
    assert not {m for m in below if m.startswith("specverify.checks")} | (below & run_layer), sorted(below)
    # and the record's package (_record/) stands alone: it imports nothing else of the package
    record = {m for m in graph if m == "specverify._record" or m.startswith("specverify._record.")}
    assert {t for m in record for t in graph[m]} <= record, sorted({t for m in record for t in graph[m]} - record)


def _subpackages() -> set[str]:
    """The package's subpackages (``specverify._kinds``: a folder with an ``__init__``)."""
    return {name for name, path in _modules().items() if path.name == "__init__.py" and name.count(".") == 1}


def package_graph(graph: dict[str, set[str]]) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    """The import graph with each subpackage one node (a top-level module stays its own node), and
    for each edge the module imports it stands for."""
    subpackages = _subpackages()

    def node(module: str) -> str:
        top = ".".join(module.split(".")[:2])
        return top if top in subpackages else module

    packages: dict[str, set[str]] = {}
    why: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(node(module), set())
        for target in targets:
            a, b = node(module), node(target)
            if a != b:
                packages[a].add(b)
                why.setdefault((a, b), []).append(f"{module} -> {target}")
    return packages, why


def two_way_ties(packages: dict[str, set[str]], among: set[str]) -> list[tuple[str, str]]:
    """Pairs of ``among`` that import each other."""
    return sorted(
        (a, b) for a in among for b in packages.get(a, set()) & among if a < b and a in packages.get(b, set())
    )


#: The layers a sampler's calls go through: the kinds (what differs by kind), the calling layer (the
#: sampler under test) and the worker (the sampler's process); each depends one way only.
SEAM = {"specverify._kinds", "specverify._calling", "specverify._worker"}


def test_the_package_check_sees_a_tie() -> None:
    graph = {"p._kinds.chain": {"p._worker.wire"}, "p._worker.wire": set(), "p._worker.serving": {"p._kinds"}}
    graph["p._kinds"] = set()
    nodes = {m: ".".join(m.split(".")[:2]) for m in graph}
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(nodes[module], set()).update(nodes[t] for t in targets if nodes[t] != nodes[module])
    assert two_way_ties(packages, {"p._kinds", "p._worker"}) == [("p._kinds", "p._worker")]
    assert cycles(packages) == [["p._kinds", "p._worker", "p._kinds"]]


def test_no_two_way_tie_between_subpackages() -> None:
    """No two subpackages import each other (``_kinds`` and ``_worker``, ``_calling`` and ``_worker``
    did: the seam depended on the wire); and no circle of packages passes through the kinds, the
    calling layer or the worker."""
    packages, why = package_graph(import_graph())
    ties = two_way_ties(packages, _subpackages())
    assert not ties, "; ".join(f"{a} <-> {b}: {why[(a, b)][0]}, {why[(b, a)][0]}" for a, b in ties)
    circled = sorted(p for p in SEAM if any(q == p or p in _reach(packages, q) for q in packages[p]))
    assert not circled, f"on a circle of package imports: {circled}; circles: {cycles(packages)}"
