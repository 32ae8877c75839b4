"""The figures of one evaluation as the report pages show them: one ceiling per table.

Every table of a run's report is against the run's cached ceilings (the ones its Ceilings table
lists): a row's % of peak is its ``peak_s`` (the roofline time at those ceilings) over its
latency, and the row shows that ``peak_s``. Where a control was timed with the kernel, its
calibrated figure has a table of its own, with its own peak column (``Calibrated``). The achieved
rate of the unit that bounds the kernel (GFLOP/s or GB/s) is the work that unit pays over the
latency: the ceiling's rate times the % of peak. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.hardware.spec import HardwareSpec
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.rescoring import cached_pct, cached_peak

# The ceiling that bounds a kernel of each bound, and the unit of its rate
RATE_OF = {
    "matmul": ("matmul_rate", "FLOP/s"),
    "vector": ("vector_rate", "FLOP/s"),
    "memory": ("bandwidth", "B/s"),
}


@dataclass(frozen=True)
class Cached:
    """An evaluation against the cached ceilings: ``pct`` = ``peak_s`` / latency (None when it
    was not timed), its 95 % interval, and the achieved rate of its bound's unit."""

    peak_s: float
    pct: float | None
    low: float | None
    high: float | None
    achieved: float | None  # FLOP/s or B/s (``unit``); None without the ceilings
    unit: str


@dataclass(frozen=True)
class Calibrated:
    """An evaluation against the control timed with it: its own roofline time and %."""

    peak_s: float
    pct: float | None
    low: float | None
    high: float | None
    control: str  # what the control was, as the evaluation says
    control_rate: float | None
    headline: bool  # the search ranked the kernel by this figure (``Evaluation.ceiling``)


def timed(e: Evaluation) -> bool:
    """Whether the evaluation has a figure: it was timed to the end (passed, or suspicious)."""
    return bool(e.latency_s) and (e.pct_of_peak is not None or cached_pct(e) is not None)


def cached(e: Evaluation, spec: HardwareSpec | None) -> Cached:
    """``e`` against the cached ceilings; ``spec``: the run's ceilings (for the achieved rate)."""
    peak = cached_peak(e)
    field, unit = RATE_OF.get(str(e.bound), ("bandwidth", "B/s"))
    if not timed(e) or not e.latency_s:
        return Cached(peak, None, None, None, None, unit)
    pct = peak / e.latency_s
    low, high = _interval(peak, e)
    achieved = getattr(spec, field) * pct if spec is not None else None
    return Cached(peak, pct, low, high, achieved, unit)


def calibrated(e: Evaluation) -> Calibrated | None:
    """``e`` against its control, or None where it has no calibrated figure."""
    figure = e.calibration
    if figure is None:
        return None
    pct = figure.peak_s / e.latency_s if timed(e) and e.latency_s else None
    low, high = _interval(figure.peak_s, e) if pct is not None else (None, None)
    return Calibrated(figure.peak_s, pct, low, high, e.control, figure.rate, e.calibrated)


def _interval(peak_s: float, e: Evaluation) -> tuple[float | None, float | None]:
    """% of peak at ``peak_s`` over the latency's 95 % interval (the drift included)."""
    low_s, high_s = e.ci_low_s, e.ci_high_s
    if low_s is None or high_s is None or low_s <= 0 or high_s <= 0:
        return None, None
    return peak_s / high_s, peak_s / low_s


def run_spec(
    recorded: HardwareSpec | None, key: str, here: HardwareSpec | None
) -> HardwareSpec | None:
    """The ceilings a run is scored against (its ``hardware`` is ``key``): those it recorded,
    else this machine's if they are the same, else None (not known here)."""
    for spec in (recorded, here):
        if spec is not None and spec.key() == key:
            return spec
    return None
