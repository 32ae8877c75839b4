"""``settings.py`` is the only reader of the environment, and nothing writes it.

Every module of ``src/accelopt`` is parsed (not imported) and searched for the ``os`` module's
environment: ``os.environ``, ``os.environb``, ``os.getenv``, ``os.getenvb``, under any alias, or
imported by name (``from os import environ``). Outside ``settings.py`` any of them is an offence;
everywhere, ``settings.py`` included, so is a write: an assignment or deletion (``os.environ[k] =
v``, ``del os.environ[k]``, ``os.environ = ...``), a mutating method (``update``, ``setdefault``,
``pop``...), ``os.putenv`` and ``os.unsetenv``. Subprocesses get their environment as a dict
built from ``settings.environment()``, never by changing this process's.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "accelopt"
READER = PACKAGE / "settings.py"
# Modules that run outside accelopt and so cannot ask settings.py: the runtime an export folder
# carries (``accelopt export``: runtime*.py) reads CC, TRITON_INTERPRET and XDG_CACHE_HOME in
# the user's application. Reads only: a write is an offence there too.
STANDALONE = frozenset(
    PACKAGE / "export" / name for name in ("runtime.py", "runtime_build.py", "runtime_torch.py")
)

READS = {"environ", "environb", "getenv", "getenvb"}
WRITES = {"putenv", "unsetenv"}
MUTATORS = {
    "update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__",
}  # fmt: skip


def environment_access(source: str) -> list[tuple[int, str, str]]:
    """Each access to the environment in ``source``: (line, "read" or "write", what)."""
    tree = ast.parse(source)
    modules: set[str] = set()  # names bound to the os module
    imported: dict[str, str] = {}  # names bound to one of its environment members
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "os" or (alias.name.startswith("os.") and not alias.asname):
                    modules.add(alias.asname or "os")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and not node.level:
            for alias in node.names:
                if alias.name in READS | WRITES:
                    imported[alias.asname or alias.name] = alias.name
                    kind = "write" if alias.name in WRITES else "read"
                    found.append((node.lineno, kind, f"from os import {alias.name}"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr in READS | WRITES
        ):
            member, what = node.attr, f"os.{node.attr}"
        elif isinstance(node, ast.Name) and node.id in imported:
            member, what = imported[node.id], node.id
        else:
            continue
        write = member in WRITES or _mutated(node, parents)
        found.append((node.lineno, "write" if write else "read", what))
    return sorted(set(found))


def _mutated(node: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether this use of the environment changes it."""
    if isinstance(getattr(node, "ctx", None), ast.Store | ast.Del):  # os.environ = ..., |=
        return True
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store | ast.Del):
        return True
    return (
        isinstance(parent, ast.Attribute)
        and parent.attr in MUTATORS
        and isinstance(parents.get(parent), ast.Call)
        and parents[parent].func is parent
    )


def offences(package: Path, reader: Path, standalone: frozenset[Path] = frozenset()) -> list[str]:
    """``file:line: what`` for each read outside ``reader`` (and ``standalone``) and each write
    anywhere."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for line, kind, what in environment_access(path.read_text()):
            if kind == "write" or (path != reader and path not in standalone):
                name = path.relative_to(package.parent.parent)  # src/<package>/...
                found.append(f"{name}:{line}: {'writes' if kind == 'write' else 'reads'} {what}")
    return found


def test_only_settings_reads_the_environment_and_nothing_writes_it() -> None:
    found = offences(PACKAGE, READER, STANDALONE)
    assert not found, "the environment outside settings.py:\n" + "\n".join(found)


def test_the_checker_finds_each_way_of_reaching_the_environment(tmp_path: Path) -> None:
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "settings.py").write_text(
        'import os\n\ndef name():\n    return os.environ.get("X")\n'
    )
    (package / "clean.py").write_text('import os\n\nenv = {"A": "1"}\nos.getpid()\n')
    (package / "sneaky.py").write_text(
        "import os\n"
        "import os as system\n"
        "from os import getenv as read\n"
        'a = os.environ.get("X")\n'
        'b = system.getenv("X")\n'
        'c = read("X")\n'
        "d = {**os.environ}\n"
    )
    assert offences(package, package / "settings.py") == [
        "src/pkg/sneaky.py:3: reads from os import getenv",
        "src/pkg/sneaky.py:4: reads os.environ",
        "src/pkg/sneaky.py:5: reads os.getenv",
        "src/pkg/sneaky.py:6: reads read",
        "src/pkg/sneaky.py:7: reads os.environ",
    ]


def test_the_checker_finds_writes_even_in_settings(tmp_path: Path) -> None:
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "settings.py").write_text(
        "import os\n"
        "from os import environ\n"
        'os.environ["A"] = "1"\n'
        'os.environ.setdefault("B", "2")\n'
        'del os.environ["C"]\n'
        'environ.update({"D": "4"})\n'
        'os.putenv("E", "5")\n'
        "os.environ = {}\n"
        'value = os.environ.get("F")\n'
    )
    assert offences(package, package / "settings.py") == [
        "src/pkg/settings.py:3: writes os.environ",
        "src/pkg/settings.py:4: writes os.environ",
        "src/pkg/settings.py:5: writes os.environ",
        "src/pkg/settings.py:6: writes environ",
        "src/pkg/settings.py:7: writes os.putenv",
        "src/pkg/settings.py:8: writes os.environ",
    ]
