"""Where a run's kernels sit on the roofline of its ceilings, and the roofline time of each of its
workloads: from the problem's cost model (pure, but for ``problem_of``, which reads the problem)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelopt.errors import UserError
from accelopt.hardware.roofline import roofline
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports.plots import RooflinePoint
from accelopt.search.spec import run_problem
from accelopt.store.records import KernelOrigin, KernelRecord, RunRecord
from accelopt.store.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Work:
    """What the problem's cost model says one call of the kernel does on one workload."""

    workload: str
    flops: float  # matmul and vector FLOPs
    bytes: float

    @property
    def placeable(self) -> bool:
        return self.flops > 0 and self.bytes > 0


def problem_of(store: Store, run: RunRecord) -> Problem | None:
    """The run's problem as it was when the run started; None where it cannot be read (it
    changed, or is gone): the report then has no roofline chart."""
    try:
        return run_problem(store, run)
    except (UserError, OSError, ValueError) as exc:
        log.info("run %s: no roofline chart (%s)", run.id, exc)
        return None


def work_of(problem: Problem, workload: str) -> Work | None:
    if not problem.has_workload(workload):
        return None
    cost = problem.cost.at(problem.workload(workload).sizes)
    return Work(workload, cost.matmul_flops + cost.vector_flops, cost.bytes)


def peaks(problem: Problem, workloads: Sequence[str], spec: HardwareSpec) -> dict[str, float]:
    """Each workload's roofline time at ``spec``'s ceilings (those the problem knows)."""
    return {
        w: roofline(problem.cost.at(problem.workload(w).sizes), spec).peak_s
        for w in workloads
        if problem.has_workload(w)
    }


def roofline_points(
    work: Work,
    kernels: Sequence[KernelRecord],
    evaluations: Mapping[str, Evaluation],
    best_hash: str,
    references: Sequence[Evaluation] = (),
) -> list[RooflinePoint]:
    """Every timed kernel of the run on ``work``'s workload (other candidates first, then the
    baseline, the best and the references, so that those are drawn on top)."""
    intensity = work.flops / work.bytes

    def point(label: str, kind: str, e: Evaluation | None) -> list[RooflinePoint]:
        if e is None or not e.passed or not e.latency_s:
            return []
        return [RooflinePoint(label, kind, intensity, work.flops / e.latency_s)]

    base = next((k.hash for k in kernels if k.origin == KernelOrigin.BASELINE), "")
    others = [
        p
        for k in kernels
        if k.hash not in (base, best_hash)
        for p in point("", "candidate", evaluations.get(k.hash))
    ]
    best_label = "best (the baseline)" if best_hash == base else "best"
    mine = point("baseline", "baseline", evaluations.get(base)) if best_hash != base else []
    mine += point(best_label, "best", evaluations.get(best_hash))
    theirs = [p for e in references for p in point(e.kernel, e.kernel, e)]
    return others + mine + theirs
