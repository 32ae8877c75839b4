"""The seams a backend and a profiler plug into are whole protocols: ``Device``
(``backends/device.py``) and ``Runner`` (``profiling/profiler.py``) declare every member the
harness and the cache use, so nothing in ``src/accelopt`` probes for one with ``getattr`` or
``hasattr``, and every implementation has every member.

The checker reads the sources with ``ast`` (nothing imported for the scan): the members of each
protocol class, then every ``getattr(x, "name", ...)`` / ``hasattr(x, "name")`` with a literal
name. The tests are ``tests/test_protocols.py`` and, for the probes, ``tests/test_layers.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src" / "accelopt"
TESTS = Path(__file__).resolve().parents[1]
# Each protocol whose members must never be probed, by (module, class name).
PROTOCOLS = {
    "Device": ("accelopt.backends.device", "Device"),
    "Runner": ("accelopt.profiling.profiler", "Runner"),
    "ChatModel": ("accelopt.llm.chat", "ChatModel"),
    "Recorder": ("accelopt.llm.recorder", "Recorder"),
}
# What makes a class an implementation of a protocol: it defines all of these itself.
IMPLEMENTS = {
    "Device": ("time_calls", "to_host"),
    "Runner": ("run", "retime"),
    "ChatModel": ("complete",),
    "Recorder": ("record", "find"),
}
# The implementations there are now: a rule that finds none of them is broken, not satisfied.
MIXINS = {"RunsOnly"}  # a fake's parts (``tests/support/runners.py``), not a fake of its own
KNOWN = {
    "Device": {"HostDevice", "KernelHostDevice", "HostedDevice"},
    "Runner": {"LocalRunner", "RayRunner"},
    "ChatModel": {"LLMClient", "NoLLM", "ScriptedChat", "CallTally"},
    "Recorder": {"MemoryRecorder", "JsonlRecorder", "StoreRecorder"},
}
PROBES = ("getattr", "hasattr")


@cache
def trees(root: Path = ROOT) -> tuple[tuple[Path, ast.Module], ...]:
    """Every module below ``root``, parsed once per process (the scans share them)."""
    return tuple((p, ast.parse(p.read_text(), str(p))) for p in sorted(root.rglob("*.py")))


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(
        (isinstance(b, ast.Name) and b.id == "Protocol")
        or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
        for b in node.bases
    )


def class_members(node: ast.ClassDef) -> set[str]:
    """What a class body declares: its methods and properties, its class attributes (assigned
    or only annotated) and what its methods assign to ``self``."""
    found: set[str] = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(item.name)
            found.update(_self_assigned(item))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            found.add(item.target.id)
        elif isinstance(item, ast.Assign):
            found.update(t.id for t in _flat(item.targets) if isinstance(t, ast.Name))
    return {name for name in found if not (name.startswith("__") and name.endswith("__"))}


def _flat(targets: Iterable[ast.expr]) -> Iterator[ast.expr]:
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List):
            yield from _flat(target.elts)
        else:
            yield target


def _self_assigned(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(_flat(node.targets))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
            ):
                names.add(t.attr)
    return names


def protocol_members(root: Path = ROOT) -> dict[str, set[str]]:
    """Each protocol of PROTOCOLS and the member names its class declares."""
    members: dict[str, set[str]] = {}
    for _, tree in trees(root):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in PROTOCOLS and _is_protocol(node):
                members[node.name] = class_members(node)
    return members


def probes(tree: ast.AST, names: set[str], where: str = "<source>") -> list[str]:
    """Every ``getattr``/``hasattr`` in ``tree`` whose attribute name is a literal in ``names``."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in PROBES or len(node.args) < 2:
            continue
        name = node.args[1]
        if isinstance(name, ast.Constant) and name.value in names:
            found.append(f'{where}:{node.lineno}: {node.func.id}(..., "{name.value}")')
    return found


def implementations(*roots: Path) -> dict[str, dict[str, set[str]]]:
    """By protocol, each class under ``roots`` that implements it (it has every name of
    IMPLEMENTS, its own or a base's): ``file:class`` and its members, its own and those of its
    bases found under ``roots`` (by name)."""
    classes: list[tuple[str, ast.ClassDef]] = []
    for root in roots or (ROOT,):
        for path, tree in trees(root):
            where = str(path.relative_to(ROOT.parents[1]))
            classes += [(where, n) for n in ast.walk(tree)
                        if isinstance(n, ast.ClassDef) and not _is_protocol(n)]  # fmt: skip
    by_name = {node.name: node for _, node in classes}

    def members(node: ast.ClassDef, seen: frozenset[str] = frozenset()) -> set[str]:
        own = class_members(node)
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in by_name and base.id not in seen:
                own |= members(by_name[base.id], seen | {node.name})
        return own

    found: dict[str, dict[str, set[str]]] = {p: {} for p in PROTOCOLS}
    for where, node in classes:
        every = members(node)
        for protocol, marks in IMPLEMENTS.items():
            if all(m in every for m in marks):
                found[protocol][f"{where}:{node.name}"] = every
    return found


def missing_members(found: dict[str, dict[str, set[str]]]) -> list[str]:
    members = protocol_members()
    return [
        f"{name} lacks {sorted(members[protocol] - own)}"
        for protocol, classes in found.items()
        for name, own in classes.items()
        if members[protocol] - own
    ]


# -- the rules ----------------------------------------------------------------------------------
