"""Imports point down only, and never in a circle.

The checker reads every module under ``src/accelopt`` with ``ast`` (nothing is imported), builds
the graph of imports between accelopt modules and asserts:

- no cycle: no strongly connected component of more than one module (a package's ``__init__``
  that imports its submodules while one of them imports the ``__init__`` is a cycle too);
- every import from one top-level package into another goes down ``LAYERS``;
- nothing generic imports one backend's modules (``backends/cpu/``, ``triton/``, ``numpy/``): the
  other packages reach a backend through the registry (``backends.base.get_backend``); only the
  command line, at the top, wires a backend's own features (``bench``'s numpy column, say).
- inside profiling, the worker imports only its own folder, the config and the statistics of
  profiling's top, and nothing reaches into the worker past its protocol (``worker/protocol.py``);
- no module is over 400 lines and no function over 60 (the suite's kernels aside).
- no code outside ``backends/`` and ``cli/`` decides by a backend's name written as a literal: it
  reads the backend's registry record (``support/backend_names.py`` says what counts);
- nothing probes a member of the ``Device``, ``Runner``, ``ChatModel`` or ``Recorder`` protocol with
  ``getattr``/``hasattr``:
  the protocols declare every member their users use (``support/protocol_scan.py``).

An import counts wherever it is written (a function-level import too) except under
``if TYPE_CHECKING:``, which never runs. ``from accelopt.a import b`` imports ``accelopt.a`` (its
``__init__`` runs and ``b`` is read from its namespace) and, when ``accelopt.a.b`` is a module,
that module too: a submodule that imports a sibling this way depends on its package's
``__init__``, which often imports the submodule back. ``import accelopt.a.b`` and
``from accelopt.a.b import c`` import ``accelopt.a.b`` only: the parent packages Python
initialises on the way are not counted, or every submodule would import its package.

Run this file alone to see the offences: each failure lists them as ``file:line: module ->
module``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "src" / "accelopt"
PACKAGE = "accelopt"

# Bottom to top; the packages of one tuple are peers at one level. A module may import from its
# own top-level package and from the levels below it, never from a peer or a level above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "formatting", "templating"),  # leaves: they import nothing of accelopt
    ("settings",),  # reads the environment; its errors are UserErrors
    ("llm", "memory", "problems"),
    ("redaction",),  # finds the API keys the LLM config names (llm.config)
    ("hardware",),
    ("backends",),
    ("profiling",),
    ("store",),
    ("interop",),  # other tools' formats for problems, kernels and evaluations (FlashInfer Trace)
    ("export",),  # a kernel that passed as a library (its runtime.py imports nothing of accelopt)
    ("agents",),
    ("search",),
    ("reports",),
    ("views",),  # what the front ends above show and look up alike (JSON of problems and runs)
    ("model",),  # a user's nn.Module with accelopt's kernels: the torch.compile backend
    ("serve", "mcp_server"),
    ("cli",),
    ("testing",),  # test doubles (a scripted LLM server and chat model): nothing imports them
)
# Modules that may import anything: the package root and ``python -m accelopt``. Any module may
# import the root (``from accelopt import settings``, ``__version__``): Python runs it first anyway.
UNLAYERED = frozenset({PACKAGE, f"{PACKAGE}.__main__"})


@dataclass(frozen=True, order=True)
class Edge:
    """One import: ``source`` imports ``target``, written at ``path``:``line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} -> {self.target}"


# --- reading the sources ------------------------------------------------------------------------


def module_name(path: Path, root: Path = ROOT, package: str = PACKAGE) -> str:
    """``<root>/a/b.py`` -> ``accelopt.a.b``; ``<root>/a/__init__.py`` -> ``accelopt.a``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterable[tuple[str, int]]:
    """Each (dotted name, line) the module imports, relative imports resolved: a
    ``from X import a, b`` gives ``X`` and ``X.a``, ``X.b`` (resolved to modules by ``resolve``)."""
    # The package a relative import starts from: the module itself for an __init__.
    here = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST) -> Iterable[tuple[str, int]]:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the `else:` of `if TYPE_CHECKING:` does run
                yield from visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            yield base, node.lineno
            for alias in node.names:
                if alias.name != "*":
                    yield f"{base}.{alias.name}", node.lineno
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(tree)


def resolve(name: str, modules: frozenset[str]) -> str | None:
    """The accelopt module a dotted name lands in (the longest prefix that is a module), or None
    for a name outside the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def read_graph(
    root: Path = ROOT, package: str = PACKAGE, shown_from: Path | None = None
) -> list[Edge]:
    """Every import between the modules under ``root``, with where it is written (the path
    relative to ``shown_from``, by default the folder that holds ``root``)."""
    shown_from = shown_from or root.parent
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    modules = frozenset(module_name(p, root, package) for p in files)
    edges: set[Edge] = set()
    for path in files:
        source = module_name(path, root, package)
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, line in _imported_names(tree, source, path.name == "__init__.py"):
            target = resolve(name, modules)
            if target is not None and target != source:
                edges.add(Edge(source, target, str(path.relative_to(shown_from)), line))
    return sorted(edges)


# --- the two rules --------------------------------------------------------------------------------


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
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
                        found.append(sorted(component))
    return sorted(found)


def cycle_edges(edges: Sequence[Edge], components: Iterable[Sequence[str]]) -> list[Edge]:
    """The edges inside the cycles' components: the imports to break."""
    member = {m: i for i, component in enumerate(components) for m in component}
    return [
        e
        for e in edges
        if e.source in member and e.target in member and member[e.source] == member[e.target]
    ]


def top_package(module: str) -> str:
    """``accelopt.a.b`` -> ``a``; the root package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(
    edges: Iterable[Edge],
    layers: Sequence[Sequence[str]] = LAYERS,
    unlayered: frozenset[str] = UNLAYERED,
) -> list[Edge]:
    """The imports between top-level packages that do not go strictly down ``layers`` (an
    import of a peer, of a level above, or of a package the list does not name). The modules of
    ``unlayered`` may import anything, and anything may import the root package."""
    level: Mapping[str, int] = {pkg: i for i, peers in enumerate(layers) for pkg in peers}
    bad = []
    for e in edges:
        if e.source in unlayered or "." not in e.target:
            continue
        src, dst = top_package(e.source), top_package(e.target)
        if src == dst:
            continue
        if src not in level or dst not in level or level[dst] >= level[src]:
            bad.append(e)
    return bad


def backend_packages(root: Path = ROOT, package: str = PACKAGE) -> frozenset[str]:
    """The backends' own packages: ``accelopt.backends.cpu``, ``...triton``, ``...numpy``."""
    return frozenset(
        f"{package}.backends.{p.name}"
        for p in (root / "backends").iterdir()
        if (p / "__init__.py").is_file()
    )


def backend_specific_imports(
    edges: Iterable[Edge], backends: Iterable[str], allowed: Sequence[str] = ("cli",)
) -> list[Edge]:
    """The imports of one backend's modules from outside that backend (the top-level packages
    of ``allowed`` aside)."""

    def inside(module: str, pkg: str) -> bool:
        return module == pkg or module.startswith(pkg + ".")

    return [
        e
        for e in edges
        for pkg in backends
        if inside(e.target, pkg)
        and not inside(e.source, pkg)
        and top_package(e.source) not in allowed
    ]


# --- inside profiling: parent/, worker/, cluster/ and what they share at its top -----------------

PROFILING = f"{PACKAGE}.profiling"
# What a worker process may import from profiling's top: the package, the config, the pure
# statistics and the kernel measurement it reports (a record of plain fields). Not evaluation.py
# (the parent's verdict), session.py or the profilers: the worker's side of the process boundary
# knows the protocol and nothing of the parent's.
WORKER_MAY_IMPORT = frozenset(
    {PROFILING, f"{PROFILING}.config", f"{PROFILING}.stats", f"{PROFILING}.measurement"}
)


def profiling_part(module: str) -> str | None:
    """``worker``, ``parent`` or ``cluster`` for a module of those folders, ``top`` for the rest of
    profiling, None outside it."""
    if module != PROFILING and not module.startswith(PROFILING + "."):
        return None
    first = module[len(PROFILING) + 1 :].split(".")[0]
    return first if first in ("worker", "parent", "cluster") else "top"


def profiling_violations(edges: Iterable[Edge]) -> list[Edge]:
    """Imports inside profiling that point the wrong way: the worker importing anything of
    profiling but its own folder, the protocol's config and the statistics; anything else
    reaching into the worker past its protocol."""
    bad = []
    for e in edges:
        source, target = profiling_part(e.source), profiling_part(e.target)
        if source is None or target is None or source == target:
            continue
        if source == "worker":
            if e.target not in WORKER_MAY_IMPORT:
                bad.append(e)
        elif target == "worker" and e.target != f"{PROFILING}.worker.protocol":
            bad.append(e)
    return bad


# --- sizes: rooms of one size ---------------------------------------------------------------------

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Kernels are exempt: the suite's Triton kernels (problems/suite/*/*.py, beside its C kernels,
# which this check does not read).


def sizes(root: Path = ROOT) -> tuple[dict[str, int], dict[str, int]]:
    """The lines of each module over MAX_MODULE_LINES and of each function over
    MAX_FUNCTION_LINES (``path:name``), paths relative to ``root``, kernels left out."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        if "__pycache__" in path.parts or where.startswith("problems/suite/"):
            continue
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            modules[where] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    functions[f"{where}:{node.name}"] = length
    return modules, functions


def report(title: str, edges: Iterable[Edge]) -> str:
    return "\n".join([title, *(f"  {e}" for e in edges)])


# --- the checker on a tiny graph, so that it can be seen to fail ----------------------------------


def _write(root: Path, files: Mapping[str, str]) -> Path:
    pkg = root / "pkg"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_checker_finds_a_package_init_cycle(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "from pkg.low.a import f\n",
            "low/a.py": "def f():\n    from pkg.low import g\n",
            "low/b.py": "from . import a\nfrom .a import f\n",
        },
    )
    edges = read_graph(pkg, "pkg")
    assert cycles(edges) == [["pkg.low", "pkg.low.a"]]
    assert [str(e) for e in cycle_edges(edges, cycles(edges))] == [
        "pkg/low/__init__.py:1: pkg.low -> pkg.low.a",
        "pkg/low/a.py:2: pkg.low.a -> pkg.low",
    ]
    assert ("pkg.low.b", "pkg.low.a") in {(e.source, e.target) for e in edges}


def test_checker_skips_type_checking_and_resolves_relative_imports(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": (
                "from typing import TYPE_CHECKING\n"
                "import typing\n"
                "if TYPE_CHECKING:\n    from pkg.high import x\n"
                "if typing.TYPE_CHECKING:\n    from ..high import y\n"
                "else:\n    from ..high.deep import z\n"
            ),
            "high/__init__.py": "",
            "high/deep.py": "from ..low import a\n",
        },
    )
    edges = read_graph(pkg, "pkg")
    assert [(e.source, e.target, e.line) for e in edges] == [
        ("pkg.high.deep", "pkg.low", 1),
        ("pkg.high.deep", "pkg.low.a", 1),
        ("pkg.low.a", "pkg.high.deep", 8),
    ]
    assert cycles(edges) == [["pkg.high.deep", "pkg.low.a"]]


def test_checker_finds_imports_that_point_up_or_sideways(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "from pkg.top import main\n",
            "__main__.py": "import pkg.top\n",
            "base.py": "",
            "peer1.py": "import pkg.peer2\n",
            "peer2.py": "import pkg.base\n",
            "top/__init__.py": "def main():\n    import pkg.base\n",
            "top/x.py": "import pkg.peer1\n",
            "stray.py": "import pkg.base\n",
        },
    )
    edges = read_graph(pkg, "pkg")
    layers = (("base",), ("peer1", "peer2"), ("top",))
    bad = layer_violations(edges, layers, frozenset({"pkg", "pkg.__main__"}))
    assert [(e.source, e.target) for e in bad] == [
        ("pkg.peer1", "pkg.peer2"),  # a peer
        ("pkg.stray", "pkg.base"),  # a package the list does not name
    ]
    assert not cycles(edges)
    # The function-level import counts: pointing it up is caught.
    (pkg / "base.py").write_text("def f():\n    import pkg.top.x\n")
    bad = layer_violations(read_graph(pkg, "pkg"), layers, frozenset({"pkg", "pkg.__main__"}))
    assert ("pkg.base", "pkg.top.x", 2) in {(e.source, e.target, e.line) for e in bad}


def test_checker_finds_generic_code_importing_one_backend(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "backends/__init__.py": "",
            "backends/base.py": "TABLE = {'cpu': 'pkg.backends.cpu.backend:Cpu'}\n",
            "backends/cpu/__init__.py": "",
            "backends/cpu/backend.py": "from pkg.backends.base import TABLE\n",
            "backends/cpu/compiler.py": "from . import backend\n",
            "profiling.py": "from pkg.backends import base\nimport pkg.backends.cpu.compiler\n",
            "cli.py": "from pkg.backends.cpu.compiler import f\n",
        },
    )
    backends = backend_packages(pkg, "pkg")
    assert backends == {"pkg.backends.cpu"}
    bad = backend_specific_imports(read_graph(pkg, "pkg"), backends)
    assert [str(e) for e in bad] == [
        "pkg/profiling.py:2: pkg.profiling -> pkg.backends.cpu.compiler"
    ]


# --- the rules on accelopt ------------------------------------------------------------------------


def test_every_package_is_in_the_layer_list() -> None:
    named = {pkg for peers in LAYERS for pkg in peers}
    present = {
        p.stem if p.is_file() else p.name
        for p in ROOT.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.stem != "__pycache__"
    } - {"__init__", "__main__"}
    assert present <= named, f"packages missing from LAYERS: {sorted(present - named)}"


def test_no_import_cycles() -> None:
    edges = read_graph(shown_from=REPO)
    components = cycles(edges)
    assert not components, report(
        "import cycles (each component, then the imports inside it):\n"
        + "\n".join("  " + " <-> ".join(c) for c in components),
        cycle_edges(edges, components),
    )


def test_imports_point_down_the_layers() -> None:
    bad = layer_violations(read_graph(shown_from=REPO))
    assert not bad, report(
        "imports that do not point down " + " -> ".join("/".join(p) for p in LAYERS) + ":", bad
    )


def test_nothing_generic_imports_one_backend() -> None:
    bad = backend_specific_imports(read_graph(shown_from=REPO), backend_packages())
    assert not bad, report(
        "imports of one backend's modules from outside it (use backends.base.get_backend):", bad
    )


def test_the_arrows_inside_profiling() -> None:
    bad = profiling_violations(read_graph(shown_from=REPO))
    assert not bad, report(
        "imports inside profiling that point the wrong way (the worker knows the protocol, the "
        "config and stats.py of profiling; the rest reaches the worker through its protocol):",
        bad,
    )


def test_checker_finds_the_wrong_arrows_inside_profiling() -> None:
    p = PROFILING
    edges = [
        Edge(f"{p}.worker.harness", f"{p}.stats", "h.py", 1),  # allowed
        Edge(f"{p}.worker.retime", f"{p}.session", "r.py", 2),  # the worker into records
        Edge(f"{p}.session", f"{p}.worker.timing", "s.py", 3),  # the top into the worker
        Edge(f"{p}.parent.pool", f"{p}.worker.protocol", "p.py", 4),  # allowed
        Edge(f"{p}.parent.pool", f"{p}.worker.serve", "p.py", 5),  # past the protocol
        Edge(f"{p}.parent.evaluator", f"{p}.worker.sandbox", "e.py", 6),  # past the protocol
        Edge(f"{p}.cluster.fleet", f"{p}.worker", "f.py", 7),  # the worker's package itself
    ]
    assert [e.line for e in profiling_violations(edges)] == [2, 3, 5, 6, 7]


def test_no_module_or_function_is_over_its_size() -> None:
    modules, functions = sizes()
    bad = [f"{name}: {n} lines" for name, n in sorted({**modules, **functions}.items())]
    assert not bad, (
        f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function (split it "
        "along what it does):\n" + "\n".join(bad)
    )


def test_the_size_checker_finds_a_long_module_and_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    padding = "\n" * MAX_MODULE_LINES
    root = _write(tmp_path, {"a.py": f"def f():\n{body}\n{padding}", "b.py": "y = 1\n"})
    modules, functions = sizes(root)
    assert list(modules) == ["a.py"] and functions == {"a.py:f": MAX_FUNCTION_LINES + 1}


def test_no_code_outside_backends_and_cli_names_a_backend() -> None:
    """A backend's identity lives in its registry record (``backends/registry.py``); the rest of
    the tree reads the record instead of deciding by a backend's name (``support/backend_names``
    says which uses of a name count)."""
    from backend_names import scan_tree

    from accelopt.backends import registry

    found = scan_tree(ROOT, frozenset(registry.names()))
    assert not found, "read the backend's record instead:\n" + "\n".join(map(str, found))


def test_the_backend_name_scan_finds_each_way_of_naming_one() -> None:
    from backend_names import scan

    source = """
def f(kernel, backend="cpu"):
    if kernel.backend == "triton" or kind in ("numpy", "torch"):
        return get_backend("cpu"), Kernel(src, "cpu"), g(backend="triton")
    table = {"cpu": ".c", "triton": ".py"}
    spec.device.type != "cpu"; "torch" in problem.requires; {"cpu": workload}
class R:
    backend: str = "cpu"
"""
    found = scan(source, "m.py", frozenset({"cpu", "triton", "numpy", "torch"}))
    assert [(n.line, n.what) for n in found] == [
        (2, "backend defaults to 'cpu'"),
        (3, "compares with 'triton'"),
        (3, "compares with 'numpy'"),
        (3, "compares with 'torch'"),
        (4, "get_backend(... 'cpu' ...)"),
        (4, "Kernel(... 'cpu' ...)"),
        (4, "backend='triton'"),
        (5, "a table keyed by backends (cpu, triton)"),
        (8, "backend field defaults to 'cpu'"),
    ]


def test_no_module_probes_a_protocol_member() -> None:
    """``Device`` and ``Runner`` declare every member the harness and the cache use
    (``support/protocol_scan.py``): code uses them, it does not probe for them."""
    from protocol_scan import ROOT as SRC
    from protocol_scan import probes, protocol_members, trees

    names = set().union(*protocol_members().values())
    offences = [
        line
        for path, tree in trees()
        for line in probes(tree, names, str(path.relative_to(SRC.parents[1])))
    ]
    assert not offences, "probes of protocol members (declare and use them):\n" + "\n".join(
        offences
    )


def test_the_probe_scan_catches_a_probe() -> None:
    from protocol_scan import probes

    source = (
        "def f(device, runner, recorder):\n"
        "    pids = getattr(device, 'kernel_pids', ())\n"
        "    if hasattr(runner, 'race'):\n"
        "        pass\n"
        "    return getattr(recorder, 'hold', None), getattr(device, name)\n"
    )
    found = probes(ast.parse(source), {"kernel_pids", "race"})
    assert found == ['<source>:2: getattr(..., "kernel_pids")', '<source>:3: hasattr(..., "race")']


if __name__ == "__main__":  # python tests/test_layers.py: every offence, without pytest
    graph = read_graph(shown_from=REPO)
    found = cycles(graph)
    print(report("import cycles:", cycle_edges(graph, found)))
    print(report("imports that do not point down the layers:", layer_violations(graph)))
    print(report("imports inside profiling that point the wrong way:", profiling_violations(graph)))
    print(
        report(
            "imports of one backend's modules from outside it:",
            backend_specific_imports(graph, backend_packages()),
        )
    )
