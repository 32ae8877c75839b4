"""The search's modules import one another without a cycle, counting every import, those under
``if TYPE_CHECKING:`` too: a part (``Measurer``, ``Tuner``, ``Generation``, a strategy) is given
what it needs, and never reaches back for the ``Optimizer`` that holds it.

The graph is read with ``ast`` (nothing is imported), as ``tests/test_layers.py`` reads the
packages': an edge for each ``import accelopt.search.x`` or ``from accelopt.search.x import y``
(and ``accelopt.search.x.y`` where that is a module), and for ``from accelopt.search import x``.
"""

from __future__ import annotations

import ast
from pathlib import Path

SEARCH = Path(__file__).resolve().parents[2] / "src" / "accelopt" / "search"
PACKAGE = "accelopt.search"


def module_name(path: Path) -> str:
    parts = path.relative_to(SEARCH).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SEARCH.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> set[str]:
    """The search modules ``path`` imports, wherever the import is written."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in known:
                found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names} & known
    return found


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` (its modules in order, the first again at the end), or []."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def search_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports(path, known) - {name} for name, path in found.items()}


def test_the_search_modules_import_one_another_without_a_cycle():
    assert cycle(search_graph()) == []


def test_the_checker_finds_a_cycle_and_reads_the_modules_that_hold_the_parts():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []
    graph = search_graph()
    assert f"{PACKAGE}.measuring" in graph[f"{PACKAGE}.tuner"]
    assert f"{PACKAGE}.tuner" in graph[f"{PACKAGE}.loop"]
    assert f"{PACKAGE}.strategies.base" in graph[f"{PACKAGE}.strategies.beam"]
    assert f"{PACKAGE}.strategies" in graph[f"{PACKAGE}.config"]
