"""One run, one ceiling: a run whose device's ceiling was raised while it ran (a kernel beat it:
``Evaluator``) is moved onto the raised spec, its evaluations re-scored against it; so is a run
resumed after this machine's ceilings were re-measured higher (``re_measured_higher``)."""

from __future__ import annotations

from accelopt.errors import UserError
from accelopt.hardware.spec import MEASUREMENT_NOTES, HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.parent.rescoring import lowers_a_ceiling, rescore_all
from accelopt.search.evaluations import move_run, run_evaluations
from accelopt.search.selection import Candidate
from accelopt.search.spec import run_problem
from accelopt.search.workloads import run_workloads
from accelopt.store.records import RunRecord, RunStatus
from accelopt.store.store import Store


def rescore_run(
    store: Store, run: RunRecord, problem: Problem, hardware: HardwareSpec
) -> RunRecord:
    """One run is scored against one ceiling: where a ceiling a kernel beat was raised during
    the run (``Evaluator``), the run's evaluations on each of its workloads are re-scored
    against ``hardware``, the spec it ended with (``profiling.parent.rescoring``), and the run
    moved onto it in the store (``Store.rescore_run``: its evaluations, its hardware and
    recorded spec, its iterations' best % of peak). Nothing changes when every evaluation is
    against ``hardware`` already, or when ``hardware`` is below a ceiling one was scored against
    (a raise the profiler did not see: the ray profiler's actors). The run as it is now."""
    found = [
        e
        for workload in run_workloads(run).all
        for e in run_evaluations(store, run, workload=workload).values()
    ]
    key = hardware.key()
    if run.hardware == key and all(e.hardware == key for e in found):
        return run
    rescored = rescore_all(found, {problem.name: problem}, hardware)
    if lowers_a_ceiling(found, rescored):
        return run
    move_run(store, run, hardware, rescored)
    return store.get_run(run.id) or run


CEILINGS = ("matmul_rate", "vector_rate", "bandwidth")


def re_measured_higher(recorded: HardwareSpec, current: HardwareSpec) -> bool:
    """Whether ``current`` is the same device as ``recorded`` (name, backend, ISA, caches) with its
    ceilings re-measured, none lower: a run scored against ``recorded`` (e.g. measured while the
    machine was busy) may move onto it without any kernel reading faster than it did. A lower
    re-measurement is no ground to move: it would make kernels already measured look faster."""
    if current.key() == recorded.key():
        return False
    rest = set(CEILINGS) | set(MEASUREMENT_NOTES)
    same = current.model_dump(exclude=rest) == recorded.model_dump(exclude=rest)
    return same and all(getattr(current, c) >= getattr(recorded, c) for c in CEILINGS)


def rescore_stored_run(store: Store, run: RunRecord, hardware: HardwareSpec | None) -> RunRecord:
    """A run whose stored evaluations are against several ceilings of its device (a session
    stopped before ``rescore_run`` at its end, or one recorded before runs were re-scored) moved
    onto ``hardware`` (this machine's spec now, which keeps a raised ceiling) where that is one
    of the specs they were scored against: what ``accelopt report`` shows. Unchanged otherwise,
    and while the run is running (its session re-scores it at its end)."""
    if hardware is None or run.status is RunStatus.RUNNING:
        return run
    keys = {
        e.hardware
        for workload in run_workloads(run).all
        for e in run_evaluations(store, run, workload=workload).values()
    }
    if len(keys | {run.hardware}) <= 1 or hardware.key() not in keys:
        return run
    try:
        problem = run_problem(store, run)
    except (UserError, LookupError):  # the problem changed or is gone: leave the figures as stored
        return run
    return rescore_run(store, run, problem, hardware)


def rescored(store: Store, run: RunRecord, candidate: Candidate) -> Candidate:
    """``candidate`` with its evaluation as the store now holds it (re-scored by
    ``rescore_run``; unchanged when the store has none)."""
    evaluation = run_evaluations(store, run).get(candidate.hash)
    if evaluation is None or evaluation.hardware == candidate.evaluation.hardware:
        return candidate
    return Candidate(candidate.kernel, evaluation)
