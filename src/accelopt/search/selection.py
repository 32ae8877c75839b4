"""Choosing the next beam: pure functions on evaluated candidates.

Correctness is a hard filter (only PASSED kernels compete). A child counts as faster than its
parent only beyond the measured noise, judged on the **log of the time ratio**, ``gain =
ln(parent / child)``, against each median's uncertainty in the same terms, ``ln(1 + u)`` for a
relative half-width ``u`` (``log_width``): a gain and an uncertainty both grow without bound, so a
busy machine, whose intervals run past 100 % of their medians, widens the noise without making
every gain impossible to see (a fraction of time saved, at most 1, was weighed against relative
half-widths of 1.35 and more, and a variant 31x faster was NOT_FASTER). ``gain <= noise`` (the
larger uncertainty of the two medians within their own timings, the relative half-width of a
median's 95 % confidence interval, IQR/median for evaluations that have none, never below
MIN_NOISE) is not a win. A win without a re-timing takes more: ``gain > 2 drift_noise``, where
each interval is also widened by the machine's drift between evaluations (``Evaluation.ci``): on
a VM whose neighbours move every median by 10-20 %, two separate evaluations of one kernel differ
by that much, and only a session that times both interleaved can tell a gain from the drift. In
between, the two are re-timed in one session before deciding. A child whose interval lies wholly
below its parent's is at least UNSURE, whatever the floors say; and a measurement that says it
was disturbed (too few of its batches ran with the machine to itself: ``Evaluation.disturbed``)
never decides a win: such a child is re-timed beside its parent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.stats import MISSABLE_GAIN, against_twin, faster, log_width
from accelopt.search.retimings import RetimingRecord
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
    """How well an evaluation knows its median within its own timing (``session_ci``: the
    reported interval adds the machine's drift between evaluations, which MIN_NOISE stands for
    here and a re-timing session removes), else its 95 % interval, else its IQR/median."""
    if evaluation.session_ci is not None:
        return evaluation.session_ci
    ci = evaluation.ci
    return ci if ci is not None else evaluation.noise or 0.0


def noise_of(*evaluations: Evaluation) -> float:
    """The largest relative uncertainty of the evaluations' medians within their own timings,
    never below MIN_NOISE."""
    return max([MIN_NOISE, *(uncertainty(e) for e in evaluations)])


def drift_noise(*evaluations: Evaluation) -> float:
    """The uncertainty of separate evaluations' medians: each one's reported interval, which adds
    the machine's drift between evaluations to its own timing's (``noise_of`` where none)."""
    return max([noise_of(*evaluations), *(e.ci or 0.0 for e in evaluations)])


def log_gain(child: Evaluation, parent: Evaluation) -> float | None:
    """``ln(parent / child)`` of two PASSED medians (positive: the child is faster), else None."""
    if not (child.passed and parent.passed and child.latency_s and parent.latency_s):
        return None
    return math.log(parent.latency_s / child.latency_s)


def wholly_below(child: Evaluation, parent: Evaluation) -> bool:
    """Whether the child's reported 95 % interval lies wholly below its parent's."""
    if child.ci_high_s is None or parent.ci_low_s is None:
        return False
    return child.ci_high_s < parent.ci_low_s


def compare(child: Evaluation, parent: Evaluation) -> Comparison:
    """Is the child faster than its parent beyond the measured noise (in log space)?"""
    gain = log_gain(child, parent)
    if gain is None:
        return Comparison.NOT_FASTER
    if child.disturbed or parent.disturbed:  # never decided on a disturbed figure
        return Comparison.UNSURE if child.disturbed or gain > 0 else Comparison.NOT_FASTER
    if gain > 2 * log_width(drift_noise(child, parent)):
        return Comparison.FASTER
    if gain <= log_width(noise_of(child, parent)) and not wholly_below(child, parent):
        return Comparison.NOT_FASTER
    return Comparison.UNSURE


def slower(child: Evaluation, parent: Evaluation) -> bool:
    """Whether the child is slower than its parent beyond their timings' noise (twice
    ``noise_of``, in log space): what a negative lesson needs besides its own 1/1.15
    (``search.memory``). A slowdown is never re-timed, and a lesson is a hint to the planner,
    not a verdict on the best, so the drift between evaluations that a win must clear is not
    asked of it. A disturbed child is judged by its estimate undisturbed (``floor_s``: its
    batches less the longest wait of one of its threads) against its parent's figure, which a
    disturbance only raises."""
    gain = log_gain(child, parent)
    if gain is None:
        return False
    if child.disturbed:
        if not child.floor_s or not parent.latency_s:
            return False
        gain = math.log(parent.latency_s / child.floor_s)
    return -gain > 2 * log_width(noise_of(child, parent))


# Re-timed interleaved in one session, a parent and its child share the machine's state, so the
# 2 % between separate evaluations does not apply; a gain is believed beyond twice the session's
# own interval of the ratio, and never below 2 x SESSION_MIN_NOISE (``profiling.session``).


def session_compare(ratio: float | None, ratio_ci: float | None) -> Comparison:
    """The verdict of a one-session re-timing: ``ratio`` = child / parent time (median over
    interleaved rounds; a time ratio, below 1 is faster: what users read is its inverse, the
    speedup, ``variants.VariantRow.session_speedup``), ``ratio_ci`` its interval's relative
    half-width."""
    return Comparison.FASTER if faster(ratio, ratio_ci) else Comparison.NOT_FASTER


def decide(child: Candidate, parent: Candidate | None, decided: Mapping[str, Comparison]) -> bool:
    """Whether ``child`` beat ``parent`` beyond the noise: the re-timing's verdict where it was
    re-timed against that parent, else the comparison of the two evaluations."""
    if parent is None or parent.latency is None:
        return child.latency is not None
    if child.kernel.parent_hash == parent.hash and child.hash in decided:
        return decided[child.hash] is Comparison.FASTER
    return compare(child.evaluation, parent.evaluation) is Comparison.FASTER


def effective_latency(
    child: Candidate, parent: Candidate | None, decided: Mapping[str, Comparison] | None = None
) -> float | None:
    """What a candidate is ranked by: its latency, except that a child that is not faster than
    its parent beyond the noise gets no credit for its apparent gain, and one that is (by its
    re-timing's verdict, or its evaluation) ranks ahead of its parent even where its own figure
    says otherwise (a disturbed figure, or one taken apart from its parent's while the machine
    drifted): at most the parent's latency less the smallest gain a session can believe."""
    if child.latency is None:
        return None
    if parent is None or parent.latency is None:
        return child.latency
    if decide(child, parent, decided or {}):  # ahead of its parent, whatever its own figure
        return min(child.latency, parent.latency * (1.0 - MISSABLE_GAIN))
    return max(child.latency, parent.latency)


def next_beam(
    elite: Sequence[Candidate],
    children: Sequence[Candidate],
    width: int,
    *,
    parents: Mapping[str, Candidate] | None = None,
    decided: Mapping[str, Comparison] | None = None,
) -> list[Candidate]:
    """The best ``width`` of the elite and the children together (elitism), distinct by hash,
    PASSED only, ranked by effective latency against each child's parent (looked up in
    ``parents``, default the elite); on a tie the elite (then the earlier candidate) wins."""
    lineage = {p.hash: p for p in elite} | dict(parents or {})
    ranked: list[tuple[float, int, Candidate]] = []
    seen: set[str] = set()
    for order, cand in enumerate([*elite, *children]):
        if cand.hash in seen:
            continue
        seen.add(cand.hash)
        parent = None if order < len(elite) else lineage.get(cand.kernel.parent_hash)
        latency = effective_latency(cand, parent, decided)
        if latency is not None:
            ranked.append((latency, order, cand))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [cand for _, _, cand in ranked[:width]]


def best_of_plan(
    kernels: Sequence[Candidate],
    parent: Candidate,
    limit: int | None = 1,
    decided: Mapping[str, Comparison] | None = None,
) -> list[Candidate]:
    """The ``limit`` best of the kernels written for one plan of ``parent`` (by effective
    latency; PASSED only; None: all): the published rule keeps one child per (parent, plan), so
    that K siblings of one plan cannot fill the beam."""
    scored = [(effective_latency(k, parent, decided), i, k) for i, k in enumerate(kernels)]
    ranked = sorted((s, i, k) for s, i, k in scored if s is not None)
    return [k for _, _, k in ranked[:limit]]


def fastest(candidates: Sequence[Candidate]) -> Candidate | None:
    """The fastest PASSED candidate by median latency alone (``best`` starts from it when the
    current best has no latency)."""
    passed = [c for c in candidates if c.latency is not None]
    return min(passed, key=lambda c: c.latency or 0.0) if passed else None


def best(
    current: Candidate,
    candidates: Sequence[Candidate],
    decided: Mapping[str, Comparison] | None = None,
) -> Candidate:
    """The run's best after ``candidates`` were seen: ``current`` unless one beats it beyond the
    noise (a child of ``current`` by its re-timing's verdict), the fastest such first."""
    if current.latency is None:
        current = fastest(candidates) or current
    for cand in sorted(
        (c for c in candidates if c.latency is not None), key=lambda c: c.latency or 0.0
    ):
        if cand.hash != current.hash and decide(cand, current, decided or {}):
            current = cand
    return current


# A session whose rounds were all disturbed (no slice of a kernel ever left alone: calls longer
# than a time slice beside more work than cores) compares the slices' floors, each batch less the
# longest wait of one of its threads: an estimate, believed only for a gain beyond 2 x 10 %.
DISTURBED_NOISE = 0.10


def session_verdicts(session: RetimingRecord) -> list[tuple[float | None, float | None]]:
    """Each child's time ratio (below 1 is faster) and interval from a stored session
    (``settling.retime``), against the faster of the parent's two processes where the session
    timed a twin (a session stored before twins: against the parent's only one)."""
    ratios, cis = session.ratios, session.ratio_ci
    if session.disturbed:  # the slices' floors: believed only beyond DISTURBED_NOISE
        cis = tuple(None if c is None else max(c, DISTURBED_NOISE) for c in cis)
    if not session.twin:
        return list(zip(ratios[1:], cis[1:], strict=True))
    return [against_twin(r, c, ratios[1], cis[1]) for r, c in zip(ratios[2:], cis[2:], strict=True)]
