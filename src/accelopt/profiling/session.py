"""Re-timing: kernels timed interleaved in one worker, on one device, under one device lock.

Two evaluations of two kernels made apart (other worker processes, other moments, maybe other
machines) differ by more than the kernels do when the kernels are close: the noise between
processes does not average out. A re-timing session builds, loads and checks every kernel as an
evaluation does, then times them in rounds, and compares each kernel with the first, the
reference, round by round. A round times the reference for a slice before and after every other
kernel's slice (A B A C A, the children's order reversed every other round, the last slice of the
reference carried into the next round: ``flanked``), and a kernel's ratio in that round is the
fastest batch of its slice (its seconds per call) over the mean of the reference's slices either
side of it, so the machine's drift across three neighbouring slices cancels. In rounds of one
slice each (A B C, then C B A) drift cancelled only over pairs of rounds: identical copies of a
loop read 0.974-1.062 of the reference on this project's Intel VM, and sessions of three timed on
to their cap (55-80 rounds, 5-7 s); flanked, 0.995-1.016 in 11-16 rounds (1.7-2.3 s). Without a
reference (it failed), rounds go A B C / C B A (``round_order``). The fastest, not the median: a
slice in which another
process takes a core stalls most of a parallel kernel's calls by a scheduler time slice
(milliseconds, measured here on 2 cores), and stalls only ever add time, so the fastest batch of a
slice is the one the machine left alone. The ratio reported is the median of those per-round
ratios, with the 95 % interval of that median (``timing.ci_half_width``), relative to it.

This module holds the record and the pure arithmetic; the worker's side is
``worker/retime.RetimeRun``, the parent's ``parent/evaluator.Evaluator.retime``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.worker.timing import ci_half_width

MIN_ROUNDS = 8  # rounds a session times, at least (ci_half_width needs 6 ratios for an interval)
MIN_SLICE_S = 0.02  # a kernel's slice of a round lasts at least this long (about ten batches)

# per round: a kernel's fastest seconds per call (None: absent)
RoundSeries = Sequence[float | None]


@dataclass(frozen=True)
class Retiming:
    """Kernels timed interleaved in one worker on one device; the first is the reference.

    ``evaluations``: fresh, one per kernel, in the order given; never cached (each is a whole
    evaluation: its own checks, latency and interval). ``ratios``: per kernel, the median over
    rounds of (its round's fastest batch / the first kernel's); 1.0 for the first; None when
    that kernel or the first did not pass. ``ratio_ci``: the relative half-width of a 95 % interval
    of that median ratio (0.0 for the first; None where unknown). ``rounds``: rounds timed.
    ``worker_pid``: the worker process that timed them all (None when none answered).
    """

    evaluations: tuple[Evaluation, ...]
    ratios: tuple[float | None, ...]
    ratio_ci: tuple[float | None, ...]
    rounds: int
    worker_pid: int | None = None


def round_order(round_index: int, count: int) -> list[int]:
    """The kernels' order in a round: forward, then backward (A B, B A, A B, ...)."""
    forward = list(range(count))
    return forward if round_index % 2 == 0 else forward[::-1]


def flanked(child_s: float, before_s: float, after_s: float) -> float:
    """A kernel's round figure relative to the reference's slices just before and after its own:
    its fastest batch over their mean, so a drift of the machine's speed across the three
    slices, if even, cancels."""
    return child_s / ((before_s + after_s) / 2)


def slice_seconds(min_time_s: float, min_rounds: int) -> float:
    """How long each kernel is timed per round: ``min_time_s`` spread over the first rounds."""
    return max(MIN_SLICE_S, min_time_s / max(1, min_rounds))


def round_ratios(reference: RoundSeries, other: RoundSeries) -> list[float]:
    """``other`` over ``reference``, in the rounds where both were timed."""
    pairs = zip(reference, other, strict=False)
    return [o / r for r, o in pairs if r is not None and r > 0 and o is not None]


# A gain is believed beyond twice the session's own interval of the ratio, never below
# 2 x SESSION_MIN_NOISE (``search.selection.session_compare``): identical copies of one loop, each
# in a kernel process of its own, read 0.974-1.062 of each other in sessions on this project's
# Intel VM before rounds were flanked (two at 0.979 +- 0.9 % and 0.974 +- 1.3 %, which a 1 % floor
# believed), 0.986-1.045 after (sessions of four, 2026-12-04); 1.0 % apart on a quiet Zen 4.
SESSION_MIN_NOISE = 0.015


def faster(ratio: float | None, ratio_ci: float | None) -> bool:
    """Whether a session says a kernel is faster than the reference: its time ratio below 1 by
    more than twice the ratio's interval (and twice SESSION_MIN_NOISE)."""
    if ratio is None or ratio <= 0:
        return False
    return 1.0 - ratio > 2 * max(SESSION_MIN_NOISE, ratio_ci or 0.0)


def against_twin(
    ratio: float | None, ratio_ci: float | None, twin: float | None, twin_ci: float | None
) -> tuple[float | None, float | None]:
    """A child's ratio to the faster of the parent's two kernel processes in one session
    (``twin``: the second's ratio to the first, with its interval ``twin_ci``). Each process has
    memory of its own, and a parent's process that happens to run slower lends every child its
    gain: two identical copies read 0.963 and 0.968 of their parent in one session on this
    project's Intel VM (once in about 30 sessions of four). Where the twin is the faster, the
    child is compared with it, within both intervals (root-sum-squared)."""
    if ratio is None or twin is None or twin <= 0 or twin >= 1.0:
        return ratio, ratio_ci
    if ratio_ci is None or twin_ci is None:
        return ratio / twin, None
    return ratio / twin, math.hypot(ratio_ci, twin_ci)


# What an early stop may leave unseen: a session stops on a look-alike once its interval shows
# no gain larger than this; a wider interval times on (to the time cap) whatever its median says.
# The smallest gain ``faster`` can believe: timing on to rule out a smaller one decides nothing.
MISSABLE_GAIN = 2 * SESSION_MIN_NOISE


def decided(ratio: float | None, ratio_ci: float | None) -> bool:
    """Whether timing longer cannot change ``faster`` beyond MISSABLE_GAIN: faster already (a
    narrower interval keeps it so), or the interval's fast end within MISSABLE_GAIN of 1 or
    above. A median above 1 decides nothing on its own: eight noisy rounds put a look-alike at
    1.38 (+- 48 %) on a loaded machine, an interval that also holds a gain of a quarter."""
    if ratio is None or ratio_ci is None:
        return False
    return faster(ratio, ratio_ci) or ratio * (1.0 - ratio_ci) >= 1.0 - MISSABLE_GAIN


def ratio_estimate(ratios: Sequence[float]) -> tuple[float | None, float | None]:
    """The median ratio and its 95 % interval's relative half-width (None: too few rounds)."""
    if not ratios:
        return None, None
    half = ci_half_width(ratios)
    return float(np.median(ratios)), None if math.isinf(half) else half


def retiming(
    evaluations: Sequence[Evaluation],
    series: Sequence[RoundSeries],
    rounds: int,
    worker_pid: int | None = None,
) -> Retiming:
    """The record of a session: ``series`` holds each kernel's round figures (empty for a kernel
    never timed); a kernel compares with the first only where both passed."""
    ratios: list[float | None] = []
    cis: list[float | None] = []
    reference_ok = bool(evaluations) and evaluations[0].passed
    for i, evaluation in enumerate(evaluations):
        if not (reference_ok and evaluation.passed):
            ratios.append(None)
            cis.append(None)
        elif i == 0:
            ratios.append(1.0)
            cis.append(0.0)
        else:
            ratio, ci = ratio_estimate(round_ratios(series[0], series[i]))
            ratios.append(ratio)
            cis.append(ci)
    return Retiming(tuple(evaluations), tuple(ratios), tuple(cis), rounds, worker_pid)
