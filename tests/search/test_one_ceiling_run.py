"""A run whose ceiling was raised part-way is moved onto the raised spec in the store
(``search.evaluations.move_run``, ``search.one_ceiling.rescore_run`` and
``rescore_stored_run``): every evaluation of the run, its hardware and recorded spec, and its
iterations' best % of peak. Evaluations are built by ``scoring.build_evaluation`` from fixed
worker results; nothing is measured."""

from __future__ import annotations

import pytest
from evaluations import changed
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import Problem, load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.scoring import build_evaluation, workload_roofline
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.search.evaluations import move_run, run_evaluations, run_raced
from accelopt.search.one_ceiling import rescore_run, rescore_stored_run
from accelopt.search.spec import run_hardware
from accelopt.store.records import IterationRecord, KernelRecord, RunRecord, RunStatus
from accelopt.store.store import Store

SILU = load_problem("silu")
LOW = make_spec(name="cpu:busy", matmul_rate=1e15, vector_rate=1e15, bandwidth=26e9)
RAISED = LOW.model_copy(update={"bandwidth": 46e9})


def evaluation(
    kernel_hash: str, pct: float, hardware=LOW, workload: str = "cpu", problem: Problem = SILU
) -> Evaluation:
    """A kernel that reached ``pct`` of ``hardware``'s roofline on ``workload``."""
    latency = workload_roofline(problem, workload, hardware).peak_s / pct
    kernel = Kernel(shipped_kernel(problem, "baseline", "cpu").read_text(), "cpu", kernel_hash)
    result = KernelResult(latency_s=latency, min_s=latency, calls=20,
                          ci_low_s=latency * 0.99, ci_high_s=latency * 1.01)  # fmt: skip
    built = build_evaluation((kernel, problem, workload), hardware, 2, result)
    return built.model_copy(update={"kernel_hash": kernel_hash})


def make_run(store: Store, workloads: tuple[str, ...] = ("cpu",), **kw) -> RunRecord:
    config = {"hardware_spec": LOW.model_dump(mode="json"), "search": {}}
    if len(workloads) > 1:
        config |= {"workloads": list(workloads), "held_out": []}
    run = RunRecord(id="run-0001", problem="silu", workload=workloads[0], backend="cpu",
                    hardware=LOW.key(), strategy="beam", spec=config,
                    status=kw.pop("status", RunStatus.FINISHED))  # fmt: skip
    store.create_run(run)
    for i, h in enumerate(("base", "fast", "broken")):
        store.add_kernel(run.id, KernelRecord(h, f"/* {h} */", "cpu", i, "executor"))
    return run


def fill(store: Store, run: RunRecord, workload: str = "cpu") -> None:
    """The baseline at 68 % of the low ceiling; the fast kernel, 1.73x faster, beat it and was
    scored against the raised one; a kernel that failed before the raise."""
    store.put_evaluation(evaluation("base", 0.68, workload=workload))
    store.put_evaluation(evaluation("fast", 0.68 * 1.73 * 26 / 46, RAISED, workload))
    failed = changed(
        evaluation("broken", 0.5, workload=workload),
        status=Status.INCORRECT,
        error="wrong",
        latency_s=None,
        pct_of_peak=None,
        cached_pct=None,
        ci_low_s=None,
        ci_high_s=None,
        pct_low=None,
        pct_high=None,
    )
    store.put_evaluation(failed)


def commit(store: Store, run: RunRecord) -> None:
    for i, (best, pct) in enumerate((("base", 0.68), ("fast", 0.68 * 1.73 * 26 / 46))):
        record = IterationRecord(i, (best,), best, 1e-3, pct, 0.0, 1)
        store.commit_iteration(run.id, record, best_hash=best)


def test_a_run_moves_onto_the_raised_ceiling_with_every_evaluation(store: Store):
    run = make_run(store)
    fill(store, run)
    commit(store, run)
    measured_after = run_evaluations(store, run.id)["fast"]
    moved = rescore_run(store, run, SILU, RAISED)
    assert moved.hardware == RAISED.key()
    assert run_hardware(moved, LOW) == RAISED  # a resume goes on against the raised ceilings
    found = run_evaluations(store, moved.id)
    assert {e.hardware for e in found.values()} == {RAISED.key()}
    base, fast = found["base"], found["fast"]
    assert base.pct_of_peak == pytest.approx(0.68 * 26 / 46)
    assert fast == measured_after  # one measured against the raised ceiling stays as it was
    assert fast.pct_of_peak / base.pct_of_peak == pytest.approx(1.73)
    assert base.cached.peak_s == fast.cached.peak_s
    assert found["broken"].status is Status.INCORRECT
    assert found["broken"].cached.peak_s == base.cached.peak_s
    best = [i.best_pct_of_peak for i in store.iterations(run.id)]
    assert best == pytest.approx([base.pct_of_peak, fast.pct_of_peak])
    # the evaluations are cached under the raised key: a later run there finds them
    cached = store.get_evaluation("base", "silu", "cpu", RAISED.key())
    assert cached == base
    assert rescore_run(store, moved, SILU, RAISED) == moved  # nothing left to move


def test_a_run_on_several_workloads_is_moved_on_each(store: Store):
    run = make_run(store, ("cpu", "small"))
    fill(store, run, "cpu")
    fill(store, run, "small")
    rescore_run(store, run, SILU, RAISED)
    combined = run_evaluations(store, run.id)
    assert {e.workload for e in combined.values()} == {"cpu+small"}
    assert {e.hardware for e in combined.values()} == {RAISED.key()}
    assert combined["base"].pct_of_peak == pytest.approx(0.68 * 26 / 46)
    for workload in ("cpu", "small"):
        found = run_evaluations(store, run.id, workload=workload)
        assert {e.hardware for e in found.values()} == {RAISED.key()}


def test_a_spec_below_one_the_run_was_scored_against_moves_nothing(store: Store):
    run = make_run(store)
    fill(store, run)
    before = run_evaluations(store, run.id)
    assert rescore_run(store, run, SILU, LOW.model_copy(update={"bandwidth": 30e9})) == run
    assert run_evaluations(store, run.id) == before
    assert (store.get_run(run.id) or run).hardware == LOW.key()


def test_move_run_refuses_evaluations_against_another_spec(store: Store):
    run = make_run(store)
    with pytest.raises(ValueError, match="not"):
        move_run(store, run, RAISED, [evaluation("base", 0.5)])


def test_a_report_moves_a_stopped_run_onto_this_machines_raised_spec(store: Store):
    run = make_run(store, status=RunStatus.INTERRUPTED)  # stopped before its end re-scored it
    fill(store, run)
    assert rescore_stored_run(store, run, None) == run
    assert rescore_stored_run(store, run, make_spec(name="cpu:busy", bandwidth=99e9)) == run
    moved = rescore_stored_run(store, run, RAISED)  # this machine's spec: the raised one
    assert moved.hardware == RAISED.key()
    assert {e.hardware for e in run_evaluations(store, run.id).values()} == {RAISED.key()}


def test_a_running_run_is_left_to_its_session(store: Store):
    run = make_run(store, status=RunStatus.RUNNING)
    fill(store, run)
    assert rescore_stored_run(store, run, RAISED) == run


def test_a_runs_raced_kernels_are_known_apart_from_its_final_evaluations(tmp_path):
    from accelopt.profiling.config import harness_key

    with Store.open(tmp_path / "ws") as store:
        run = make_run(store)
        store.put_evaluation(evaluation("base", 0.5))
        raced = evaluation("fast", 0.2).model_copy(update={"raced": True})
        store.put_evaluation(raced, harness_version=f"{harness_key()}+raced:1.000000e-03")
        assert set(run_evaluations(store, run.id)) == {"base"}  # never a final figure
        assert run_raced(store, run.id) == {"fast"}  # ... but evaluated in the run
