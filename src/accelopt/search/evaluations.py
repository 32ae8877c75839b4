"""A run's evaluations as the search and its readers see them: per kernel, over the workloads the
run tunes on, against the ceilings the run is scored against.

The store caches evaluations per (kernel, problem, workload, hardware, harness version) and finds
a run's on one workload (``Store.evaluations_of``); what a run's workloads and problem version
are is the run's spec, read here (``RunSpec``), so the store never reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelopt.hardware.spec import HardwareSpec
from accelopt.profiling import faults
from accelopt.profiling.composite import combine
from accelopt.profiling.config import harness_key
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.spec import RunSpec
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


def run_evaluations(
    store: Store,
    run: RunRecord | str,
    workload: str | None = None,
    harness_version: str | None = None,
) -> dict[str, Evaluation]:
    """Kernel hash -> evaluation of the run's kernels, in the order they were added ({} for a run
    the store does not hold).

    ``workload``: that workload's evaluations; by default the run's tuned workloads combined per
    kernel (``profiling.composite.combine``): a kernel is present once it failed on one of them
    or was evaluated on all. The harness version is the running one, with the fingerprint of the
    run's problem for a workspace problem."""
    record = store.get_run(run) if isinstance(run, str) else run
    if record is None:
        return {}
    spec = RunSpec.of(record)
    version = harness_version or harness_key(spec.problem_version)
    if workload is not None:
        return _final_or_disturbed(store, record, workload, version)
    tuned = spec.tuned(record)
    found = [_final_or_disturbed(store, record, w, version) for w in tuned]
    if len(found) == 1:
        return found[0]
    combined = {}
    for kernel_hash in found[0]:
        present = [f[kernel_hash] for f in found if kernel_hash in f]
        if len(present) == len(found) or not all(e.passed for e in present):
            combined[kernel_hash] = combine(present, tuned)
    return combined


def _final_or_disturbed(
    store: Store, record: RunRecord, workload: str, version: str
) -> dict[str, Evaluation]:
    """The run's final evaluations on ``workload``, and for a kernel that has none, the disturbed
    one the run measured (kept apart: ``parent.cache.disturbed_apart``; marked ``disturbed``)."""
    final = _earned(store.evaluations_of(record, workload, version))
    apart = _earned(store.evaluations_of(record, workload, f"{version}+disturbed"))
    missing = {h: e for h, e in apart.items() if h not in final}
    if not missing:
        return final
    order = {h: i for i, h in enumerate([*final, *apart])}
    return dict(sorted({**final, **missing}.items(), key=lambda item: order[item[0]]))


def _earned(found: dict[str, Evaluation]) -> dict[str, Evaluation]:
    """Without the service's failures an older cache kept as verdicts (``profiling.faults``):
    those kernels are measured again."""
    return {h: e for h, e in found.items() if not faults.not_earned(e)}


def run_raced(store: Store, run: RunRecord | str) -> set[str]:
    """The hashes of the run's kernels whose timing stopped early inside it (raced, cached apart
    from final evaluations: ``CachedProfiler.race``), on the run's first workload."""
    record = store.get_run(run) if isinstance(run, str) else run
    if record is None:
        return set()
    spec = RunSpec.of(record)
    return store.raced_kernels(record, spec.tuned(record)[0], harness_key(spec.problem_version))


def move_run(
    store: Store, run: RunRecord, hardware: HardwareSpec, evaluations: Sequence[Evaluation]
) -> None:
    """Move a run onto ``hardware``, the spec of its device it ended with (a ceiling a kernel beat
    was raised during it), in one transaction: ``evaluations``, the run's evaluations re-scored
    against it (``profiling.parent.rescoring``), are cached under its key where the cache holds
    none there yet (one measured against it stays); the run's hardware and recorded spec (what a
    resume is scored against) become it; and each iteration's best % of peak becomes its best
    kernel's re-scored one."""
    key = hardware.key()
    other = next((e for e in evaluations if e.hardware != key), None)
    if other is not None:
        raise ValueError(f"an evaluation scored against {other.hardware}, not {key}")
    with store.transaction():
        for evaluation in evaluations:
            store.put_evaluation(evaluation, replace=False)
        spec = RunSpec.of(run).model_copy(update={"hardware_spec": hardware})
        store.move_run(run.id, key, spec.to_json())
        best = run_evaluations(store, run.id)  # in this transaction: the re-scored ones
        store.set_best_pct(
            run.id,
            {h: e.pct_of_peak for h, e in best.items() if e.passed and e.pct_of_peak is not None},
        )
