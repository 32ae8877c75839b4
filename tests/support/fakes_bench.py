"""Evaluations made up for the suite table's tests (no worker)."""

from __future__ import annotations

from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation


def evaluation_of(
    problem: Problem, kind: str, hw: HardwareSpec, latency_s: float,
    status: Status = Status.PASSED,
) -> Evaluation:  # fmt: skip
    return Evaluation(
        problem=problem.name, workload="small", backend=kind, kernel=kind, kernel_hash=kind,
        hardware=hw.key(), status=status, error="" if status is Status.PASSED else "failed",
        latency_s=latency_s, peak_s=1e-4, bound="memory",
        tolerance=problem.tolerance, seeds=[1],
    )  # fmt: skip
