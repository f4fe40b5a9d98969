"""The package's import graph: no module imports itself back, however indirectly.

Every import counts, those under ``TYPE_CHECKING`` and inside functions too (grimp reads them
all). The layering contract (``lint-imports`` in .ci/run) keeps layers from importing
upward; this keeps modules inside one layer from importing each other in a circle.
"""

from __future__ import annotations

import grimp


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import cycles: groups of modules each reachable from the others (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def test_the_package_has_no_import_cycle() -> None:
    graph = grimp.build_graph("longcall", include_external_packages=False)
    assert len(graph.modules) > 50, "the graph should hold the whole package"
    assert strongly_connected(graph) == []


def test_a_cycle_would_be_found() -> None:
    """The check itself: two modules importing each other make one group."""
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert strongly_connected(graph) == [["pkg.a", "pkg.b"]]
