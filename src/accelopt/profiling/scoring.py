"""From a worker's raw result to a verdict: pure functions, tested directly."""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelopt.backends.status import Status
from accelopt.hardware.roofline import SUSPICIOUS_FRACTION, is_suspicious, pct_of_peak

# The repeat calls are few and single calls are noisy: they are judged with more slack than the
# median. A replayed result is typically many times faster than the roofline (a copy instead of a
# matmul), so this still catches it.
REPLAY_FRACTION = 1.5


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
    repeat_s: float | None = None,
) -> Verdict:
    """A failed step keeps its status; a timed kernel above 105 % of peak is SUSPICIOUS, and so is
    one whose extra call on buffers it had already seen (``repeat_s``) was: it replays results."""
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
    if repeat_s is not None:
        repeat_pct = pct_of_peak(peak_s, repeat_s) if repeat_s > 0 else float("inf")
        if repeat_pct > REPLAY_FRACTION:
            reason = (
                f"calls on buffers it had already seen ran at {repeat_pct:.0%} of peak (their "
                "median), far above what the roofline allows: the kernel replays results"
            )
            return Verdict(Status.SUSPICIOUS, reason, pct)
    return Verdict(Status.PASSED, "", pct)


def geometric_mean_pct(fractions: list[float]) -> float | None:
    """The geometric mean of fractions of peak (the suite's summary per kernel kind), or None."""
    values = [f for f in fractions if f is not None and f > 0]
    if not values:
        return None
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))
