"""Re-scoring evaluations against another spec of the same device: pure functions.

A ceiling a kernel beat is re-measured and raised in the middle of a run (``Evaluator._scored``),
and the evaluations scored before the raise keep the old figure. One table, one report, one run
is scored against one ceiling: the commands re-score every evaluation against the spec they end
with (the highest: a cached ceiling only rises) before they show or store anything.

What changes is what depends on the cached ceiling: ``hardware`` (the spec's key), the cached
roofline (``Evaluation.cached``) and, for an evaluation scored against the cached
ceiling (``ceiling == "cached"``), its headline figure (``peak_s``, ``pct_of_peak`` and its
interval, ``bound``). A calibrated figure is the control's, timed with the kernel, and stays. A
kernel called SUSPICIOUS only for beating the old roofline that does not beat the new one passes;
a PASSED one stays PASSED; any other verdict stays as it was.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from accelopt.backends.status import Status
from accelopt.formatting import giga
from accelopt.hardware.roofline import Bound
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.composite import SEPARATOR
from accelopt.profiling.evaluation import CeilingFigure, Evaluation
from accelopt.profiling.parent.scoring import blames_the_ceiling, verdict, workload_roofline
from accelopt.profiling.stats import geomean

CACHED_MARK = "*"  # marks a % of peak against the cached ceiling, in tables that mix the two

# The start of ``scoring.verdict``'s SUSPICIOUS message: "117% of peak is above the 105% ..."
_BEATS_THE_ROOFLINE = re.compile(r"^(-?[\d,.]+|inf)% of peak is above the [^:]*roofline allows: ")


def device_name(hardware_key: str) -> str:
    """The device of a ``HardwareSpec.key()`` (``f"{name}-{digest}"``)."""
    return hardware_key.rsplit("-", 1)[0]


def rescore(evaluation: Evaluation, problem: Problem, hardware: HardwareSpec) -> Evaluation:
    """``evaluation`` scored against ``hardware``, another spec of the device it was scored on
    (the module says what changes). ``problem``: the evaluation's. Unchanged when it
    was scored against ``hardware`` already; a ValueError for another problem or device."""
    if evaluation.problem != problem.name:
        raise ValueError(f"an evaluation of {evaluation.problem} re-scored as {problem.name}")
    key = hardware.key()
    if evaluation.hardware == key:
        return evaluation
    if device_name(evaluation.hardware) != hardware.name:
        raise ValueError(
            f"an evaluation on {evaluation.hardware} cannot be re-scored against the ceilings of "
            f"another device ({key})"
        )
    cached_peak, bound = _roofline(evaluation, problem, hardware)
    update: dict[str, Any] = {
        "hardware": key,
        "cached": CeilingFigure(peak_s=cached_peak, pct=cached_pct(evaluation)),
    }
    cached = not evaluation.calibrated
    if cached:
        update |= {"peak_s": cached_peak, "bound": bound}
    latency = evaluation.latency_s
    if latency is None or (evaluation.pct_of_peak is None and cached_pct(evaluation) is None):
        return evaluation.model_copy(update=update)  # a failure, or untimed: no figure to redo
    pct = cached_peak / latency if latency > 0 else math.inf
    update["cached"] = CeilingFigure(peak_s=cached_peak, pct=pct)
    if cached:
        update |= {"pct_of_peak": pct, **_interval(evaluation, cached_peak)}
    update |= _status(evaluation, latency, cached_peak)
    return evaluation.model_copy(update=update)


def rescore_all(
    evaluations: Sequence[Evaluation], problems: Mapping[str, Problem], hardware: HardwareSpec
) -> list[Evaluation]:
    """Each evaluation re-scored against ``hardware`` (``rescore``), in order; ``problems``: by
    name, every evaluation's (a KeyError names one missing)."""
    return [rescore(e, problems[e.problem], hardware) for e in evaluations]


def lowers_a_ceiling(
    evaluations: Sequence[Evaluation], rescored: Sequence[Evaluation], rel: float = 1e-9
) -> bool:
    """Whether re-scoring lowered a ceiling one of ``evaluations`` was scored against (its cached
    roofline time grew): the spec re-scored against is not the highest, as when the evaluations
    were scored where the caller did not see a ceiling raised (the ray profiler's actors)."""
    return any(
        cached_peak(after) > cached_peak(before) * (1 + rel)
        for before, after in zip(evaluations, rescored, strict=True)
    )


def _roofline(
    evaluation: Evaluation, problem: Problem, hardware: HardwareSpec
) -> tuple[float, Bound]:
    """The cached roofline time of the evaluation's workload on ``hardware`` and its bound; for
    one combined over several workloads (``composite``: "a+b"), the geometric mean of theirs,
    as ``composite.combine`` makes it (the bound stays the first workload's)."""
    if evaluation.workload in problem.workloads or SEPARATOR not in evaluation.workload:
        roof = workload_roofline(problem, evaluation.workload, hardware)
        return roof.peak_s, roof.bound
    names = evaluation.workload.split(SEPARATOR)
    peaks = [workload_roofline(problem, w, hardware).peak_s for w in names]
    return geomean(peaks) or peaks[0], evaluation.bound


def _interval(evaluation: Evaluation, peak_s: float) -> dict[str, float | None]:
    """The % of peak's 95 % interval at ``peak_s``, as ``scoring.figures`` makes it (none where
    the evaluation had none)."""
    low_s, high_s = evaluation.ci_low_s, evaluation.ci_high_s
    if evaluation.pct_low is None and evaluation.pct_high is None:
        return {}
    if low_s is None or high_s is None or high_s <= 0:
        return {"pct_low": None, "pct_high": None}
    return {"pct_low": peak_s / high_s, "pct_high": peak_s / low_s if low_s > 0 else math.inf}


def beats_the_roofline(evaluation: Evaluation) -> bool:
    """Whether the evaluation is SUSPICIOUS only for its median beating the cached roofline
    (``scoring.verdict``'s message), not for what the worker caught it doing."""
    own = cached_pct(evaluation)
    pct = own if own is not None else evaluation.pct_of_peak
    return blames_the_ceiling(evaluation.status, pct) and bool(
        _BEATS_THE_ROOFLINE.match(evaluation.error)
    )


def _status(evaluation: Evaluation, latency: float, peak_s: float) -> dict[str, Any]:
    """The verdict against the new roofline: a kernel SUSPICIOUS for beating the old one passes
    unless it beats this one too (then its message gives the new figure); others keep theirs."""
    if not beats_the_roofline(evaluation):
        return {}
    judged = verdict(None, "", latency, peak_s)
    if judged.status is Status.PASSED:
        return {"status": Status.PASSED, "error": ""}
    old_reason = verdict(None, "", latency, cached_peak(evaluation)).error
    rest = evaluation.error[len(old_reason) :] if evaluation.error.startswith(old_reason) else ""
    return {"error": judged.error + rest}


def cached_peak(evaluation: Evaluation) -> float:
    """The roofline time at the cached ceiling (an evaluation from before the two were kept
    apart: its ``peak_s``, then always against the cached ceiling)."""
    return evaluation.cached.peak_s if evaluation.cached is not None else evaluation.peak_s


def cached_pct(evaluation: Evaluation) -> float | None:
    """The % of peak against the cached ceiling (None where there is none: untimed, or failed)."""
    return evaluation.cached.pct if evaluation.cached is not None else None


def ceiling_notes(evaluations: Sequence[Evaluation], hardware: HardwareSpec | None) -> list[str]:
    """The lines under a table of ``evaluations`` (all scored against ``hardware``) that say
    what its % of peak is against (a % against the cached ceiling ends with ``CACHED_MARK``),
    and its cached peak."""
    timed = [e for e in evaluations if e.pct_of_peak is not None]
    calibrated = any(e.calibrated for e in timed)
    parts = []
    if calibrated:
        parts.append(
            "calibrated against a control timed with each kernel (README: What a measurement means)"
        )
    if any(not e.calibrated for e in timed):
        parts.append(
            f"{CACHED_MARK} against the cached ceiling (cached peak; a geomean's "
            f"n{CACHED_MARK}: that many of its kernels)"
        )
    lines = [f"% of peak: {'; '.join(parts)}"] if parts else []
    if hardware is not None:
        lines.append(
            f"cached peak: the roofline at {hardware.name}'s cached ceilings: matmul "
            f"{giga(hardware.matmul_rate, 'FLOP/s')}, vector {giga(hardware.vector_rate, 'FLOP/s')}"
            f", bandwidth {giga(hardware.bandwidth, 'B/s')}"
        )
    return lines
