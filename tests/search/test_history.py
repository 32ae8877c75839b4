"""What the planner is told was tried on a kernel's lineage: pure, from records."""

from __future__ import annotations

from accelopt.backends.status import Status
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.history import lineage, plans_tried
from accelopt.store.records import KernelRecord


def kernel(h: str, parent: str = "", plan: str = "", iteration: int = 1) -> KernelRecord:
    return KernelRecord(h, h, "cpu", iteration, "executor", parent, plan)


def ev(h: str, latency: float | None, status: Status = Status.PASSED) -> Evaluation:
    return Evaluation(
        problem="p", workload="w", backend="cpu", kernel=h, kernel_hash=h, hardware="hw",
        status=status, error="" if status is Status.PASSED else "failed", latency_s=latency,
        peak_s=1e-4, bound="matmul", tolerance=1e-4,
    )  # fmt: skip


KERNELS = [
    kernel("base", iteration=0),
    kernel("a1", "base", "tile", 1),
    kernel("a2", "base", "tile", 1),
    kernel("b1", "base", "unroll", 1),
    kernel("c1", "a1", "pack", 2),
    kernel("c2", "a1", "vectorize", 2),
    kernel("x1", "other", "tile", 1),  # another lineage
    kernel("d1", "c1", "prefetch", 3),  # the current iteration: not yet known
]
EVALS = {
    "base": ev("base", 2.0),
    "a1": ev("a1", 1.0),
    "a2": ev("a2", 1.5),
    "b1": ev("b1", None, Status.COMPILE_ERROR),
    "c1": ev("c1", 0.8),
    "c2": ev("c2", None, Status.INCORRECT),
}


def test_the_lineage_is_the_kernel_and_its_ancestors():
    by_hash = {k.hash: k for k in KERNELS}
    assert lineage(by_hash, "c1") == ["c1", "a1", "base"]
    assert lineage(by_hash, "c1", depth=2) == ["c1", "a1"]
    assert lineage(by_hash, "nope") == []


def test_where_each_plan_was_tried_and_what_came_of_it():
    tried = plans_tried(KERNELS, EVALS, "c1", before=3)
    assert [(t.title, t.on, t.iteration) for t in tried] == [
        ("tile", "2 generations up", 1),
        ("unroll", "2 generations up", 1),
        ("pack", "its parent", 2),
        ("vectorize", "its parent", 2),
    ]
    outcomes = {t.title: t.outcome for t in tried}
    assert outcomes == {
        "tile": "2.00x (faster)",  # the best of a1 and a2 over base
        "unroll": "failed: COMPILE_ERROR",
        "pack": "1.25x (faster)",
        "vectorize": "failed: INCORRECT",
    }


def test_only_earlier_iterations_count():
    """A resumed iteration is told exactly what the killed one was: not its own children."""
    assert [t.title for t in plans_tried(KERNELS, EVALS, "c1", before=2)] == ["tile", "unroll"]
    assert plans_tried(KERNELS, EVALS, "base", before=1) == []
    assert [t.on for t in plans_tried(KERNELS, EVALS, "base", before=2)] == ["this kernel"] * 2


def test_a_plan_tried_again_is_told_again_even_when_it_wrote_the_same_kernel():
    """The store keeps one record per kernel, at its first write; every write is told, so a
    planner asked again after the same plan failed twice sees both (its prompt is not the
    previous iteration's, byte for byte)."""
    writes = [kernel("base", iteration=0), kernel("b1", "base", "unroll", 1),
              kernel("b1", "base", "unroll", 2)]  # fmt: skip
    tried = plans_tried(writes, EVALS, "base", before=3)
    assert [(t.title, t.iteration, t.outcome) for t in tried] == [
        ("unroll", 1, "failed: COMPILE_ERROR"), ("unroll", 2, "failed: COMPILE_ERROR"),
    ]  # fmt: skip


def test_the_store_keeps_every_write_of_a_kernel(tmp_path):
    from accelopt.store.records import RunRecord
    from accelopt.store.store import Store

    with Store.open(tmp_path) as store:
        store.create_run(RunRecord("r", "matmul", "small", "cpu", "hw", "beam", {}))
        again = kernel("b1", "base", "unroll", 2)
        for k in (kernel("base", iteration=0), kernel("b1", "base", "unroll", 1), again, again):
            store.add_kernel("r", k)
        assert [k.iteration for k in store.kernels("r")] == [0, 1]
        assert [k.iteration for k in store.kernels("r", every_write=True)] == [0, 1, 2]
