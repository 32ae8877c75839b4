"""Choosing the next beam: noise-aware comparison, elitism, duplicates, correctness filter."""

from __future__ import annotations

from accelopt.backends.status import Status
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.selection import (
    Candidate,
    Comparison,
    best,
    compare,
    effective_latency,
    next_beam,
)
from accelopt.store.records import KernelRecord


def ev(latency: float | None, noise: float = 0.02, status: Status = Status.PASSED) -> Evaluation:
    return Evaluation(
        problem="p", workload="w", backend="cpu", kernel="k", kernel_hash="h", hardware="hw",
        status=status, latency_s=latency, noise=noise, peak_s=1e-4, bound="matmul",
        tolerance=2e-5,
    )  # fmt: skip


def cand(h: str, latency: float | None, parent: str = "", **kw) -> Candidate:
    record = KernelRecord(hash=h, source=h, backend="cpu", iteration=1, origin="executor",
                          parent_hash=parent)  # fmt: skip
    return Candidate(record, ev(latency, **kw))


def test_compare_uses_the_noise():
    parent = ev(1.0, noise=0.02)
    assert compare(ev(0.90), parent) is Comparison.FASTER  # 10 % > 2 x 2 %
    assert compare(ev(0.97), parent) is Comparison.UNSURE  # 3 %: between 2 % and 4 %
    assert compare(ev(0.99), parent) is Comparison.NOT_FASTER  # within the noise
    assert compare(ev(1.20), parent) is Comparison.NOT_FASTER
    assert compare(ev(0.5, status=Status.INCORRECT), parent) is Comparison.NOT_FASTER
    assert compare(ev(0.97, noise=0.10), parent) is Comparison.NOT_FASTER  # the larger noise


def test_compare_believes_the_medians_interval_over_the_spread_of_calls():
    def precise(latency: float, noise: float, ci: float) -> Evaluation:
        half = ci * latency
        return ev(latency, noise=noise).model_copy(
            update={"ci_low_s": latency - half, "ci_high_s": latency + half}
        )

    parent = precise(1.0, noise=0.10, ci=0.005)  # noisy calls, but a well-known median
    assert compare(precise(0.95, noise=0.10, ci=0.005), parent) is Comparison.FASTER
    assert compare(ev(0.95, noise=0.10), parent) is Comparison.NOT_FASTER  # no interval
    # a precise interval is never believed below the spread between separate evaluations
    assert compare(precise(0.985, noise=0.0, ci=0.001), precise(1.0, 0.0, 0.001)) is (
        Comparison.NOT_FASTER
    )
    assert compare(precise(0.97, 0.0, 0.001), precise(1.0, 0.0, 0.001)) is Comparison.UNSURE


def test_a_child_within_the_noise_gets_no_credit():
    parent = cand("p", 1.0)
    assert effective_latency(cand("c", 0.99, "p"), parent) == 1.0
    assert effective_latency(cand("c", 0.50, "p"), parent) == 0.50
    assert effective_latency(cand("c", 1.50, "p"), parent) == 1.50
    assert effective_latency(cand("c", None, "p", status=Status.CRASH), parent) is None


def test_next_beam_is_elitist_distinct_and_correct_only():
    parents = [cand("a", 1.0), cand("b", 2.0)]
    children = [
        cand("a1", 0.5, "a"),
        cand("a1", 0.5, "a"),  # the same kernel twice
        cand("a2", 0.99, "a"),  # within the noise of a: no credit, ranks after a
        cand("b1", 0.1, "b", status=Status.INCORRECT),  # wrong: never in the beam
        cand("b2", 1.5, "b"),
    ]
    beam = next_beam(parents, children, width=3)
    assert [c.hash for c in beam] == ["a1", "a", "a2"]
    assert [c.hash for c in next_beam(parents, [], 4)] == ["a", "b"]


def test_best_ignores_failures():
    assert (
        best([cand("x", None, status=Status.TIMEOUT), cand("y", 2.0), cand("z", 1.0)]).hash == "z"
    )
    assert best([cand("x", None, status=Status.TIMEOUT)]) is None
