"""What a result cost: $ per point of peak gained, LLM calls per kept improvement, free variants."""

from __future__ import annotations

import pytest

from accelopt.llm.client import Usage
from accelopt.reports.costs import improvements, result_cost
from accelopt.store.records import IterationRecord, KernelOrigin, KernelRecord


def it(t: int, best: str) -> IterationRecord:
    return IterationRecord(iteration=t, beam=(best,), best_hash=best, best_latency_s=1.0,
                           best_pct_of_peak=0.5, spent_usd=0.0, evaluated=1)  # fmt: skip


def kernel(h: str, origin: KernelOrigin) -> KernelRecord:
    return KernelRecord(h, h, "cpu", 1, origin)


def test_an_improvement_is_an_iteration_that_kept_a_new_best():
    assert improvements([it(0, "a"), it(1, "a"), it(2, "b"), it(3, "c"), it(4, "c")]) == 2
    assert improvements([it(2, "b"), it(0, "a"), it(1, "a")]) == 1  # in iteration order
    assert improvements([]) == 0


def test_dollars_per_point_and_calls_per_kept_improvement_and_free_variants():
    usage = {"planner": Usage(calls=6, replayed=2, cost_usd=0.3),
             "executor": Usage(calls=10, failed=1, cost_usd=0.9, unknown_cost=1)}  # fmt: skip
    kernels = [kernel("a", KernelOrigin.BASELINE), kernel("v1", KernelOrigin.TUNED),
               kernel("v2", KernelOrigin.TUNED), kernel("e", KernelOrigin.EXECUTOR)]  # fmt: skip
    cost = result_cost(usage, 0.20, 0.50, [it(0, "a"), it(1, "e"), it(2, "v1")], kernels)
    assert cost.gain_points == pytest.approx(30.0)
    assert cost.usd_per_point == pytest.approx(1.2 / 30)
    assert (cost.llm_calls, cost.improvements, cost.calls_per_improvement) == (14, 2, 7.0)
    assert cost.variants == 2 and cost.unknown_calls == 1
    assert "2 tuned variants measured for free" in cost.text


def test_nothing_gained_has_no_price_per_point():
    cost = result_cost({}, 0.5, 0.5, [it(0, "a"), it(1, "a")], [])
    assert cost.usd_per_point is None and cost.calls_per_improvement is None
    assert cost.gain_points == 0.0
