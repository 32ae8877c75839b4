"""Which slow→fast pairs of one iteration become experiences: the published AccelOpt rule.

After each iteration the summarizer is given at most ``slots`` (8) pairs, chosen as the AccelOpt
paper describes its optimization memory:

1. Per (parent kernel, plan) only the children that PASSED count. If the best of them is faster
   than the parent beyond the measured noise (the same verdict the beam uses: ``faster``), that
   best child is the candidate; otherwise the worst one is (the plan hurt, or did nothing).
2. Positives: a candidate faster beyond the noise with speedup ``parent / child > 1.04``. They
   take at most half of the slots, the largest speedups first.
3. Negatives: a candidate slower beyond the noise (``slower``) with ``parent / child < 1 / 1.15``
   (the child is over 15 % slower). They fill the slots the positives left, the largest slowdowns
   first, and are stored reversed: slow is the child, fast is the parent, so that the lesson reads
   "undo this".

Everything here is pure and deterministic: ties are broken by kernel hashes, then by plan title.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelopt.memory.records import ExperienceKind


@dataclass(frozen=True)
class Outcome:
    """One child evaluated in this iteration, with its parent's latency."""

    parent_hash: str
    plan_title: str
    child_hash: str
    parent_latency_s: float
    child_latency_s: float | None  # None when the child did not PASS
    faster: bool = True  # beat its parent beyond the noise (the beam's verdict)
    slower: bool = True  # its parent beat it beyond the noise

    @property
    def passed(self) -> bool:
        return self.child_latency_s is not None and self.child_latency_s > 0


@dataclass(frozen=True)
class Pair:
    """What the summarizer is given: ``speedup = slow latency / fast latency > 1``."""

    slow_hash: str
    fast_hash: str
    speedup: float
    kind: ExperienceKind
    parent_hash: str = ""  # where it was learned: (parent, plan)
    plan_title: str = ""


def _ratio(o: Outcome) -> float:
    """parent / child latency: > 1 when the child is faster."""
    assert o.child_latency_s is not None
    return o.parent_latency_s / o.child_latency_s


def _groups(outcomes: Iterable[Outcome]) -> dict[tuple[str, str], list[Outcome]]:
    """The PASSED children of each (parent, plan); a child identical to its parent is no change."""
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        if o.passed and o.parent_latency_s > 0 and o.child_hash != o.parent_hash:
            groups.setdefault((o.parent_hash, o.plan_title), []).append(o)
    return groups


def representative(children: Sequence[Outcome]) -> Outcome:
    """The best child if it sped up beyond the noise, else the worst; ties go to the smaller
    hash."""
    best = min(children, key=lambda o: (o.child_latency_s, o.child_hash))
    if best.faster and _ratio(best) > 1.0:
        return best
    return min(children, key=lambda o: (-(o.child_latency_s or 0.0), o.child_hash))


def _order(o: Outcome, ratio_sign: float) -> tuple[float, str, str, str]:
    return (ratio_sign * _ratio(o), o.parent_hash, o.child_hash, o.plan_title)


def select_pairs(
    outcomes: Sequence[Outcome],
    slots: int = 8,
    min_positive: float = 1.04,
    max_negative: float = 1 / 1.15,
) -> list[Pair]:
    """The pairs to summarize after one iteration: positives (best first), then negatives (worst
    first). A (slow, fast) pair reached through two plans is given once."""
    if slots <= 0:
        return []
    candidates = [representative(c) for c in _groups(outcomes).values()]
    positives = sorted(
        (o for o in candidates if o.faster and _ratio(o) > min_positive),
        key=lambda o: _order(o, -1),
    )
    negatives = sorted(
        (o for o in candidates if o.slower and _ratio(o) < max_negative),
        key=lambda o: _order(o, 1),
    )
    chosen = [_pair(o, ExperienceKind.POSITIVE) for o in _unique(positives)][: slots // 2]
    chosen += [_pair(o, ExperienceKind.NEGATIVE) for o in _unique(negatives)][: slots - len(chosen)]
    return chosen


def _pair(o: Outcome, kind: ExperienceKind) -> Pair:
    if kind is ExperienceKind.POSITIVE:
        return Pair(o.parent_hash, o.child_hash, _ratio(o), kind, o.parent_hash, o.plan_title)
    return Pair(o.child_hash, o.parent_hash, 1.0 / _ratio(o), kind, o.parent_hash, o.plan_title)


def _unique(ordered: Iterable[Outcome]) -> list[Outcome]:
    """Drop later outcomes for a (parent, child) already seen: two plans can yield one kernel."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for o in ordered:
        if (o.parent_hash, o.child_hash) not in seen:
            seen.add((o.parent_hash, o.child_hash))
            kept.append(o)
    return kept
