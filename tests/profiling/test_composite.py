"""One kernel over several workloads: combined into one evaluation the search can rank."""

from __future__ import annotations

import math

import pytest

from accelopt.backends.status import Status
from accelopt.profiling.composite import combine, combine_ratios
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.stats import geomean
from accelopt.search.selection import Comparison, compare


def ev(workload: str, latency: float | None, peak: float, status: Status = Status.PASSED,
       ci: float = 0.01, error: str = "") -> Evaluation:  # fmt: skip
    return Evaluation(
        problem="p", workload=workload, backend="cpu", kernel="k", kernel_hash="h",
        hardware="hw", status=status, error=error, latency_s=latency, noise=0.03,
        ci_low_s=latency * (1 - ci) if latency else None,
        ci_high_s=latency * (1 + ci) if latency else None, peak_s=peak,
        pct_of_peak=peak / latency if latency else None, bound="memory", tolerance=1e-5,
        calls=10, time_s=1.0,
    )  # fmt: skip


def test_one_evaluation_is_returned_unchanged():
    one = ev("a", 2e-3, 1e-3)
    assert combine([one]) is one
    assert combine_ratios([0.8], [0.01]) == (0.8, 0.01)
    assert geomean([0.3]) == 0.3  # exactly: a one-workload run ranks as it always did


def test_passing_evaluations_combine_to_geometric_means():
    a, b = ev("a", 4e-3, 1e-3), ev("b", 1e-3, 1e-4, ci=0.05)
    both = combine([a, b])
    assert both.passed and both.workload == "a+b"
    assert both.latency_s == pytest.approx(2e-3)
    assert both.pct_of_peak == pytest.approx(math.sqrt(0.25 * 0.1))
    # the score and the latency rank alike: geomean(% of peak) = geomean(peak) / geomean(latency)
    assert both.pct_of_peak == pytest.approx(both.peak_s / both.latency_s)
    assert both.ci == pytest.approx(0.05)  # the worst workload's uncertainty
    assert both.time_s == 2.0 and both.calls == 10


def test_a_failure_on_any_workload_fails_the_kernel_and_names_it():
    a = ev("a", 1e-3, 1e-3)
    b = ev("b", None, 1e-4, Status.INCORRECT, error="max rel err 0.3")
    both = combine([a, b])
    assert both.status is Status.INCORRECT and both.workload == "a+b"
    assert both.error == "on workload b: max rel err 0.3"
    assert combine([b, a]).error.startswith("on workload b")


def test_a_kernel_faster_on_one_workload_and_slower_on_another_is_not_a_win():
    parent = combine([ev("a", 1e-3, 1e-4), ev("b", 1e-3, 1e-4)])
    child = combine([ev("a", 0.5e-3, 1e-4), ev("b", 2e-3, 1e-4)])
    assert compare(child, parent) is Comparison.NOT_FASTER
    better = combine([ev("a", 0.5e-3, 1e-4), ev("b", 0.9e-3, 1e-4)])
    assert compare(better, parent) is Comparison.FASTER


def test_ratios_combine_unless_one_is_unknown():
    ratio, ci = combine_ratios([0.5, 2.0], [0.01, 0.02])
    assert ratio == pytest.approx(1.0) and ci == 0.02
    assert combine_ratios([0.5, None], [0.01, None]) == (None, None)
    assert geomean([]) is None and geomean([1.0, 0.0]) is None


def test_a_failure_that_stopped_the_other_workloads_is_named_over_all_of_them():
    failed = ev("b", None, 1e-4, Status.CRASH, error="SIGSEGV")
    alone = combine([failed], ["b", "a"])
    assert alone.workload == "b+a" and alone.error == "on workload b: SIGSEGV"
