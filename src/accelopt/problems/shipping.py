"""A problem as a worker receives it: by name for the suite's, with its files for a workspace's.

An evaluation runs in another process, maybe on another machine (a Ray node), which has the
suite but not the user's workspace. A workspace problem therefore travels with its request as
its files (a few kilobytes); the worker writes them once under its cache, in a folder named by
their fingerprint, and loads the problem from there: the problem the worker checks against is
byte for byte the one the parent loaded, whatever happens to the workspace meanwhile.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from accelopt import settings
from accelopt.problems.loader import load_problem, load_problem_dir, snapshot
from accelopt.problems.records import Problem

MAX_SHIPPED_BYTES = 32 << 20  # a problem folder bigger than this is not sent to workers

ProblemRef = dict[str, Any]  # {"name": ...} or {"name", "fingerprint", "files": {path: base64}}


_REFS: dict[str, ProblemRef] = {}  # fingerprint -> its encoded files (every request sends them)
_REFS_LOCK = threading.Lock()


def problem_ref(problem: Problem) -> ProblemRef:
    """What a request carries to name ``problem`` (encoded once per fingerprint)."""
    if problem.origin == "suite":
        return {"name": problem.name}
    with _REFS_LOCK:
        cached = _REFS.get(problem.fingerprint)
    if cached is None:
        cached = _encoded(problem)
        with _REFS_LOCK:
            _REFS[problem.fingerprint] = cached
    return {**cached, "files": dict(cached["files"])}  # a caller's edit never reaches the cache


def _encoded(problem: Problem) -> ProblemRef:
    files = snapshot(problem)
    size = sum(len(data) for data in files.values())
    if size > MAX_SHIPPED_BYTES:
        raise ValueError(
            f"problem {problem.name!r} is {size >> 20} MiB of files, more than the "
            f"{MAX_SHIPPED_BYTES >> 20} MiB a worker is sent: keep large data out of its folder"
        )
    return {
        "name": problem.name,
        "fingerprint": problem.fingerprint,
        "files": {path: base64.b64encode(data).decode("ascii") for path, data in files.items()},
    }


def resolve_ref(ref: ProblemRef | str, cache: Path | None = None) -> Problem:
    """The problem a request names (a bare string names a suite problem)."""
    if isinstance(ref, str) or "files" not in ref:
        return load_problem(ref if isinstance(ref, str) else ref["name"])
    root = (cache or settings.cache_dir()) / "problems"
    folder = root / f"{ref['fingerprint']}" / ref["name"]
    if not folder.is_dir():
        _materialize(ref, root, folder)
    problem = load_problem_dir(folder)
    if problem.fingerprint != ref["fingerprint"]:  # a damaged copy: write it again
        shutil.rmtree(folder.parent, ignore_errors=True)
        _materialize(ref, root, folder)
        problem = load_problem_dir(folder)
    return problem


def _materialize(ref: ProblemRef, root: Path, folder: Path) -> None:
    """Write the files into a fresh folder, then move it into place (another worker may win)."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=root))
    try:
        target = staging / ref["name"]
        for relative, encoded in ref["files"].items():
            path = (target / relative).resolve()
            if not path.is_relative_to(target.resolve()):
                raise ValueError(f"problem file path {relative!r} leaves the problem's folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(encoded))
        try:
            os.rename(staging, folder.parent)
        except OSError:  # another worker put it there first
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
