"""A workspace's own problems: added from a file or folder, checked, removed.

``add_problem`` stages the problem in a hidden folder beside the others, loads and checks it
there, and only then moves it into place: a problem that fails a check leaves nothing behind.
"""

from __future__ import annotations

import importlib.util
import keyword
import math
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

from accelopt.problems.loader import (
    NAME_PATTERN,
    PROBLEM_FILE,
    ProblemFileError,
    import_problem_file,
    load_problem_dir,
    problems_dir,
    suite_names,
)
from accelopt.problems.records import Problem

C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
C_KEYWORDS = frozenset(
    (
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "kernel",
    )
)
CHECK_BYTES = 64 << 20  # the reference is run at add time on a workload at most this big
KERNEL_SUFFIXES = {".c": "baseline.c", ".py": "baseline_triton.py"}


def check_problem(problem: Problem) -> list[str]:
    """What is wrong with a problem's definition, one sentence each (empty: nothing)."""
    errors = _check_names(problem)
    for workload in problem.workloads.values():
        missing = [p for p in problem.params if p not in workload.sizes]
        bad = [p for p in problem.params if p in workload.sizes and int(workload.sizes[p]) <= 0]
        if missing or bad:
            errors.append(
                f"workload {workload.name!r} gives no positive size for: {', '.join(missing + bad)}"
            )
            continue
        errors += _check_cost(problem, workload.name)
    if not problem.workloads:
        errors.append("the problem has no workload: give at least one, e.g. 'cpu'")
    if not problem.tolerance > 0:
        errors.append(f"the tolerance must be positive, not {problem.tolerance}")
    return errors


def _check_names(problem: Problem) -> list[str]:
    errors = []
    if not NAME_PATTERN.fullmatch(problem.name):
        errors.append(
            f"the name {problem.name!r} must be lowercase letters, digits and '_', starting with "
            "a letter"
        )
    if not problem.inputs or not problem.outputs:
        errors.append("a problem needs at least one input and one output")
    names = [t.name for t in (*problem.inputs, *problem.outputs)]
    for name in names:
        if not C_IDENTIFIER.fullmatch(name) or name in C_KEYWORDS or keyword.iskeyword(name):
            errors.append(f"tensor name {name!r} is not usable as a C parameter name")
        if name in problem.params:
            errors.append(f"tensor name {name!r} is also a size parameter (a C #define)")
    if len(set(names)) != len(names):
        errors.append("tensor names must be unique")
    for tensor in (*problem.inputs, *problem.outputs):
        unknown = [d for d in tensor.shape if not d.isdigit() and d not in problem.params]
        if unknown:
            errors.append(f"tensor {tensor.name!r} has axes that are no size parameter: {unknown}")
    return errors


def _check_cost(problem: Problem, workload: str) -> list[str]:
    sizes = problem.workload(workload).sizes
    try:
        cost = problem.cost.at(sizes)
    except Exception as exc:
        return [f"the cost model fails on workload {workload!r} ({type(exc).__name__}: {exc})"]
    terms = {"matmul_flops": cost.matmul_flops, "vector_flops": cost.vector_flops}
    terms["bytes"] = cost.bytes
    bad = [k for k, v in terms.items() if not math.isfinite(v) or v < 0]
    if bad:
        return [f"the cost model gives {', '.join(bad)} not a finite count ≥ 0 on {workload!r}"]
    if cost.bytes <= 0:
        return [f"the cost model moves no bytes on workload {workload!r}"]
    return []


def check_reference(problem: Problem) -> str:
    """Run the generator and the reference once on the smallest workload; what went wrong, or
    '' (also when the check was skipped: a module missing, every workload too big)."""
    if any(importlib.util.find_spec(m) is None for m in problem.requires):
        return ""
    workload = min(problem.workloads.values(), key=lambda w: problem.buffer_bytes(w.sizes))
    sizes = workload.sizes
    if problem.buffer_bytes(sizes) > CHECK_BYTES:
        return ""
    try:
        with np.errstate(all="ignore"):  # a NaN or Inf it makes is reported below
            inputs = problem.generate(sizes, seed=0)
            outputs = problem.reference(*(x.astype(np.float64) for x in inputs))
    except Exception as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        return f"the generator or the reference fails on workload {workload.name!r} ({why})"
    expected = [t.dims(sizes) for t in problem.inputs]
    got = [tuple(x.shape) for x in inputs]
    if got != expected:
        return f"the generator makes inputs of shapes {got}, the problem says {expected}"
    shapes = problem.output_shapes(sizes)
    got = [tuple(np.shape(y)) for y in outputs] if isinstance(outputs, tuple | list) else []
    if got != shapes:
        return f"the reference must return a tuple of arrays of shapes {shapes}, not {got}"
    if not all(np.isfinite(y).all() for y in outputs):
        return f"the reference gives NaN or Inf on workload {workload.name!r}"
    return ""


def add_problem(
    source: Path, workspace: Path, *, baseline: Path | None = None, replace: bool = False
) -> Problem:
    """Add the problem that ``source`` (a ``problem.py``, or a folder holding one and the files
    it reads) defines to the workspace, with ``baseline`` as its starting kernel; checked first,
    so that a problem that is wrong leaves nothing behind. An error names the user's own file,
    never the staged copy it was found in."""
    root = problems_dir(workspace)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".adding-", dir=root))
    try:
        folder = _checked_copy(source, staging, baseline)
        target = root / folder.name
        if target.exists() and not replace:
            raise ProblemFileError(
                f"the workspace has a problem named {folder.name!r}: remove it first "
                f"(`accelopt problem remove {folder.name}`) or add with --replace"
            )
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
        return load_problem_dir(target)
    except ProblemFileError as exc:
        raise ProblemFileError(as_written(str(exc), source, staging)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _checked_copy(source: Path, staging: Path, baseline: Path | None) -> Path:
    """The problem copied into ``staging/<its name>`` with its baseline, loaded and checked."""
    name = _stage(source, staging)
    if name in suite_names():
        raise ProblemFileError(f"the suite has a problem named {name!r}: give yours another name")
    folder = staging / name
    if baseline is not None:
        _copy_baseline(baseline, folder)
    problem = load_problem_dir(folder)
    errors = check_problem(problem) or [e for e in [check_reference(problem)] if e]
    if errors:
        raise ProblemFileError(f"problem {name!r} is not usable: {'; '.join(errors)}")
    return folder


def as_written(message: str, source: Path, staging: Path) -> str:
    """``message`` with the staged copies' paths (``staging/probe``, ``staging/<name>``)
    replaced by the user's own file or folder (pure but for resolving paths)."""
    staged = re.compile(re.escape(str(staging.resolve())) + r"/[^/\s]+")
    if source.is_file():
        own = str(source.resolve())
        message = re.sub(staged.pattern + "/" + re.escape(PROBLEM_FILE), lambda _: own, message)
    folder = str((source if source.is_dir() else source.parent).resolve())
    return staged.sub(lambda _: folder, message)


def _stage(source: Path, staging: Path) -> str:
    """Copy the problem into ``staging/<its name>``; its name, read from its PROBLEM."""
    if source.is_dir():
        if not (source / PROBLEM_FILE).is_file():
            raise ProblemFileError(f"folder {source} holds no {PROBLEM_FILE}")
        probe = staging / "probe"
        shutil.copytree(source, probe, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    elif source.is_file():
        probe = staging / "probe"
        probe.mkdir()
        shutil.copyfile(source, probe / PROBLEM_FILE)
    else:
        raise ProblemFileError(f"{source} does not exist: give a problem file or folder")
    name = _declared_name(probe)
    probe.rename(staging / name)
    return name


def _declared_name(folder: Path) -> str:
    """The name a staged problem gives itself (loaded once under the folder's own name)."""
    problem = import_problem_file(folder / PROBLEM_FILE, f"staged_{folder.parent.name[8:]}")
    if not NAME_PATTERN.fullmatch(problem.name):
        raise ProblemFileError(
            f"problem name {problem.name!r} must be lowercase letters, digits and '_', starting "
            "with a letter"
        )
    return problem.name


def _copy_baseline(kernel: Path, folder: Path) -> None:
    target = KERNEL_SUFFIXES.get(kernel.suffix)
    if target is None or not kernel.is_file():
        raise ProblemFileError(
            f"baseline {kernel} must be an existing .c (cpu) or .py (triton) kernel file"
        )
    shutil.copyfile(kernel, folder / target)


def remove_problem(name: str, workspace: Path) -> Path:
    """Delete the workspace problem ``name``; the folder it was in."""
    if name in suite_names():
        raise ProblemFileError(f"{name!r} is a suite problem: only workspace problems are removed")
    folder = problems_dir(workspace) / name
    if not NAME_PATTERN.fullmatch(name) or not (folder / PROBLEM_FILE).is_file():
        raise ProblemFileError(
            f"the workspace has no problem named {name!r}: see `accelopt problem list`"
        )
    shutil.rmtree(folder)
    return folder
