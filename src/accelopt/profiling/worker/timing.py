"""Timing statistics and the rotation of input/output sets: pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelopt.backends.buffers import COLD_SPAN_BYTES

MAX_ROTATION_SETS = 64
MIN_ROTATION_SETS = 2
LLC_SPAN = 4  # the sets together span at least this many last-level caches


Z95 = 1.959964  # two-sided 95 % normal quantile


@dataclass(frozen=True)
class TimingStats:
    latency_s: float  # median
    min_s: float
    noise: float  # IQR / median
    calls: int
    ci_low_s: float  # 95 % confidence interval of the median
    ci_high_s: float

    @property
    def ci(self) -> float:
        """The interval's half-width relative to the median (0.01: the median is known to ±1 %)."""
        return (self.ci_high_s - self.ci_low_s) / (2 * self.latency_s) if self.latency_s else 0.0


def median_ci_ranks(n: int, z: float = Z95) -> tuple[int, int]:
    """0-based ranks of the sorted samples that bound a distribution-free confidence interval of
    the median (the binomial order-statistic interval, normal approximation): no assumption on
    the shape of the timing distribution, which is skewed by interruptions."""
    half = z * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)
    high = min(n - 1, math.ceil(1 + n / 2 + half) - 1)
    return low, max(high, 0)


def median_ci(samples: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """The 95 % confidence interval of the median of ``samples``."""
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    low, high = median_ci_ranks(len(ordered))
    return float(ordered[low]), float(ordered[high])


def ci_half_width(samples: Sequence[float] | np.ndarray) -> float:
    """The relative half-width of the median's 95 % interval (inf with fewer than 6 samples,
    where the interval spans the extremes)."""
    if len(samples) < 6:
        return math.inf
    low, high = median_ci(samples)
    median = float(np.median(samples))
    return (high - low) / (2 * median) if median > 0 else 0.0


def summarize(samples: Sequence[float]) -> TimingStats:
    if not samples:
        raise ValueError("no timed calls")
    q1, median, q3 = np.percentile(np.asarray(samples, dtype=np.float64), [25, 50, 75])
    noise = float((q3 - q1) / median) if median > 0 else 0.0
    low, high = median_ci(samples)
    return TimingStats(float(median), float(min(samples)), noise, len(samples), low, high)


def rotation_sets(set_bytes: int, llc_bytes: int | None, budget_bytes: int) -> int:
    """How many input/output sets to rotate so that the timed calls start from memory.

    At least two sets, together spanning COLD_SPAN_BYTES or four last-level caches, whichever is
    larger. Caches here do not behave as their size suggests: AMD's L3 is a victim cache, and on
    this VM a working set of four L3s still streams at twice the bandwidth of half a gigabyte
    (measured: a non-temporal triad at 130 GB/s over 128 MiB, 60 GB/s over 384 MiB; adamw 0.8 ms
    with one set, 1.8 ms with several). The bandwidth ceiling is measured over arrays of the same
    span, so kernels and ceiling see the same memory. Capped by the memory budget and at
    MAX_ROTATION_SETS (very small problems then stay partly cache-resident, as on any device).
    """
    llc = llc_bytes or 32 << 20
    span = max(COLD_SPAN_BYTES, LLC_SPAN * llc)
    wanted = max(MIN_ROTATION_SETS, math.ceil(span / max(set_bytes, 1)))
    affordable = max(1, budget_bytes // max(set_bytes, 1))
    return int(max(1, min(wanted, affordable, MAX_ROTATION_SETS)))
