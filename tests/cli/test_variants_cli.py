"""Which kernel each problem of an optimize command starts from, and what autotune can tune."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from accelopt.cli.variants import start_sources, tunable_problems
from accelopt.errors import UserError
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem


def without_expert(name: str, tmp_path: Path) -> Problem:
    """A suite problem as if it shipped no expert (every suite problem ships one)."""
    return replace(load_problem(name), directory=tmp_path)


def test_a_shipped_kind_names_each_problems_own_kernel_and_none_where_it_ships_none(tmp_path):
    problems = [load_problem("matmul"), without_expert("bmm", tmp_path)]
    starts = start_sources(problems, Path("expert"), "cpu")
    assert starts[0] == problems[0].kernel_path("expert").read_text() and starts[1] is None
    with pytest.raises(UserError, match="name exactly one"):
        start_sources(problems, Path(__file__), "cpu")  # a file starts one problem only


def test_autotune_keeps_the_problems_whose_starting_kernel_declares_tunables(tmp_path):
    problems = [without_expert("bmm", tmp_path), load_problem("matmul"), load_problem("silu")]
    keep, skipped = tunable_problems(problems, start_sources(problems, Path("expert"), "cpu"),
                                     "cpu")  # fmt: skip
    assert keep == [1, 2] and skipped == ["bmm"]
    with pytest.raises(UserError, match=r"declares no tunables.*matmul --kernel expert"):
        tunable_problems(problems[:1], [None], "cpu")
