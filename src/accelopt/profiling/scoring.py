"""From a worker's raw result to a verdict: pure functions, tested directly."""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelopt.backends.status import Status
from accelopt.hardware.roofline import SUSPICIOUS_FRACTION, is_suspicious, pct_of_peak


@dataclass(frozen=True)
class Verdict:
    status: Status
    error: str
    pct_of_peak: float | None


def verdict(
    status: str | None,
    error: str,
    latency_s: float | None,
    peak_s: float,
) -> Verdict:
    """A failed step keeps its status; a timed kernel above 105 % of peak is SUSPICIOUS. (A kernel
    that replays results is INCORRECT before it gets here: every timed call gets fresh inputs and
    a random few are checked, ``profiling/freshness.py``.)"""
    if status is not None:
        return Verdict(Status(status), error, None)
    if latency_s is None:  # --check-only
        return Verdict(Status.PASSED, "", None)
    pct = pct_of_peak(peak_s, latency_s) if latency_s > 0 else float("inf")
    if is_suspicious(pct):
        reason = (
            f"{pct:.0%} of peak is above the {SUSPICIOUS_FRACTION:.0%} the roofline allows: "
            "the kernel skips work (a cheat) or the cost model is wrong"
        )
        return Verdict(Status.SUSPICIOUS, reason, pct)
    return Verdict(Status.PASSED, "", pct)


def blames_the_ceiling(
    status: Status,
    pct: float | None,
) -> bool:
    """Whether a SUSPICIOUS verdict rests on the measured median beating the roofline, so a
    ceiling measured too low could explain it: re-measure it before accusing the kernel."""
    if status is not Status.SUSPICIOUS or pct is None or not is_suspicious(pct):
        return False
    return not math.isinf(pct)  # no time at all: no ceiling explains that


def geometric_mean_pct(fractions: list[float]) -> float | None:
    """The geometric mean of fractions of peak (the suite's summary per kernel kind), or None."""
    values = [f for f in fractions if f is not None and f > 0]
    if not values:
        return None
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))
