"""Choosing the next beam: pure functions on evaluated candidates.

Correctness is a hard filter (only PASSED kernels compete). A child counts as faster than its
parent only beyond the measured noise: with ``d = 1 - child / parent`` (the fraction of time
saved) and ``noise`` the larger uncertainty of the two medians — the relative half-width of a
median's 95 % confidence interval (IQR/median for evaluations that have none), never below
MIN_NOISE — ``d > 2 noise`` is a win, ``d <= noise`` is not, and in between the two are re-timed
in one session before deciding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from accelopt.profiling.evaluation import Evaluation
from accelopt.store.records import KernelRecord

# Medians of separate evaluations of one kernel differ by up to ~2 % on a quiet machine (thread
# placement, page placement), however precise each one is: below that, no interval is believed.
MIN_NOISE = 0.02


class Comparison(StrEnum):
    FASTER = "faster"
    NOT_FASTER = "not faster"
    UNSURE = "unsure"  # within twice the noise: re-time both in one session


@dataclass(frozen=True)
class Candidate:
    kernel: KernelRecord
    evaluation: Evaluation

    @property
    def hash(self) -> str:
        return self.kernel.hash

    @property
    def latency(self) -> float | None:
        """The median latency of a PASSED kernel, else None (it cannot compete)."""
        e = self.evaluation
        return e.latency_s if e.passed and e.latency_s else None


def uncertainty(evaluation: Evaluation) -> float:
    """How well an evaluation knows its median: its 95 % interval, else its IQR/median."""
    ci = evaluation.ci
    return ci if ci is not None else evaluation.noise or 0.0


def noise_of(*evaluations: Evaluation) -> float:
    return max([MIN_NOISE, *(uncertainty(e) for e in evaluations)])


def compare(child: Evaluation, parent: Evaluation) -> Comparison:
    """Is the child faster than its parent beyond the measured noise?"""
    if not (child.passed and parent.passed and child.latency_s and parent.latency_s):
        return Comparison.NOT_FASTER
    saved = 1.0 - child.latency_s / parent.latency_s
    noise = noise_of(child, parent)
    if saved > 2 * noise:
        return Comparison.FASTER
    if saved <= noise:
        return Comparison.NOT_FASTER
    return Comparison.UNSURE


def effective_latency(child: Candidate, parent: Candidate | None) -> float | None:
    """What a candidate is ranked by: its latency, except that a child that is not faster than
    its parent beyond the noise gets no credit for its apparent gain."""
    if child.latency is None:
        return None
    if parent is None or parent.latency is None:
        return child.latency
    if compare(child.evaluation, parent.evaluation) is Comparison.FASTER:
        return child.latency
    return max(child.latency, parent.latency)


def next_beam(
    parents: Sequence[Candidate], children: Sequence[Candidate], width: int
) -> list[Candidate]:
    """The best ``width`` of parents and children together (elitism), distinct by hash, PASSED
    only, ranked by effective latency; on a tie the parent (then the earlier candidate) wins."""
    by_hash = {p.hash: p for p in parents}
    ranked: list[tuple[float, int, Candidate]] = []
    seen: set[str] = set()
    for order, cand in enumerate([*parents, *children]):
        if cand.hash in seen:
            continue
        seen.add(cand.hash)
        parent = None if cand.hash in by_hash else by_hash.get(cand.kernel.parent_hash)
        latency = effective_latency(cand, parent)
        if latency is not None:
            ranked.append((latency, order, cand))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [cand for _, _, cand in ranked[:width]]


def best(candidates: Sequence[Candidate]) -> Candidate | None:
    """The fastest PASSED candidate by median latency."""
    passed = [c for c in candidates if c.latency is not None]
    return min(passed, key=lambda c: c.latency or 0.0) if passed else None
