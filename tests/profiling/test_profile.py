"""The profile an agent reads: rates and utilizations from an Evaluation, rendered as text."""

from __future__ import annotations

import dataclasses

import pytest
from specs import make_spec

from accelopt.backends.status import Status
from accelopt.hardware.roofline import Bound
from accelopt.problems.records import Cost
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profile import Profile, build_profile, render_profile

# Powers of two and halves: every rate and ratio below is exact in binary floating point.
HW = make_spec(matmul_rate=8e9, vector_rate=4e9, bandwidth=8e9)
COST = Cost(matmul_flops=2e9, vector_flops=5e8, bytes=1e9)
REMARKS = ("kernel.c:4:23: optimized: loop vectorized using 64 byte vectors  // for (...)",)


def evaluation(**fields) -> Evaluation:
    base = {
        "problem": "matmul",
        "workload": "cpu",
        "backend": "cpu",
        "kernel": "baseline.c",
        "kernel_hash": "0123456789abcdef",
        "hardware": HW.key(),
        "status": Status.PASSED,
        "latency_s": 0.5,
        "min_s": 0.48,
        "noise": 0.02,
        "calls": 20,
        "peak_s": 0.25,  # 2e9 FLOP / 8e9 FLOP/s: matmul-bound
        "pct_of_peak": 0.5,
        "bound": "matmul",
        "max_rel_err": 1e-7,
        "tolerance": 2e-5,
        "seeds": [1, 2, 3],
    }
    return Evaluation(**(base | fields))


def test_build_profile_of_a_timed_kernel():
    profile = build_profile(evaluation(), COST, HW, list(REMARKS))
    assert profile.latency_s == 0.5 and profile.pct_of_peak == 0.5
    assert profile.bound == "matmul" and profile.peak_s == 0.25 and profile.noise == 0.02
    assert profile.achieved == {"matmul": 4e9, "vector": 1e9, "memory": 2e9}
    assert profile.utilization == {"matmul": 0.5, "vector": 0.25, "memory": 0.25}
    assert profile.ceilings == {"matmul": 8e9, "vector": 4e9, "memory": 8e9}
    assert profile.status == "PASSED" and profile.error == ""
    assert profile.remarks == REMARKS and profile.timed


def test_terms_a_problem_does_not_pay_are_left_out():
    silu_like = Cost(matmul_flops=0, vector_flops=5e8, bytes=1e9)
    profile = build_profile(evaluation(bound="memory", peak_s=0.125), silu_like, HW, [])
    assert set(profile.achieved) == set(profile.utilization) == {"vector", "memory"}
    assert "matmul:" not in render_profile(profile)


def test_a_failed_evaluation_has_no_measurements():
    failed = evaluation(
        status=Status.COMPILE_ERROR,
        error="kernel.c:3:5: error: expected ';'\n    3 | x = 1",
        latency_s=None,
        min_s=None,
        noise=None,
        pct_of_peak=None,
        calls=0,
        max_rel_err=None,
    )
    profile = build_profile(failed, COST, HW, [])
    assert profile.latency_s is None and profile.pct_of_peak is None and profile.noise is None
    assert profile.achieved == {} and profile.utilization == {} and not profile.timed
    assert profile.status == "COMPILE_ERROR"
    assert profile.error.startswith("kernel.c:3:5: error")
    text = render_profile(profile)
    assert text.startswith("status: COMPILE_ERROR\nerror:\n  kernel.c:3:5: error: expected ';'\n")
    assert "achieved" not in text and "latency" not in text
    assert "roofline 250 ms, matmul-bound" in text


def test_a_check_only_evaluation_is_passed_but_not_timed():
    checked = evaluation(latency_s=None, min_s=None, noise=None, pct_of_peak=None, calls=0)
    profile = build_profile(checked, COST, HW, list(REMARKS))
    assert profile.status == "PASSED" and profile.latency_s is None and profile.achieved == {}
    text = render_profile(profile)
    assert "latency: not timed (checked for correctness only)" in text
    assert "compiler vectorization remarks:\n  " + REMARKS[0] in text


def test_a_suspicious_evaluation_keeps_its_measurements():
    fast = evaluation(status=Status.SUSPICIOUS, error="too fast", latency_s=0.125, pct_of_peak=2.0)
    profile = build_profile(fast, COST, HW, [])
    assert profile.status == "SUSPICIOUS" and profile.utilization["matmul"] == 2.0
    assert "200.0 % of peak" in render_profile(profile)


def test_render_profile_formats_the_numbers():
    hw = make_spec(matmul_rate=531.8e9, vector_rate=521.8e9, bandwidth=49e9)
    m, n, k = 512, 1536, 640
    cost = Cost(matmul_flops=2 * m * n * k, vector_flops=0, bytes=4 * (m * k + k * n + m * n))
    peak = cost.matmul_flops / hw.matmul_rate
    measured = evaluation(latency_s=0.036, noise=0.114, peak_s=peak, pct_of_peak=peak / 0.036)
    text = render_profile(build_profile(measured, cost, hw, list(REMARKS)))
    assert text.splitlines() == [
        "status: PASSED",
        "latency: 36 ms (median), noise ±11.4 % (IQR / median)",
        "5.3 % of peak: roofline 1.893 ms, matmul-bound",
        "matmul: achieved 28.0 GFLOP/s of 531.8 GFLOP/s (5.3 %)",
        "memory: achieved 0.233 GB/s of 49.0 GB/s (0.5 %)",
        "compiler vectorization remarks:",
        "  " + REMARKS[0],
    ]


def test_profile_is_frozen():
    profile = build_profile(evaluation(), COST, HW, [])
    assert isinstance(profile, Profile)
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.status = "x"  # type: ignore[misc]


def test_the_bound_and_the_terms_are_bound_members():
    profile = build_profile(evaluation(), COST, HW, [])
    assert profile.bound is Bound.MATMUL
    assert list(profile.achieved) == [Bound.MATMUL, Bound.VECTOR, Bound.MEMORY]
    assert all(type(term) is Bound for term in (*profile.utilization, *profile.ceilings))
    text = render_profile(profile)
    assert "matmul-bound" in text and "memory: achieved 2 GB/s of 8 GB/s (25.0 %)" in text
