"""From a worker's result to a scored ``Evaluation``: pure functions, tested directly.

The one place a measurement meets the roofline: ``workload_roofline`` (the problem's cost model at
a workload on a hardware spec, docs/architecture.md, Contracts) gives both the deadlines' scale
and the score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelopt.backends.status import Status
from accelopt.hardware.roofline import (
    SUSPICIOUS_FRACTION,
    Roofline,
    is_suspicious,
    pct_of_peak,
    roofline,
)
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Cost, Problem
from accelopt.profiling import stats
from accelopt.profiling.evaluation import CeilingFigure, ControlFigure, Evaluation
from accelopt.profiling.parent.calibration import calibrate, latency_half_width, work
from accelopt.profiling.parent.controls import version as control_version
from accelopt.profiling.profiler import Job
from accelopt.profiling.worker.protocol import ControlSpec, KernelResult
from accelopt.redaction import redact


def workload_roofline(problem: Problem, workload: str, hardware: HardwareSpec) -> Roofline:
    """The roofline of ``problem`` at ``workload`` on ``hardware``."""
    return roofline(problem.cost.at(problem.workload(workload).sizes), hardware)


@dataclass(frozen=True)
class Verdict:
    status: Status
    error: str
    pct_of_peak: float | None


def verdict(
    status: Status | str | None,
    error: str,
    latency_s: float | None,
    peak_s: float,
) -> Verdict:
    """A failed step keeps its status; a timed kernel above 105 % of peak is SUSPICIOUS. (A kernel
    that replays results is INCORRECT before it gets here: every timed call gets fresh inputs and
    a random few are checked element by element; one clearly faster on inputs changed in a few
    places than on inputs new throughout comes SUSPICIOUS from the worker, with no % of peak:
    ``profiling/worker/freshness.py``.)"""
    if status is not None:  # a failure always says why, if only that nothing did
        said = error or f"{Status(status).value}, and neither the kernel nor the worker said why"
        return Verdict(Status(status), said, None)
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


def build_evaluation(
    job: Job,
    hardware: HardwareSpec,
    threads: int,
    result: KernelResult,
    seeds: Sequence[int] = (),
    wall_s: float | None = None,
    secrets: Sequence[str] = (),
    drift: float = 0.0,
    control: ControlSpec | None = None,
    headline: str = "compute",
) -> Evaluation:
    """The ``Evaluation`` of a worker's ``result`` (or of a failure the service itself reports)
    for ``job``, scored against its roofline on ``hardware`` (the verdict) and, where the worker
    timed ``control`` with it, against the control's figure (the calibrated % of peak, which the
    search and the tables use: ``figures``); ``drift``: the machine's drift between evaluations,
    folded into the intervals; ``secrets`` are redacted from the error and the log."""
    kernel, problem, workload = job
    cost = problem.cost.at(problem.workload(workload).sizes)
    roof = roofline(cost, hardware)
    judged = verdict(result.status, result.error, result.latency_s, roof.peak_s)
    measured = result.measured() | {"log": redact(result.log, secrets)}
    return Evaluation(
        **measured,
        problem=problem.name,
        workload=workload,
        backend=kernel.backend,
        problem_version=problem.fingerprint,
        kernel=kernel.name,
        kernel_hash=kernel.hash,
        hardware=hardware.key(),
        status=judged.status,
        error=redact(judged.error, secrets),
        bound=roof.bound,
        **figures(_scaled(result, hardware, roof), cost, roof, judged, drift, control, headline),
        tolerance=problem.tolerance,
        seeds=list(seeds),
        threads=threads,
        wall_s=wall_s,
    )


CEILING_OF = {"matmul": "matmul_rate", "vector": "vector_rate", "memory": "bandwidth"}


def _scaled(result: KernelResult, hardware: HardwareSpec, roof: Roofline) -> KernelResult:
    """``result`` with its controls scaled as its bound's ceiling was where a library beat the
    micro-benchmark (``HardwareSpec.library_scale``): a control is that micro-benchmark."""
    scale = hardware.library_scale.get(CEILING_OF[str(roof.bound)], 1.0)
    if scale == 1.0 or not result.control_rates:
        return result
    rates = [r * scale if r is not None else None for r in result.control_rates]
    return result.model_copy(update={"control_rates": rates})


def figures(
    result: KernelResult,
    cost: Cost,
    roof: Roofline,
    judged: Verdict,
    drift: float,
    control: ControlSpec | None,
    headline: str = "compute",
) -> dict[str, Any]:
    """The evaluation's figures: the latency's stated interval; the % of peak against the cached
    ceiling, and against the control where it allows (``calibration.py``); and the one the search
    and the tables use, with the ceiling it used: the calibrated one where ``headline`` says so
    for the problem's bound (``EvalConfig.headline``), else the cached one."""
    against_cached = CeilingFigure(peak_s=roof.peak_s, pct=judged.pct_of_peak)
    cached = {
        "peak_s": roof.peak_s,
        "pct_of_peak": judged.pct_of_peak,
        "ceiling": "cached",
        "cached": against_cached,
    }
    latency = result.latency_s
    if latency is None or latency <= 0:
        return {**cached, "ci_low_s": result.ci_low_s, "ci_high_s": result.ci_high_s}
    session = _session_ci(result, latency)
    half = latency_half_width(session, drift)
    # a factor either way (a latency is a scale: its interval never reaches zero)
    stated = {
        "ci_low_s": latency / (1 + half),
        "ci_high_s": latency * (1 + half),
        "session_ci": session,
        "drift": drift,
    }
    bounds = _pct_bounds(roof.peak_s, stated["ci_low_s"], stated["ci_high_s"], judged.pct_of_peak)
    units, passed = work(cost, str(roof.bound)), judged.status is Status.PASSED
    found, why = _calibrated(result, units, passed, control, drift, session)
    if found is None:
        return {**cached, **stated, **bounds, "control": why}
    figure = ControlFigure(
        peak_s=found.peak_s, pct=found.pct, low=found.low, high=found.high, rate=found.rate
    )
    calibrated = {"calibration": figure, "control": _described(control, roof.bound, found.rate)}
    if not uses_calibrated(headline, str(roof.bound)):
        return {**cached, **stated, **bounds, **calibrated}
    return {
        **cached,
        **stated,
        **calibrated,
        "peak_s": found.peak_s,
        "pct_of_peak": found.pct,
        "pct_low": found.low,
        "pct_high": found.high,
        "ceiling": "calibrated",
    }


def uses_calibrated(headline: str, bound: str) -> bool:
    """Whether the search and the tables use the calibrated % of peak for a problem of ``bound``
    (``EvalConfig.headline``)."""
    return headline == "all" or (headline == "compute" and bound in ("matmul", "vector"))


def _session_ci(result: KernelResult, latency: float) -> float:
    if result.ci_low_s is None or result.ci_high_s is None:
        return 0.0
    return (result.ci_high_s - result.ci_low_s) / (2 * latency)


def _pct_bounds(
    peak_s: float, low_s: float, high_s: float, pct: float | None
) -> dict[str, float | None]:
    if pct is None or high_s <= 0:
        return {"pct_low": None, "pct_high": None}
    return {"pct_low": peak_s / high_s, "pct_high": peak_s / low_s if low_s > 0 else math.inf}


def _calibrated(
    result: KernelResult,
    units: float,
    passed: bool,
    control: ControlSpec | None,
    drift: float,
    session: float,
) -> tuple[Any, str]:
    """The calibrated figure of a kernel whose cost pays ``units`` at its bound, or None and why
    there is none."""
    if control is None:
        return None, result.control_note or "no control for this device: scored against the cache"
    if not passed:
        return None, "not calibrated: the verdict is not PASSED"
    if result.control_note and not any(r for r in result.control_rates if r):
        return None, result.control_note
    found, why = calibrate(
        units, result.latency_s or 0.0, session, result.control_rates, result.slice_medians, drift
    )
    if found is None and result.control_note:
        why = f"{why} ({result.control_note})"
    return found, why


def _described(control: ControlSpec | None, bound: str, rate: float) -> str:
    unit = "GB/s" if bound == "memory" else "GFLOP/s"
    what = control.describe() if control is not None else "control"
    return f"{what}: {rate / 1e9:,.1f} {unit} while timed"


def control_kind(control: ControlSpec) -> str:
    """The control's name in the machine's drift history (``hardware/drift.py``), with the
    version of its source (another version's figures are not comparable)."""
    name = f"memory {control.reads}:{control.writes}" if control.kind == "memory" else control.kind
    return f"{name} @{control_version()}"


def control_figure(result: KernelResult) -> float | None:
    """The estimate (``stats.ESTIMATOR``: the median) of the result's undisturbed controls (None
    without any)."""
    good = [r for r in result.control_rates if r is not None and r > 0]
    return stats.point(good) if good else None
