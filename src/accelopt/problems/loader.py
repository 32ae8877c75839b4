"""Find and load problems: the suite's and a workspace's.

A suite problem is ``suite/<name>/problem.py``; a workspace problem is
``<workspace>/problems/<name>/problem.py`` with any files it reads beside it. Each defines
``PROBLEM = Problem(name=<its folder's name>, ...)``. Names are unique across both: a workspace
problem may not take a suite problem's name. Every command finds both alike (``load_problem``).

A workspace problem carries a fingerprint, a hash of its folder's files (kernels aside): its
evaluations and references are cached under it, so an edited problem never reuses a verdict.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import importlib.util
import re
import sys
import threading
from pathlib import Path

from accelopt import settings
from accelopt.errors import UserError
from accelopt.problems.records import Problem

SUITE_DIR = Path(__file__).parent / "suite"
PROBLEM_FILE = "problem.py"
PROBLEMS_DIR = "problems"  # under the workspace
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,127}")  # a folder name, a Python identifier
KERNEL_STEMS = ("baseline", "expert")  # a problem folder's kernels: not part of its fingerprint


class UnknownProblemError(LookupError):
    """The user named a problem that neither the suite nor the workspace holds."""


class ProblemFileError(UserError):
    """A problem file that does not load or does not define a valid ``PROBLEM``."""


def suite_names() -> list[str]:
    """Names of the problems shipped with accelopt, sorted."""
    return sorted(
        p.name for p in SUITE_DIR.iterdir() if p.is_dir() and (p / PROBLEM_FILE).is_file()
    )


def problems_dir(workspace: Path | None = None) -> Path:
    """Where the workspace keeps its problems (``<workspace>/problems``); the workspace is
    ``settings.workspace_dir`` when not given."""
    return settings.workspace_dir(workspace) / PROBLEMS_DIR


def workspace_names(workspace: Path | None = None) -> list[str]:
    """Names of the workspace's problems, sorted (none when it has no problems folder)."""
    root = problems_dir(workspace)
    if not root.is_dir():
        return []
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and NAME_PATTERN.fullmatch(p.name) and (p / PROBLEM_FILE).is_file()
    )


def list_problems(workspace: Path | None = None) -> list[str]:
    """Every problem a command can name: the suite's, then the workspace's."""
    return suite_names() + [n for n in workspace_names(workspace) if n not in suite_names()]


def load_problem(name: str, workspace: Path | None = None) -> Problem:
    """The problem called ``name``: the suite's, else the workspace's."""
    if name in suite_names():
        return _load_suite(name)
    directory = problems_dir(workspace) / name
    if NAME_PATTERN.fullmatch(name) and (directory / PROBLEM_FILE).is_file():
        return load_problem_dir(directory)
    names = list_problems(workspace)
    near = difflib.get_close_matches(name, names, n=1)
    maybe = f"did you mean {near[0]!r}? " if near else ""
    raise UnknownProblemError(
        f"unknown problem {name!r}; {maybe}known problems: {', '.join(names)} (add your own with "
        "`accelopt problem add FILE` or `accelopt problem import kernelbench FILE`)"
    )


_SUITE_LOCK = threading.Lock()
_SUITE: dict[str, Problem] = {}


def _load_suite(name: str) -> Problem:
    with _SUITE_LOCK:
        if name not in _SUITE:
            module = importlib.import_module(f"accelopt.problems.suite.{name}.problem")
            problem = module.PROBLEM
            if not isinstance(problem, Problem) or problem.name != name:
                raise TypeError(
                    f"suite/{name}/problem.py must define PROBLEM = Problem(name={name!r}, ...)"
                )
            _SUITE[name] = problem
        return _SUITE[name]


def problem_files(directory: Path) -> dict[str, bytes]:
    """The files a problem is made of, by path relative to its folder: everything but its
    kernels, caches and hidden files."""
    files = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        hidden = any(p.startswith(".") or p == "__pycache__" for p in relative.parts)
        if hidden or not path.is_file():
            continue
        if len(relative.parts) == 1 and path.stem.startswith(KERNEL_STEMS):
            continue
        files[relative.as_posix()] = path.read_bytes()
    return files


def fingerprint(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for relative, data in sorted(files.items()):
        digest.update(relative.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


_LOADED_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], Problem] = {}  # (folder, fingerprint) -> problem
_SNAPSHOTS: dict[str, dict[str, bytes]] = {}  # fingerprint -> the files it was computed from


def snapshot(problem: Problem) -> dict[str, bytes]:
    """The files of a workspace problem as they were when it was loaded (what its fingerprint
    hashes): a worker is sent these, never what the folder holds by then."""
    with _LOADED_LOCK:
        files = _SNAPSHOTS.get(problem.fingerprint)
    if files is None:
        files = problem_files(problem.directory)
        if fingerprint(files) != problem.fingerprint:
            raise ProblemFileError(
                f"problem {problem.name} changed in {problem.directory} since it was loaded: "
                "run the command again"
            )
    return files


def load_problem_dir(directory: Path, origin: str = "workspace") -> Problem:
    """The problem a folder's ``problem.py`` defines, loaded once per content (an edited file is
    loaded again); a ProblemFileError that names what is wrong when it does not load."""
    directory = directory.resolve()
    name = directory.name
    try:
        files = problem_files(directory)
    except OSError as exc:
        raise ProblemFileError(f"problem folder {directory} cannot be read ({exc})") from None
    digest = fingerprint(files)
    key = (str(directory), digest)
    with _LOADED_LOCK:
        if key in _LOADED:
            return _LOADED[key]
    problem = import_problem_file(directory / PROBLEM_FILE, f"{name}_{digest}")
    if problem.name != name:
        raise ProblemFileError(
            f"{directory / PROBLEM_FILE} defines a problem named {problem.name!r} in a folder "
            f"named {name!r}: the two must agree"
        )
    problem = dataclasses.replace(problem, origin=origin, fingerprint=digest, directory=directory)
    with _LOADED_LOCK:
        _LOADED[key] = problem
        _SNAPSHOTS[digest] = files
    return problem


def import_problem_file(path: Path, module_name: str) -> Problem:
    """Run a problem file and return its ``PROBLEM``."""
    qualified = f"accelopt_workspace_problems.{module_name}"
    spec = importlib.util.spec_from_file_location(qualified, path)
    if spec is None or spec.loader is None:
        raise ProblemFileError(f"{path} cannot be loaded as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except UserError:
        raise
    except Exception as exc:
        sys.modules.pop(qualified, None)
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ProblemFileError(f"problem file {path} does not load ({why})") from None
    problem = getattr(module, "PROBLEM", None)
    if not isinstance(problem, Problem):
        raise ProblemFileError(
            f"problem file {path} must define PROBLEM = Problem(...) (see docs/usage.md, "
            "'Your own operator')"
        )
    return problem
