"""The references a run timed in its own session (``run_references``): kept per run and kind,
replaced when timed again, a damaged one left out rather than failing every view of the run."""

from __future__ import annotations

from accelopt.store.store import Store


def test_a_runs_references_are_kept_by_kind(store: Store, make_run, make_evaluation) -> None:
    store.create_run(make_run("run-a"))
    store.create_run(make_run("run-b"))
    store.put_reference("run-a", make_evaluation("n1", kernel="numpy", backend="numpy"))
    store.put_reference("run-a", make_evaluation("t1", kernel="torch", backend="torch"))
    store.put_reference("run-a", make_evaluation("t2", kernel="torch", latency_s=1e-3))
    assert [(e.kernel, e.kernel_hash) for e in store.references("run-a")] == [
        ("numpy", "n1"), ("torch", "t2"),
    ]  # fmt: skip
    assert store.references("run-b") == []


def test_a_damaged_reference_is_left_out(store: Store, make_run, make_evaluation) -> None:
    store.create_run(make_run("run-a"))
    store.put_reference("run-a", make_evaluation("n1", kernel="numpy"))
    store.put_reference("run-a", make_evaluation("i1", kernel="inductor"))
    store._connection().execute("UPDATE run_references SET data = '{' WHERE kind = 'numpy'")
    assert [e.kernel for e in store.references("run-a")] == ["inductor"]
