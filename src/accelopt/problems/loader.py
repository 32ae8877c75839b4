"""Find and load the problems of the suite (``suite/<name>/problem.py`` defines ``PROBLEM``)."""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from accelopt.problems.records import Problem

SUITE_DIR = Path(__file__).parent / "suite"


class UnknownProblemError(LookupError):
    """The user named a problem that the suite does not hold."""


def list_problems() -> list[str]:
    """Names of the problems in the suite, sorted."""
    return sorted(
        p.name for p in SUITE_DIR.iterdir() if p.is_dir() and (p / "problem.py").is_file()
    )


@cache
def load_problem(name: str) -> Problem:
    if name not in list_problems():
        known = ", ".join(list_problems())
        raise UnknownProblemError(f"unknown problem {name!r}; the suite has: {known}")
    module = importlib.import_module(f"accelopt.problems.suite.{name}.problem")
    problem = module.PROBLEM
    if not isinstance(problem, Problem) or problem.name != name:
        raise TypeError(
            f"suite/{name}/problem.py must define PROBLEM = Problem(name={name!r}, ...)"
        )
    return problem
