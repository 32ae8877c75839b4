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
# No ceiling is measured this far too low (a busy machine halves or thirds one): calls on seen
# buffers this much faster than the roofline replay results, whatever else the timing shows.
REPLAY_CERTAIN_FRACTION = 10.0


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
    repeat_pct = _repeat_pct(peak_s, repeat_s)
    if repeat_pct is not None and repeat_pct > REPLAY_FRACTION:
        reason = (
            f"calls on buffers it had already seen ran at {repeat_pct:.0%} of peak (their "
            "median), far above what the roofline allows: the kernel replays results"
        )
        return Verdict(Status.SUSPICIOUS, reason, pct)
    return Verdict(Status.PASSED, "", pct)


def _repeat_pct(peak_s: float, repeat_s: float | None) -> float | None:
    if repeat_s is None:
        return None
    return pct_of_peak(peak_s, repeat_s) if repeat_s > 0 else float("inf")


def replays(latency_s: float | None, peak_s: float, repeat_s: float | None) -> bool:
    """Whether the calls on buffers the kernel had already seen give it away as a replayer: they
    beat the roofline by far, and either ran far faster than the kernel's own median or beat the
    roofline more than any ceiling measured too low explains. (Beating the roofline by
    ``REPLAY_FRACTION`` alone would not do: against a ceiling measured on a busy machine, half the
    truth, an honest kernel's repeats beat it too.)"""
    repeat_pct = _repeat_pct(peak_s, repeat_s)
    if repeat_pct is None or repeat_pct <= REPLAY_FRACTION:
        return False
    if repeat_pct > REPLAY_CERTAIN_FRACTION or latency_s is None:
        return True
    assert repeat_s is not None
    return repeat_s * REPLAY_FRACTION < latency_s


def blames_the_ceiling(
    status: Status,
    pct: float | None,
    latency_s: float | None,
    peak_s: float,
    repeat_s: float | None,
) -> bool:
    """Whether a SUSPICIOUS verdict rests on the measured median beating the roofline alone, so a
    ceiling measured too low could explain it: re-measure that ceiling before accusing the kernel.
    A kernel caught replaying results is SUSPICIOUS whatever the ceiling."""
    if status is not Status.SUSPICIOUS or pct is None or not is_suspicious(pct):
        return False
    if math.isinf(pct):  # no time at all: no ceiling explains that
        return False
    return not replays(latency_s, peak_s, repeat_s)


def geometric_mean_pct(fractions: list[float]) -> float | None:
    """The geometric mean of fractions of peak (the suite's summary per kernel kind), or None."""
    values = [f for f in fractions if f is not None and f > 0]
    if not values:
        return None
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))
