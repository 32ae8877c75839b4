"""optimize's and runs show's generalization table against one ceiling (issue 46, defect 2): a
peak per workload, at the run's ceilings, and every % its peak over the row's ms. Before, its %
were the search's own figures (calibrated for compute-bound kernels) beside no peak column: a
reader could not tell what they were a fraction of."""

from __future__ import annotations

import pytest
from rendered_tables import check_one_ceiling, parse_tables, render
from specs import make_spec

from accelopt.backends.status import Status
from accelopt.cli.generalization import generalization_table, workload_peaks
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.scoring import workload_roofline
from accelopt.search.workloads import Generalization, RunWorkloads, group_figures, workload_figures

HW = make_spec(matmul_rate=200e9, vector_rate=200e9, bandwidth=50e9)
MATMUL = load_problem("matmul")


def ev(workload: str, latency: float | None, pct: float = 0.9) -> Evaluation:
    return Evaluation(
        problem="matmul", workload=workload, backend="cpu", kernel="k", kernel_hash="h",
        hardware=HW.key(), status=Status.PASSED, latency_s=latency, peak_s=1e-4,
        pct_of_peak=pct, bound="matmul", tolerance=1e-5,
    )  # fmt: skip


def _generalization() -> Generalization:
    chosen = RunWorkloads(("small", "cpu"), ("tiny",))
    # the search's own % (say calibrated) disagree with the ceilings' on purpose
    baseline = {"small": ev("small", 4e-3), "cpu": ev("cpu", 20e-3), "tiny": ev("tiny", 1e-3)}
    best = {"small": ev("small", 1e-3), "cpu": ev("cpu", 5e-3), "tiny": ev("tiny", 0.5e-3)}
    sizes = {w: dict(MATMUL.workload(w).sizes) for w in chosen.all}
    rows = workload_figures(chosen, sizes, baseline, best)
    return Generalization(chosen, tuple(rows), tuple(group_figures(rows)))


def test_every_percent_is_its_workloads_peak_over_its_ms():
    found = _generalization()
    peaks = workload_peaks(found, MATMUL, HW)
    assert peaks["cpu"] == workload_roofline(MATMUL, "cpu", HW).peak_s
    (table,) = parse_tables(render(generalization_table(found, peaks)))
    assert check_one_ceiling(table) == 6  # baseline and best % on each of three workloads
    cpu = next(row for row in table.rows if row["workload"] == "cpu")
    assert cpu["best %"] == f"{peaks['cpu'] / 5e-3:.1%}"


def test_without_ceilings_the_search_figures_are_shown_and_say_nothing_of_a_peak():
    found = _generalization()
    (table,) = parse_tables(
        render(generalization_table(found, workload_peaks(found, MATMUL, None)))
    )
    assert "peak ms" not in table.headers
    with pytest.raises(AssertionError):
        check_one_ceiling(table)  # what the old table was everywhere
