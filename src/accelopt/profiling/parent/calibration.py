"""Calibrated % of peak and intervals that hold between evaluations: pure functions.

The worker times a control with the kernel (``worker/control.py``): before, between and after
the slices of its timing. Here the figures become:

- the **calibrated % of peak**: the roofline time at the control's figure (the median of the
  controls) over the kernel's median latency. A neighbour, the clock or memory contention that
  slows the kernel slows the control too, and cancels in the ratio;
- its **interval**: within the evaluation, the spread of the slices' own calibrated figures (each
  slice's median latency against the controls on either side of it), and no narrower than the
  latency's and the controls' own intervals combined; then the machine's drift between
  evaluations (``hardware/drift.py``) that the control does not cancel, taken as the share of the
  kernel's time not spent at its bound: a kernel at 100 % of its bound is limited only by what the
  control tracks, one at 10 % mostly by other things (caches, latency, the scheduler);
- the **latency's interval**: this timing's own, and the machine's whole drift: a latency measured
  now is off by as much as the machine moves between evaluations.

Half-widths combine as independent errors do (root sum of squares), and an interval of
half-width h around a figure x is [x / (1 + h), x (1 + h)]: a factor either way, as times and
rates are scales (never below zero however wide). All fractions: 0.01 = 1 %.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.problems.records import Cost
from accelopt.profiling import stats

MIN_CONTROLS = 2  # calibrated only with this many undisturbed controls ...
# A kernel near its bound may beat a control of a few milliseconds by a little (the control's
# best run, timed while the machine moves); beyond this the control does not bound it.
CONTROL_SLACK = 1.25
VALID_SHARE = 0.5  # ... and at least this share of them undisturbed
# Two-sided 95 % Student t quantiles by degrees of freedom (beyond the table: the normal's).
T95 = {
    1: 12.71,
    2: 4.30,
    3: 3.18,
    4: 2.78,
    5: 2.57,
    6: 2.45,
    7: 2.36,
    8: 2.31,
    9: 2.26,
    10: 2.23,
    12: 2.18,
    15: 2.13,
    20: 2.09,
    30: 2.04,
}


@dataclass(frozen=True)
class Calibrated:
    """A kernel's calibrated figure: ``pct`` = ``peak_s`` / latency, ``peak_s`` the roofline
    time at the control's ``rate``, [``low``, ``high``] its stated 95 % interval."""

    peak_s: float
    pct: float
    low: float
    high: float
    rate: float


def t95(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``dof`` degrees of freedom."""
    if dof < 1:
        return math.inf
    known = [d for d in T95 if d <= dof]
    return T95[max(known)] if dof <= 30 else 1.96


def work(cost: Cost, bound: str) -> float:
    """What the bound's ceiling pays for: FLOPs (matmul, vector) or bytes (memory)."""
    return {"matmul": cost.matmul_flops, "vector": cost.vector_flops}.get(bound, cost.bytes)


def valid_rates(rates: Sequence[float | None]) -> tuple[list[float], str]:
    """The undisturbed control figures, or [] and why they cannot calibrate."""
    good = [r for r in rates if r is not None and r > 0]
    if len(good) < MIN_CONTROLS or len(good) < VALID_SHARE * len(rates):
        return [], f"{len(good)} of {len(rates)} controls undisturbed: not calibrated"
    return good, ""


def slice_figures(
    work_units: float, rates: Sequence[float | None], slice_medians: Sequence[float | None]
) -> list[float]:
    """Each slice's calibrated figure: its median latency against the mean of the undisturbed
    controls on either side of it (slice i lies between controls i and i + 1)."""
    figures = []
    for i, median in enumerate(slice_medians):
        around = [r for r in rates[i : i + 2] if r is not None and r > 0]
        if median is not None and median > 0 and around:
            figures.append(work_units / statistics.fmean(around) / median)
    return figures


def mean_half_width(values: Sequence[float]) -> float | None:
    """The relative 95 % half-width of the mean of ``values`` (None with fewer than two)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    sd = statistics.stdev(values)
    return t95(len(values) - 1) * sd / math.sqrt(len(values)) / mean if mean > 0 else None


def spread_half_width(values: Sequence[float]) -> float:
    """Half the relative range of ``values`` around their point (``stats.point``: the median;
    0 for one value)."""
    middle = stats.point(values)
    return (max(values) - min(values)) / (2 * middle) if middle > 0 else 0.0


def rss(*parts: float) -> float:
    """Independent relative errors combined: the root of the sum of their squares."""
    return math.sqrt(sum(p * p for p in parts))


def latency_half_width(session: float, drift: float) -> float:
    """The latency's stated half-width: this timing's and the machine's whole drift."""
    return rss(session, drift)


def calibrate(
    work_units: float,
    latency_s: float,
    session: float,
    rates: Sequence[float | None],
    slice_medians: Sequence[float | None],
    drift: float,
) -> tuple[Calibrated | None, str]:
    """The calibrated figure of a kernel timed at ``latency_s`` (its median known to
    ±``session`` within the timing) with the controls ``rates``; or None and why not."""
    good, why = valid_rates(rates)
    if not good:
        return None, why
    if work_units <= 0 or latency_s <= 0:
        return None, "the problem pays nothing at its bound: not calibrated"
    rate = stats.point(good)
    peak_s = work_units / rate
    pct = peak_s / latency_s
    if pct > CONTROL_SLACK:
        return None, (
            f"the kernel reached {pct:.0%} of the control's figure, which therefore does not bound "
            "it: scored against the cached ceiling"
        )
    slices = mean_half_width(slice_figures(work_units, rates, slice_medians)) or 0.0
    within = max(slices, rss(session, spread_half_width(good)))
    half = rss(within, drift * (1.0 - min(pct, 1.0)))
    return Calibrated(peak_s, pct, pct / (1 + half), pct * (1 + half), rate), ""
