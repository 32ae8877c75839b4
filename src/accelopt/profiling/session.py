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
ratios, with the 95 % interval of that median (``stats.ci_half_width``), relative to it.

This module holds the record; the pure arithmetic is ``stats.py``; the worker's side is
``worker/retime.RetimeRun``, the parent's ``parent/evaluator.Evaluator.retime``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.stats import RoundSeries, ratio_estimate, round_ratios


@dataclass(frozen=True)
class Retiming:
    """Kernels timed interleaved in one worker on one device; the first is the reference.

    ``evaluations``: fresh, one per kernel, in the order given; never cached (each is a whole
    evaluation: its own checks, latency and interval). ``ratios``: per kernel, the median over
    rounds of (its round's fastest batch / the first kernel's); 1.0 for the first; None when
    that kernel or the first did not pass. ``ratio_ci``: the relative half-width of a 95 % interval
    of that median ratio (0.0 for the first; None where unknown). ``rounds``: rounds timed.
    ``worker_pid``: the worker process that timed them all (None when none answered).
    ``clean_rounds``: the rounds that gave figures; the others had a slice with no clean batch
    (``worker/disturbance.py``) and were dropped.
    """

    evaluations: tuple[Evaluation, ...]
    ratios: tuple[float | None, ...]
    ratio_ci: tuple[float | None, ...]
    rounds: int
    worker_pid: int | None = None
    clean_rounds: int | None = None  # rounds that gave figures (others disturbed: dropped)
    disturbed: bool = False  # too few: the ratios are of the slices' floors (``retime.py``)


def retiming(
    evaluations: Sequence[Evaluation],
    series: Sequence[RoundSeries],
    rounds: int,
    worker_pid: int | None = None,
    clean_rounds: int | None = None,
    disturbed: bool = False,
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
    return Retiming(
        tuple(evaluations), tuple(ratios), tuple(cis), rounds, worker_pid, clean_rounds, disturbed
    )
