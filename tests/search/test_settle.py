"""Settling unsure children: one re-timing session per parent, the parent and its unsure
children interleaved on one device, the verdict from their ratio; kept per iteration, so that a
resumed iteration reuses it; never written over the evaluations prompts were built from."""

from __future__ import annotations

import asyncio

from accelopt.agents.planner import Plan
from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.problems.loader import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.session import Retiming
from accelopt.search.children import PlanKernels
from accelopt.search.context import RunContext
from accelopt.search.measuring import Measurer
from accelopt.search.selection import Candidate, Comparison
from accelopt.search.settling import SESSION_CHILDREN, settle
from accelopt.search.workloads import RunWorkloads
from accelopt.store.records import KernelRecord, RunRecord
from accelopt.store.store import Store


def evaluation(source: str, latency: float) -> Evaluation:
    return Evaluation(
        problem="matmul", workload="small", backend="cpu", kernel="k",
        kernel_hash=Kernel(source).hash, hardware="hw", status=Status.PASSED, latency_s=latency,
        noise=0.02, peak_s=1e-5, bound="matmul", tolerance=2e-5,
    )  # fmt: skip


class SessionProfiler:
    """A profiler whose re-timing sessions find each kernel at the ratio it is told."""

    kind = "fake"
    capacity = 2
    threads = 1

    def __init__(self, ratios: dict[str, float]) -> None:
        self.ratios = ratios
        self.sessions: list[list[str]] = []

    def evaluate(self, kernel, problem, workload, *, fresh=False):
        raise AssertionError("settling never evaluates a kernel on its own")

    def retime(self, kernels, problem, workload) -> Retiming:
        hashes = [k.hash for k in kernels]
        self.sessions.append(hashes)
        # the parent's twin (the parent again, second) at the ratio given for the parent's hash
        ratios = tuple(1.0 if i == 0 else self.ratios.get(h, 1.0) for i, h in enumerate(hashes))
        evaluations = tuple(
            evaluation(k.source, 1e-3 * r) for k, r in zip(kernels, ratios, strict=True)
        )
        return Retiming(evaluations, ratios, tuple(0.002 for _ in kernels), rounds=8)


def candidate(source: str, latency: float, parent: str = "", plan: str = "p") -> Candidate:
    kernel = Kernel(source)
    record = KernelRecord(kernel.hash, source, "cpu", 1, "executor", parent, plan)
    return Candidate(record, evaluation(source, latency))


def workspace(tmp_path, hw) -> tuple[Store, RunRecord]:
    store = Store.open(tmp_path)
    run = RunRecord("r1", "matmul", "small", "cpu", hw.key(), "beam", {})
    store.create_run(run)
    return store, run


def context(store: Store, run: RunRecord, hw) -> RunContext:
    """The context of run ``run`` of matmul on its ``small`` workload, on the cpu backend."""
    return RunContext(
        store, run, load_problem("matmul"), get_backend("cpu"), hw, RunWorkloads(("small",))
    )


def measurer(store: Store, run: RunRecord, hw, profiler) -> Measurer:
    return Measurer(context(store, run, hw), profiler)


def settled(m: Measurer, groups: list[PlanKernels]) -> dict[str, Comparison]:
    return asyncio.run(settle(m, 1, groups))


def test_one_session_per_parent_with_all_its_unsure_children(tmp_path, hw):
    parent = candidate("void kernel(){int p;}", 1.0)
    unsure_a = candidate("void kernel(){int a;}", 0.97, parent.hash, "tile")
    unsure_b = candidate("void kernel(){int b;}", 0.965, parent.hash, "unroll")
    clear = candidate("void kernel(){int c;}", 0.5, parent.hash, "pack")  # no doubt: not re-timed
    other = candidate("void kernel(){int q;}", 2.0)
    other_kid = candidate("void kernel(){int d;}", 1.94, other.hash)
    profiler = SessionProfiler({unsure_a.hash: 0.95, unsure_b.hash: 0.999, other_kid.hash: 0.9})
    store, run = workspace(tmp_path, hw)
    groups = [
        PlanKernels(parent, Plan("tile", ("x",)), (unsure_a, clear)),
        PlanKernels(parent, Plan("unroll", ("x",)), (unsure_b,)),
        PlanKernels(other, Plan("t", ("x",)), (other_kid,)),
    ]
    decided = settled(measurer(store, run, hw, profiler), groups)
    # the parent timed once beside every unsure child of its own; those found faster again,
    # beside the parent and its twin (the parent in a second process)
    assert sorted(profiler.sessions) == sorted(
        [
            [parent.hash, unsure_a.hash, unsure_b.hash],
            [parent.hash, parent.hash, unsure_a.hash],
            [other.hash, other_kid.hash],
            [other.hash, other.hash, other_kid.hash],
        ]
    )
    assert decided == {
        unsure_a.hash: Comparison.FASTER,  # 5 % faster in one session: believed
        unsure_b.hash: Comparison.NOT_FASTER,  # 0.1 %: within the session's noise
        other_kid.hash: Comparison.FASTER,
    }
    data = store.get_retiming("r1", 1, [parent.hash, unsure_a.hash, unsure_b.hash])
    assert data is not None and data["rounds"] == 8
    # a resumed iteration reuses the session kept in the store: nothing is timed again
    again = SessionProfiler({})
    assert settled(measurer(store, run, hw, again), groups) == decided
    assert again.sessions == []


def test_many_unsure_children_are_split_into_sessions_of_a_few(tmp_path, hw):
    """Each kernel of a session holds its own buffers: a parent with many unsure children is
    re-timed in several sessions, each beside the parent."""
    parent = candidate("void kernel(){int p;}", 1.0)
    kids = [
        candidate(f"void kernel(){{int k{i};}}", 0.97, parent.hash, f"plan {i}") for i in range(7)
    ]
    profiler = SessionProfiler({k.hash: 0.9 for k in kids})
    store, run = workspace(tmp_path, hw)
    groups = [PlanKernels(parent, Plan(k.kernel.plan_title, ("x",)), (k,)) for k in kids]
    decided = settled(measurer(store, run, hw, profiler), groups)
    first = [s for s in profiler.sessions if s[1] != parent.hash]
    assert sorted(len(s) for s in first) == [2] + [1 + SESSION_CHILDREN] * 2
    assert all(s[0] == parent.hash for s in profiler.sessions)
    # every kid was found faster: each again beside the parent and its twin, a kernel fewer
    twins = [s for s in profiler.sessions if s[1] == parent.hash]
    assert sorted(len(s) for s in twins) == [3, 3, 3, 4, 4]
    assert set(decided) == {k.hash for k in kids}


def test_a_child_is_faster_only_than_the_faster_of_its_parents_two_processes(tmp_path, hw):
    # the parent's first process ran slow: its twin (the same code) read 0.96 of it, and a child
    # at 0.95 is 1 % faster than the twin, within the noise, not 5 %
    parent = candidate("void kernel(){int p;}", 1.0)
    lookalike = candidate("void kernel(){int a;}", 0.97, parent.hash, "tile")
    faster = candidate("void kernel(){int b;}", 0.97, parent.hash, "unroll")
    ratios = {parent.hash: 0.96, lookalike.hash: 0.95, faster.hash: 0.85}
    profiler = SessionProfiler(ratios)
    store, run = workspace(tmp_path, hw)
    groups = [PlanKernels(parent, Plan("tile", ("x",)), (lookalike, faster))]
    assert settled(measurer(store, run, hw, profiler), groups) == {
        lookalike.hash: Comparison.NOT_FASTER,
        faster.hash: Comparison.FASTER,  # 0.85 / 0.96: 11 % faster than either
    }
    assert profiler.sessions[1] == [parent.hash, parent.hash, lookalike.hash, faster.hash]
