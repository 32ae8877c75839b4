"""Finds code that names a backend instead of reading its record (``backends/registry.py``).

A backend's identity lives in its registry record; code outside ``backends/`` and ``cli/`` reads
the record's fields. This scan reads every module with ``ast`` and reports the places that decide
something by a backend's name written as a literal:

- a comparison of something that holds a backend (its text says ``backend`` or ``kind``) with
  it (``kernel.backend == "cpu"``, ``kind in ("numpy", "torch")``);
- a table keyed by backends (a dict literal with two backend names or more as keys);
- a backend named as a default or an argument: a ``backend`` parameter's default, a ``backend``
  field's default, ``backend=...`` in a call, or a call of a lookup by backend (``get_backend``,
  ``Kernel``, ``hardware_for``...).

A string that only happens to read like a backend's name (a workload called "cpu", the module
``torch``, a torch device) is not one of these, and is not reported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

EXEMPT = ("backends", "cli")  # a backend's own code; the command line wires backends' features
HOLDERS = ("backend", "kind")  # words in the name of what holds a backend's name
LOOKUPS = frozenset(
    {"Kernel", "get_backend", "backend_class", "record", "known", "shipped_kernel", "hardware_for"}
)


@dataclass(frozen=True)
class Named:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _literal_names(node: ast.AST | None, names: frozenset[str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.Set | ast.List):
        return [n for e in node.elts for n in _literal_names(e, names)]
    return []


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _defaults(args: ast.arguments) -> Iterator[tuple[ast.arg, ast.expr | None]]:
    positional = [*args.posonlyargs, *args.args]
    padded: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    yield from zip(positional, [*padded, *args.defaults], strict=True)
    yield from zip(args.kwonlyargs, args.kw_defaults, strict=True)


def _offences(node: ast.AST, names: frozenset[str]) -> Iterator[str]:
    if isinstance(node, ast.Compare):
        sides = (node.left, *node.comparators)
        if any(word in ast.unparse(side) for side in sides for word in HOLDERS):
            for side in sides:
                yield from (f"compares with {n!r}" for n in _literal_names(side, names))
    elif isinstance(node, ast.Dict):
        keyed = [n for k in node.keys for n in _literal_names(k, names)]
        if len(keyed) >= 2:
            yield f"a table keyed by backends ({', '.join(keyed)})"
    elif isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "backend":
                yield from (f"backend={n!r}" for n in _literal_names(kw.value, names))
        if _callee(node) in LOOKUPS:
            for arg in node.args:
                yield from (f"{_callee(node)}(... {n!r} ...)" for n in _literal_names(arg, names))
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        for arg, default in _defaults(node.args):
            if arg.arg == "backend":
                yield from (f"backend defaults to {n!r}" for n in _literal_names(default, names))
    elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "backend":
        yield from (f"backend field defaults to {n!r}" for n in _literal_names(node.value, names))


def scan(source: str, path: str, names: frozenset[str]) -> list[Named]:
    """The places in ``source`` that name one of ``names`` as a backend."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for what in _offences(node, names):
            found.append(Named(path, getattr(node, "lineno", 0), what))
    return sorted(found, key=lambda n: n.line)


def scan_tree(root: Path, names: frozenset[str], exempt: Iterable[str] = EXEMPT) -> list[Named]:
    """``scan`` over every module below ``root`` (a package folder) but those of ``exempt``."""
    skipped = tuple(exempt)
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in skipped:
            continue
        found += scan(path.read_text(encoding="utf-8"), str(relative), names)
    return found
