"""A problem's reference as a module of its own: what an export verifies new sizes against.

A suite or workspace problem's ``problem.py`` defines its reference in NumPy and builds the
``Problem`` record with accelopt's classes. ``standalone_reference`` keeps the file without
accelopt: its imports of accelopt and the top-level statements that use what they imported are
dropped, and ``reference`` is bound to the problem's reference function. The result is checked
against the problem's own reference on a small workload before it is exported; a problem whose
reference cannot stand alone (an imported one, whose reference is a PyTorch model run by
accelopt) gets none, and its export says so.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np

from accelopt.problems.records import Problem

CHECK_ELEMENTS = 1 << 20  # the check runs on the smallest workload, when it is at most this big
HEADER = "# The reference of problem {name}, without accelopt (from its problem.py).\n\n"


def standalone_reference(problem: Problem) -> str | None:
    """The text of a ``reference.py`` that needs only NumPy (and what problem.py imports
    besides accelopt), or None when the problem's reference cannot stand alone."""
    path = problem.directory / "problem.py"
    if (problem.directory / "import.json").exists() or not path.is_file():
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return None
    text = _strip_accelopt(tree, problem.reference.__name__)
    if text is None:
        return None
    text = HEADER.format(name=problem.name) + text
    return text if _agrees(problem, text) else None


def _strip_accelopt(tree: ast.Module, function: str) -> str | None:
    dropped: set[str] = set()
    kept: list[ast.stmt] = []
    for node in tree.body:
        if _imports_accelopt(node):
            dropped.update(a.asname or a.name.split(".")[0] for a in node.names)  # type: ignore[attr-defined]
            continue
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            if any(_imports_accelopt(n) for n in ast.walk(node)):
                return None
            kept.append(node)
            continue
        if dropped & _names(node):
            continue
        kept.append(node)
    if not any(isinstance(n, ast.FunctionDef) and n.name == function for n in kept):
        return None
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in kept):
        # annotations naming what was dropped (Arrays, Sizes) stay unevaluated strings
        kept.insert(_after_docstring(kept), ast.parse("from __future__ import annotations").body[0])
    body = ast.unparse(ast.Module(body=kept, type_ignores=[]))
    if function != "reference":
        body += f"\n\nreference = {function}\n"
    return body + "\n"


def _imports_accelopt(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "accelopt" and node.level == 0
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "accelopt" for a in node.names)
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _after_docstring(body: list[ast.stmt]) -> int:
    first = body[0] if body else None
    is_doc = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    return 1 if is_doc else 0


def _agrees(problem: Problem, text: str) -> bool:
    """Whether the standalone text loads and gives the problem's reference's outputs on the
    smallest workload's inputs (when that is small enough to check quickly)."""
    sizes = min(
        (w.sizes for w in problem.workloads.values()),
        key=lambda s: sum(np.prod(t.dims(s)) for t in problem.inputs),
    )
    name = "_accelopt_standalone_" + hashlib.sha256(text.encode()).hexdigest()[:12]
    try:
        module = _load_text(text, name, problem.directory)
        if sum(np.prod(t.dims(sizes)) for t in problem.inputs) > CHECK_ELEMENTS:
            return callable(getattr(module, "reference", None))  # loads: nothing small to call
        arrays = [a.astype(np.float64) for a in problem.generate(sizes, seed=1)]
        got = module.reference(*arrays)
        want = problem.reference(*arrays)
        return all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    except Exception:  # a reference that cannot stand alone is not exported; never a crash
        return False
    finally:
        sys.modules.pop(name, None)


def _load_text(text: str, name: str, directory: Path) -> object:
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(directory / "reference.py")
    sys.modules[name] = module
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module
