"""Which kernel each problem of an optimize command starts from, and what autotune can tune."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
from rich.console import Console
from variant_fakes import EVALUATIONS, KERNELS, SESSIONS

from accelopt.backends.registry import shipped_kernel
from accelopt.cli.variants import start_sources, tunable_problems, variant_table, verdict
from accelopt.errors import UserError
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem
from accelopt.search.retimings import RetimingRecord
from accelopt.search.variants import VariantTable, variant_tables


def without_expert(name: str, tmp_path: Path) -> Problem:
    """A suite problem as if it shipped no expert (every suite problem ships one)."""
    return replace(load_problem(name), directory=tmp_path)


def test_a_shipped_kind_names_each_problems_own_kernel_and_none_where_it_ships_none(tmp_path):
    problems = [load_problem("matmul"), without_expert("bmm", tmp_path)]
    starts = start_sources(problems, Path("expert"), "cpu")
    assert starts[0] == shipped_kernel(problems[0], "expert").read_text() and starts[1] is None
    with pytest.raises(UserError, match="name exactly one"):
        start_sources(problems, Path(__file__), "cpu")  # a file starts one problem only


def test_autotune_keeps_the_problems_whose_starting_kernel_declares_tunables(tmp_path):
    problems = [without_expert("bmm", tmp_path), load_problem("matmul"), load_problem("silu")]
    keep, skipped = tunable_problems(problems, start_sources(problems, Path("expert"), "cpu"),
                                     "cpu")  # fmt: skip
    assert keep == [1, 2] and skipped == ["bmm"]
    with pytest.raises(UserError, match=r"declares no tunables.*matmul --kernel expert"):
        tunable_problems(problems[:1], [None], "cpu")


# The autotune verdict and the variant table (issue 46, defects 3 and 4), on the user's case
# (tests/support/variant_fakes.py): a variant 27 % faster by its own noisy evaluation (never
# re-timed: within the noise) beside one re-timed at 0.949x of the kernel's time, under "the
# kernel as written is already the fastest".


def tables(sessions=SESSIONS, best: str = "start") -> list[VariantTable]:
    return variant_tables(KERNELS, EVALUATIONS, frozenset(), frozenset([best]), "cpu", sessions)


def test_the_verdict_says_what_was_confirmed_and_why_a_faster_looking_variant_was_not():
    found = verdict(tables(), "start", "start", 1.0)
    assert "fastest" not in found  # never "already the fastest": BM=16 was not re-timed
    assert found.startswith("no variant confirmed faster than the kernel as written; ")
    assert "best re-timed 1.05x ± 4.7 % (BM=32), short of the 1.10x a session needs" in found
    assert "BM=16 looked 1.27x faster by separate evaluations (± 40.0 % and ± 5.0 %)" in found
    assert "but was not re-timed: that gain is within those evaluations' noise" in found
    assert found.endswith("(4 variants measured)")


def test_the_verdict_names_the_variant_kept_with_its_retimed_speedup():
    won = [RetimingRecord(("start", "close32"), (1.0, 0.787), (None, 0.03))]
    found = verdict(tables(won, "close32"), "start", "close32", 1.04)
    assert found == ("variant BM=32 confirmed 1.27x ± 3.0 % faster than the kernel as written "
                     "(re-timed side by side) (4 variants measured)")  # fmt: skip


def test_the_variant_table_shows_speedups_intervals_and_one_peak():
    (table,) = tables()
    console = Console(width=250, record=True)
    console.print(variant_table(asdict(table)))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "values" in line)
    for column in ("±", "peak ms", "% of peak", "speedup"):
        assert column in header
    assert "0.949" not in text  # no time ratio where "x" means a speedup
    assert "1.05x ± 4.7%" in text and "±40.0%" in text
    assert "above 1 is faster" in " ".join(text.split())
    for row in table.rows:  # each row's % is its peak ms over its ms
        line = next(line for line in text.splitlines() if f" {row.values} " in line)
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if row.latency_s is None:
            continue
        ms, peak, pct = float(cells[2]), float(cells[4]), float(cells[5].rstrip("%"))
        assert pct == pytest.approx(100 * peak / ms, abs=0.06)


def test_a_kept_variant_whose_last_retiming_is_within_its_interval_is_not_called_confirmed():
    closing = [RetimingRecord(("start", "close32"), (1.0, 0.98), (None, 0.03))]
    found = verdict(tables(closing, "close32"), "start", "close32", 1.04)
    assert "confirmed 1.02x" not in found
    assert "its last re-timing beside the kernel as written reads 1.02x ± 3.0 %" in found


def test_a_figure_carried_from_the_cache_says_when_and_under_what_load():
    """Issue 46: an autotune run's own row can come from an earlier, busy run's cached evaluation;
    the table says so, with when and how busy the machine was, and says nothing of the others."""
    from accelopt.cli.variants import carried_from_cache

    rows = [
        {"values": "(as written)", "measured_at": "2026-12-07T10:02:11+00:00", "load_others": 0.37},
        {"values": "BM=32", "measured_at": "2026-12-07T11:00:05+00:00", "load_others": 0.0},
        {"values": "BM=16", "measured_at": ""},  # a record from before measured_at
    ]
    (line,) = carried_from_cache(rows, since="2026-12-07T10:59:00+00:00")
    assert "(as written) on 2026-12-07T10:02:11+00:00, others using 37% of the CPUs" in line
    assert "BM=32" not in line and "BM=16" not in line
    assert carried_from_cache(rows, since="") == []  # no run: nothing to compare with
