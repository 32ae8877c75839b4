"""Import KernelBench files as workspace problems: check, size, name, count, then write the
folder ``<dest_root>/<name>/`` (model.py, import.json, problem.py) atomically."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path

import accelopt.problems.kernelbench.runtime as runtime
from accelopt.problems.imports import (
    Imported,
    ImportRefused,
    check_name,
    write_problem,
)
from accelopt.problems.kernelbench.imported import FORMAT, build_problem
from accelopt.problems.kernelbench.plan import plan_import
from accelopt.problems.kernelbench.source import default_name, parse, short_error

NAME_HINT = "choose another --name"


PROBLEM_PY = (
    '"""{name}: imported from KernelBench file {file} by `accelopt problem import kernelbench`.'
    '''

Edit the keyword arguments to override the counted cost model or the tolerance, e.g.
    load_imported(Path(__file__).parent, vector_flops=lambda s: {example}, tolerance=1e-3)
The operator is model.py; the sizes and counted costs of each workload are in import.json.
"""

from pathlib import Path

from accelopt.problems.kernelbench import load_imported

PROBLEM = load_imported(Path(__file__).parent)
'''
)


def import_file(
    path: Path,
    dest_root: Path,
    *,
    name: str | None = None,
    sets: Mapping[str, int] | None = None,
    fit: bool = False,
    reserved_names: Collection[str] = (),
) -> Imported:
    """Import one KernelBench file as ``dest_root/<name>``; ImportRefused (nothing written) when
    accelopt cannot take it."""
    path, dest_root = Path(path), Path(dest_root)
    name = name if name is not None else default_name(path)
    check_name(name, dest_root, reserved_names, NAME_HINT)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportRefused(f"cannot read {path} ({short_error(exc)})") from None
    torch = _torch()
    source = parse(text, path.name)
    payload, notes = plan_import(source, dict(sets or {}), fit)
    payload = {
        "format": FORMAT,
        "name": name,
        **payload,
        "notes": notes,
        "torch": torch.__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    first = payload["params"][0] if payload["params"] else None
    example = f'4 * s["{first}"]' if first else "0"
    problem_py = PROBLEM_PY.format(name=name, file=path.name, example=example)
    files = {"model.py": data, "problem.py": problem_py.encode()}
    directory = write_problem(
        dest_root,
        name,
        files,
        payload,
        lambda folder: build_problem(folder, payload, text, name, {}),
        NAME_HINT,
    )
    problem = build_problem(directory, payload, text, name, {})
    return Imported(name, directory, problem, tuple(notes))


def _torch():
    try:
        return runtime.torch_module()
    except ModuleNotFoundError as exc:
        raise ImportRefused(f"importing a KernelBench file runs it, and {exc}") from None


def _natural(path: Path) -> list[object]:
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", path.name)]


def _assigned(path: Path) -> set[str]:
    try:
        return set(parse(path.read_text(encoding="utf-8"), path.name).assigned)
    except (OSError, UnicodeDecodeError, ImportRefused):
        return set()


def import_dir(
    directory: Path,
    dest_root: Path,
    *,
    sets: Mapping[str, int] | None = None,
    fit: bool = False,
    reserved_names: Collection[str] = (),
) -> list[tuple[Path, Imported | ImportRefused]]:
    """Import every ``*.py`` file of a folder (in natural order: 2_x before 10_x), each under
    its default name; ``sets`` apply to the files that define the constant. A refused file does
    not stop the others."""
    directory = Path(directory)
    sets = dict(sets or {})
    _torch()
    files = sorted((p for p in directory.glob("*.py") if p.is_file()), key=_natural)
    defined = {p: _assigned(p) for p in files}
    unused = [k for k in sets if not any(k in names for names in defined.values())]
    if unused:
        raise ImportRefused(
            f"--set {', '.join(unused)}: no file in {directory} defines "
            f"{'this constant' if len(unused) == 1 else 'these constants'}"
        )
    results: list[tuple[Path, Imported | ImportRefused]] = []
    for p in files:
        mine = {k: v for k, v in sets.items() if k in defined[p]}
        try:
            results.append(
                (p, import_file(p, dest_root, sets=mine, fit=fit, reserved_names=reserved_names))
            )
        except ImportRefused as exc:
            results.append((p, exc))
        except Exception as exc:  # a file that breaks the importer must not stop the others
            reason = f"{p.name} could not be imported: {short_error(exc)}"
            results.append((p, ImportRefused(reason)))
    return results
