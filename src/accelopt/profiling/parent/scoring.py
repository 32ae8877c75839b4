"""From a worker's result to a scored ``Evaluation``: pure functions, tested directly.

The one place a measurement meets the roofline: ``workload_roofline`` (the problem's cost model at
a workload on a hardware spec, DESIGN.md) gives both the deadlines' scale and the score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.backends.status import Status
from accelopt.hardware.roofline import (
    SUSPICIOUS_FRACTION,
    Roofline,
    is_suspicious,
    pct_of_peak,
    roofline,
)
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import Job
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.redaction import redact


def workload_roofline(problem: Problem, workload: str, hardware: HardwareSpec) -> Roofline:
    """The roofline of ``problem`` at ``workload`` on ``hardware``."""
    return roofline(problem.cost.evaluate(problem.workload(workload).sizes), hardware)


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


def build_evaluation(
    job: Job,
    hardware: HardwareSpec,
    threads: int,
    result: KernelResult,
    seeds: Sequence[int] = (),
    wall_s: float | None = None,
    secrets: Sequence[str] = (),
) -> Evaluation:
    """The ``Evaluation`` of a worker's ``result`` (or of a failure the service itself reports)
    for ``job``, scored against its roofline on ``hardware``; ``secrets`` are redacted
    from the error and the log."""
    kernel, problem, workload = job
    roof = workload_roofline(problem, workload, hardware)
    judged = verdict(result.status, result.error, result.latency_s, roof.peak_s)
    return Evaluation(
        problem=problem.name,
        workload=workload,
        backend=kernel.backend,
        problem_version=problem.fingerprint,
        kernel=kernel.name,
        kernel_hash=kernel.hash,
        hardware=hardware.key(),
        status=judged.status,
        error=redact(judged.error, secrets),
        latency_s=result.latency_s,
        min_s=result.min_s,
        noise=result.noise,
        calls=result.calls,
        ci_low_s=result.ci_low_s,
        ci_high_s=result.ci_high_s,
        load_others=result.load_others,
        load_steal=result.load_steal,
        peak_s=roof.peak_s,
        pct_of_peak=judged.pct_of_peak,
        bound=roof.bound,
        max_rel_err=result.max_rel_err,
        tolerance=problem.tolerance,
        seeds=list(seeds),
        threads=threads,
        rotation_sets=result.rotation_sets,
        batch_calls=result.batch_calls,
        compile_s=result.compile_s,
        compile_cached=result.compile_cached,
        check_s=result.check_s,
        time_s=result.time_s,
        wall_s=wall_s,
        network_isolated=result.network_isolated,
        isolation=result.isolation,
        log=redact(result.log, secrets),
    )
