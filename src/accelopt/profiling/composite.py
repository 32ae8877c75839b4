"""One kernel scored over several workloads: the evaluations of each, combined into one.

A run may tune on several workloads of a problem (``optimize --workload A --workload B``). The
search compares kernels by one figure, so a kernel's evaluations on the tuned workloads are
combined (pure functions, no I/O):

- it passes only if it passed on every one; otherwise it has the status, error and log of the
  first workload it failed on, the error naming that workload;
- its latency is the geometric mean of the latencies, and its % of peak the geometric mean of
  the % of peak (the same ranking: each is peak time / latency, so the geomean of % of peak is
  geomean(peak) / geomean(latency));
- its uncertainty is the largest of the workloads' (a geometric mean of medians is known to
  within the worst of them), so the search's noise rules stay conservative.

A single evaluation is returned unchanged, so a one-workload run is exactly what it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelopt.profiling.evaluation import CeilingFigure, ControlFigure, Evaluation
from accelopt.profiling.stats import geomean

SEPARATOR = "+"  # the combined evaluation's workload: "a+b"


def combine(evaluations: Sequence[Evaluation], workloads: Sequence[str] = ()) -> Evaluation:
    """The evaluations of one kernel on several workloads (tuned order) as one evaluation.
    ``workloads``: all those it is scored on, when a failure on one stopped the others from
    being measured (default: those of the evaluations)."""
    if not evaluations:
        raise ValueError("nothing to combine")
    names = list(workloads) or [e.workload for e in evaluations]
    if len(names) == 1:
        return evaluations[0]
    first = evaluations[0]
    name = SEPARATOR.join(names)
    failed = next((e for e in evaluations if not e.passed), None)
    if failed is not None:
        return failed.model_copy(
            update={"workload": name, "error": f"on workload {failed.workload}: {failed.error}"}
        )
    latency = geomean([e.latency_s or 0.0 for e in evaluations])
    uncertainty = max((_half_width(e) for e in evaluations), default=0.0)
    return first.model_copy(
        update={
            "workload": name,
            "latency_s": latency,
            "min_s": geomean([e.min_s or 0.0 for e in evaluations]),
            "noise": _largest(e.noise for e in evaluations),
            "calls": min(e.calls for e in evaluations),
            "ci_low_s": latency * (1 - uncertainty) if latency else None,
            "ci_high_s": latency * (1 + uncertainty) if latency else None,
            "session_ci": _largest(e.session_ci for e in evaluations),
            "drift": _largest(e.drift for e in evaluations),
            "raced": any(e.raced for e in evaluations),
            **_headline(evaluations, first),
            "max_rel_err": max((e.max_rel_err or 0.0) for e in evaluations),
            "load_others": _largest(e.load_others for e in evaluations),
            "load_steal": _largest(e.load_steal for e in evaluations),
            "compile_s": _total(e.compile_s for e in evaluations),
            "check_s": _total(e.check_s for e in evaluations),
            "time_s": _total(e.time_s for e in evaluations),
            "wall_s": _total(e.wall_s for e in evaluations),
        }
    )


def combine_ratios(
    ratios: Sequence[float | None], cis: Sequence[float | None]
) -> tuple[float | None, float | None]:
    """One child's re-timing over several workloads: the geometric mean of its time ratios to
    the parent (None when one is unknown) and the largest interval."""
    known = [r for r in ratios if r is not None]
    if len(known) != len(ratios):
        return None, None
    ci = None if any(c is None for c in cis) else max((c or 0.0) for c in cis)
    return geomean(known), ci


def _headline(evaluations: Sequence[Evaluation], first: Evaluation) -> dict[str, object]:
    """The combined % of peak and its roofline: calibrated where every workload's is, else
    against the cached ceiling for all (one figure never mixes the two)."""
    cached = [e.cached or CeilingFigure(peak_s=e.peak_s) for e in evaluations]
    cached_peak = geomean([c.peak_s for c in cached])
    # a record from before calibrated figures has its cached % in pct_of_peak
    cached_pct = geomean(
        [_or(c.pct, e.pct_of_peak) for c, e in zip(cached, evaluations, strict=True)]
    )
    calibrations = [e.calibration for e in evaluations]
    calibration = None
    if all(c is not None for c in calibrations):
        peaks = geomean([c.peak_s for c in calibrations if c is not None])
        pcts = geomean([(c.pct or 0.0) for c in calibrations if c is not None])
        calibration = ControlFigure(peak_s=peaks, pct=pcts) if peaks is not None else None
    common = {
        "cached": CeilingFigure(peak_s=cached_peak, pct=cached_pct) if cached_peak else None,
        "calibration": calibration,
        "pct_low": None,
        "pct_high": None,
    }
    if all(e.calibrated for e in evaluations):
        peak = geomean([e.peak_s for e in evaluations]) or first.peak_s
        pct = geomean([e.pct_of_peak or 0.0 for e in evaluations])
        return {**common, "ceiling": "calibrated", "peak_s": peak, "pct_of_peak": pct}
    why = "not calibrated on every workload: scored against the cached ceiling"
    return {
        **common,
        "ceiling": "cached",
        "peak_s": cached_peak or first.peak_s,
        "pct_of_peak": cached_pct,
        "control": why,
    }


def _or(value: float | None, fallback: float | None) -> float:
    return value if value is not None else fallback or 0.0


def _half_width(e: Evaluation) -> float:
    ci = e.ci
    return ci if ci is not None else e.noise or 0.0


def _largest(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _total(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
