"""The pure statistics of a measurement, below both the parent and the worker: the latency
estimator (a point and its interval) and the timing summary, the thresholds of a busy machine, the
arithmetic of a re-timing session (``session.py`` says how its rounds are read) and the geometric
mean that combines workloads (``composite.py``). Numbers in, numbers out: no records, no I/O. The
worker imports only this module, the protocol and the config from profiling's top
(``tests/test_layers.py``).

Every timing is summarized by one ``Estimator``, ``ESTIMATOR`` (``MEDIAN``: the median and its
distribution-free order-statistic interval), through this module's functions: ``point``,
``estimate``, ``interval``, ``ci_half_width``, ``summarize`` and ``ratio_estimate``. The stop rule,
racing, the slices, the freshness audit, re-timing, calibration and the model's sessions all call
them, so another estimator (a trimmed mean, say) is one assignment here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

Samples = Sequence[float] | np.ndarray  # seconds per call (or ratios), in the order timed

# -- timing: the latency estimator and the summary ----------------------------------------------

Z95 = 1.959964  # two-sided 95 % normal quantile


@dataclass(frozen=True)
class Estimate:
    """What samples say of a latency (or a ratio): ``point`` and its 95 % confidence interval
    [``low``, ``high``]."""

    point: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """The interval's half-width relative to the point (0.01: known to ±1 %; 0 where the
        point is not above 0)."""
        return (self.high - self.low) / (2 * self.point) if self.point > 0 else 0.0


class Estimator(Protocol):
    """How samples become a latency: a point and its 95 % interval."""

    name: str
    min_samples: int  # fewer: the interval spans (about) the extremes, its width tells nothing

    def point(self, samples: Samples) -> float:
        """The point alone (what a threshold or a slice's figure needs)."""
        ...

    def estimate(self, samples: Samples) -> Estimate:
        """The point and its interval; ``samples`` must not be empty."""
        ...


def median_ci_ranks(n: int, z: float = Z95) -> tuple[int, int]:
    """0-based ranks of the sorted samples that bound a distribution-free confidence interval of
    the median (the binomial order-statistic interval, normal approximation): no assumption on
    the shape of the timing distribution, which is skewed by interruptions."""
    half = z * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)
    high = min(n - 1, math.ceil(1 + n / 2 + half) - 1)
    return low, max(high, 0)


@dataclass(frozen=True)
class OrderStatisticMedian:
    """The median, with the order-statistic interval of ``median_ci_ranks``."""

    name: str = "median"
    min_samples: int = 6  # below it the ranks are the extremes
    z: float = Z95

    def point(self, samples: Samples) -> float:
        return float(np.median(np.asarray(samples, dtype=np.float64)))

    def estimate(self, samples: Samples) -> Estimate:
        ordered = np.sort(np.asarray(samples, dtype=np.float64))
        low, high = median_ci_ranks(len(ordered), self.z)
        return Estimate(float(np.median(ordered)), float(ordered[low]), float(ordered[high]))


MEDIAN = OrderStatisticMedian()
ESTIMATOR: Estimator = MEDIAN  # the one every timing is summarized by


def point(samples: Samples) -> float:
    """The latency ``samples`` say (``ESTIMATOR``'s point)."""
    return ESTIMATOR.point(samples)


def estimate(samples: Samples) -> Estimate:
    """The latency ``samples`` say, and its 95 % interval (``ESTIMATOR``)."""
    return ESTIMATOR.estimate(samples)


def interval(samples: Samples) -> tuple[float, float]:
    """The 95 % confidence interval of the latency ``samples`` say."""
    found = ESTIMATOR.estimate(samples)
    return found.low, found.high


def ci_half_width(samples: Samples) -> float:
    """The relative half-width of the latency's 95 % interval (inf with fewer samples than the
    estimator's ``min_samples``, where the interval spans the extremes)."""
    if len(samples) < ESTIMATOR.min_samples:
        return math.inf
    return ESTIMATOR.estimate(samples).half_width


@dataclass(frozen=True)
class TimingStats:
    latency_s: float  # the estimator's point (the median)
    min_s: float
    noise: float  # IQR / latency
    calls: int
    ci_low_s: float  # 95 % confidence interval of the latency
    ci_high_s: float

    @property
    def ci(self) -> float:
        """The interval's half-width relative to the latency (0.01: known to ±1 %)."""
        return Estimate(self.latency_s, self.ci_low_s, self.ci_high_s).half_width


def summarize(samples: Sequence[float]) -> TimingStats:
    if not samples:
        raise ValueError("no timed calls")
    found = estimate(samples)
    q1, q3 = np.percentile(np.asarray(samples, dtype=np.float64), [25, 75])
    noise = float((q3 - q1) / found.point) if found.point > 0 else 0.0
    return TimingStats(found.point, float(min(samples)), noise, len(samples), found.low, found.high)


# -- the machine: how much others took while a kernel was timed (``worker/contention.py``) -----

# Enough to move a timing: other processes took a tenth of the CPUs, or steal a twentieth.
BUSY_OTHERS = 0.1
BUSY_STEAL = 0.05


def is_busy(others: float | None, steal: float | None) -> bool:
    """Whether what others took of the machine (unknown: None) was enough to move a timing."""
    return (others or 0.0) > BUSY_OTHERS or (steal or 0.0) > BUSY_STEAL


# -- re-timing sessions (``session.py``) ---------------------------------------------------------

MIN_ROUNDS = 8  # rounds a session times, at least (MEDIAN needs 6 ratios for an interval)
MIN_SLICE_S = 0.02  # a kernel's slice of a round lasts at least this long (about ten batches)

# per round: a kernel's fastest seconds per call (None: absent)
RoundSeries = Sequence[float | None]


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


def log_width(relative: float) -> float:
    """A relative half-width (0.02: +- 2 %) as a width in log space, comparable with a gain
    ``ln(reference / kernel)``: ``ln(1 + relative)``, about ``relative`` while it is small. A
    gain and a width in log space both grow without bound; a fraction of time saved (at most 1)
    weighed against relative half-widths (above 1 on a busy machine) could never win."""
    return math.log1p(max(0.0, relative))


def faster(ratio: float | None, ratio_ci: float | None) -> bool:
    """Whether a session says a kernel is faster than the reference: the log of its time ratio
    below 0 by more than twice the ratio's interval (and twice SESSION_MIN_NOISE), in log
    space (``log_width``)."""
    if ratio is None or ratio <= 0:
        return False
    return -math.log(ratio) > 2 * log_width(max(SESSION_MIN_NOISE, ratio_ci or 0.0))


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
    return faster(ratio, ratio_ci) or ratio / (1.0 + ratio_ci) >= 1.0 - MISSABLE_GAIN


def ratio_estimate(ratios: Sequence[float]) -> tuple[float | None, float | None]:
    """The ratio the rounds say (``ESTIMATOR``'s point) and its 95 % interval's relative
    half-width (None: too few rounds)."""
    if not ratios:
        return None, None
    found = estimate(ratios)
    known = len(ratios) >= ESTIMATOR.min_samples
    return found.point, found.half_width if known else None


# -- several workloads (``composite.py``) ------------------------------------------------------


def geomean(values: Sequence[float | None], *, skip_missing: bool = False) -> float | None:
    """The geometric mean of positive values; None when there are none. A value that is None or
    not positive (no figure: a kernel that failed) makes the mean None, since a combined figure
    is only as good as its parts; with ``skip_missing`` (a summary over kernels, some of which
    failed) it is left out instead."""
    if skip_missing:
        values = [v for v in values if v is not None and v > 0]
    if not values or any(v is None or v <= 0 for v in values):
        return None
    known = [float(v) for v in values if v is not None]
    if len(known) == 1:
        return known[0]
    return math.exp(sum(math.log(v) for v in known) / len(known))
