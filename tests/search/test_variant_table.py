"""A kernel's variant table as ``variant_tables`` builds it from fakes (records, evaluations and
stored re-timing sessions; nothing timed): one ceiling for every row, each row's interval, the
rows in the order that decides (re-timed speedup first, then ms), ratios as speedups.

The user's case (issue 46): a variant listed 27 % faster by its own noisy evaluation was never
re-timed, one re-timed at 0.949x (its time over the kernel's: lower is faster) sat below it, and
the % column, each row against its own calibrated peak, was not in the order of the ms column.
"""

from __future__ import annotations

import pytest
from variant_fakes import CACHED_PEAK, EVALUATIONS, KERNELS, SESSIONS, evaluation, record

from accelopt.search.briefs import variant_lines
from accelopt.search.retimings import RetimingRecord
from accelopt.search.variants import VariantTable, variant_tables


def table() -> VariantTable:
    (found,) = variant_tables(KERNELS, EVALUATIONS, frozenset(), frozenset(), "cpu", SESSIONS)
    return found


def test_every_row_is_against_one_ceiling_so_ms_and_percent_agree():
    found = table()
    timed = [r for r in found.rows if r.latency_s is not None]
    # in the order of the ms, the % of peak falls: one ceiling, not each row's own control
    by_ms = sorted(timed, key=lambda r: r.latency_s or 0.0)
    pcts = [r.pct_of_peak or 0.0 for r in by_ms]
    assert pcts == sorted(pcts, reverse=True)
    assert found.peak_s == CACHED_PEAK and found.ceiling == "cached"
    for row in timed:
        assert row.pct_of_peak == pytest.approx(CACHED_PEAK / (row.latency_s or 0.0))


def test_each_row_carries_its_interval_and_speedups_not_time_ratios():
    rows = {r.kernel_hash: r for r in table().rows}
    assert rows["start"].ci == pytest.approx(0.05) and rows["noisy16"].ci == pytest.approx(0.40)
    close = rows["close32"]
    assert close.session_ratio == pytest.approx(0.949)  # the time ratio: kept, lower is faster
    assert close.session_speedup == pytest.approx(1 / 0.949)  # beside it: higher is faster
    assert close.speedup == pytest.approx(1 / 0.949) and close.speedup_ci == pytest.approx(0.047)
    assert rows["noisy16"].speedup is None and rows["noisy16"].by_evaluations == "not faster"


def test_rows_are_sorted_by_what_decides_the_retimed_speedup_then_ms():
    values = [r.values for r in table().rows]
    # the kernel first; the re-timed ones by speedup (1/0.949 before 1/1.02); then by ms; the
    # failed last
    assert values == ["(as written)", "BM=32", "BM=128", "BM=16", "BM=8"]


def test_a_variant_retimed_against_an_earlier_winner_is_chained_to_the_kernel_as_written():
    kernels = [*KERNELS, record("later", "48", iteration=2)]
    evaluations = {**EVALUATIONS, "later": evaluation("later", 9.0, 0.02, 4.0)}
    sessions = [*SESSIONS, RetimingRecord(("close32", "later"), (1.0, 0.9), (None, 0.03))]
    (found,) = variant_tables(kernels, evaluations, frozenset(), frozenset(), "cpu", sessions)
    later = next(r for r in found.rows if r.kernel_hash == "later")
    assert later.session_reference == "close32" and later.session_speedup == pytest.approx(1 / 0.9)
    assert later.speedup == pytest.approx(1 / 0.9 / 0.949)  # over the kernel as written
    assert later.speedup_ci == pytest.approx((0.03**2 + 0.047**2) ** 0.5)
    assert found.rows[1] is later  # the fastest re-timed


def test_the_planner_reads_variants_as_speedups():
    lines = variant_lines(KERNELS, EVALUATIONS, KERNELS[0], "cpu", before=2)
    assert lines[0] == "BM=16: speedup 1.27x over this kernel (separate evaluations)"
