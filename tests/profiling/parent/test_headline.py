"""Which % of peak the search and the tables use (``EvalConfig.headline``), and that every figure
agrees with its own roofline time: pure scoring of a worker's result."""

from __future__ import annotations

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.problems import load_problem
from accelopt.profiling.parent.controls import spec_for
from accelopt.profiling.parent.scoring import build_evaluation, workload_roofline
from accelopt.profiling.worker.protocol import KernelResult


def scored(name: str, hw, headline: str, drift: float = 0.05):
    problem = load_problem(name)
    roof = workload_roofline(problem, "cpu", hw)
    rate = {"matmul": hw.matmul_rate, "vector": hw.vector_rate}.get(str(roof.bound), hw.bandwidth)
    latency = roof.peak_s / 0.5  # half the cached ceiling
    result = KernelResult(latency_s=latency, ci_low_s=latency * 0.99, ci_high_s=latency * 1.01,
                          calls=50, control_rates=[rate * 0.8] * 4,  # the machine at 80 % now
                          slice_medians=[latency] * 3)  # fmt: skip
    kernel = Kernel("void kernel(void) {}", "cpu", "k")
    control = spec_for(str(roof.bound), 2, 1)
    return build_evaluation((kernel, problem, "cpu"), hw, 2, result, drift=drift, control=control,
                            headline=headline), roof  # fmt: skip


@pytest.mark.parametrize("headline, uses", [("compute", True), ("all", True), ("cached", False)])
def test_a_compute_bound_problem_is_scored_against_its_control_by_default(hw, headline, uses):
    e, roof = scored("matmul", hw, headline)
    assert str(roof.bound) == "matmul"
    assert e.cached.pct == pytest.approx(0.5) and e.calibration.pct == pytest.approx(0.625)
    assert e.ceiling == ("calibrated" if uses else "cached")
    assert e.pct_of_peak == pytest.approx(e.peak_s / e.latency_s)  # its % agrees with its peak
    assert e.pct_low < e.pct_of_peak < e.pct_high


def test_a_memory_bound_problem_reports_its_calibrated_figure_beside_the_cached_one(hw):
    e, roof = scored("silu", hw, "compute")
    assert str(roof.bound) == "memory"
    assert e.ceiling == "cached" and e.pct_of_peak == pytest.approx(0.5)
    assert e.calibration.pct == pytest.approx(0.625) and e.calibration.rate is not None
    assert scored("silu", hw, "all")[0].ceiling == "calibrated"


def test_the_latency_interval_covers_the_drift_between_evaluations(hw):
    e, _ = scored("silu", hw, "compute", drift=0.2)
    assert e.session_ci == pytest.approx(0.01)
    assert e.ci_high_s / e.latency_s - 1 == pytest.approx((0.01**2 + 0.2**2) ** 0.5)
