"""Tuning a kernel's declared parameters inside a run, with no LLM call: the variants are
admitted and evaluated like any kernel, the bad ones recorded and skipped, the fastest confirmed in
a re-timing session before it is kept; ``--strategy autotune`` is the whole run made of that."""

from __future__ import annotations

import asyncio
import math

import pytest
from agents_pool import write_config

from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.backends.tunables import find_tunables, label, values_of
from accelopt.llm.client import LLMClient
from accelopt.llm.config import load_config
from accelopt.llm.offline import NoLLM
from accelopt.problems.loader import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.session import Retiming
from accelopt.search.briefs import variant_lines
from accelopt.search.config import SearchConfig
from accelopt.search.context import RunContext
from accelopt.search.evaluations import run_evaluations
from accelopt.search.loop import Optimizer
from accelopt.search.retimings import stored_retimings
from accelopt.search.run import _drive
from accelopt.search.variants import variant_tables
from accelopt.search.workloads import RunWorkloads
from accelopt.store.records import KernelOrigin, RunRecord
from accelopt.store.store import Store
from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer

KERNEL = """#ifndef BM
#define BM 64 /* tune: 16 32 64 128 */
#endif
#ifndef UNROLL
#define UNROLL 2 /* tune: 1 2 4 */
#endif
void kernel(const float *lhs, const float *rhs, float *out) { (void)lhs; (void)rhs; (void)out; }
"""


def cost(values: dict[str, str]) -> float | None:
    """The fake machine: BM=32 and UNROLL=4 are best; BM=128 does not build."""
    if values["BM"] == "128":
        return None
    bm = 1 + 0.2 * abs(math.log2(int(values["BM"]) / 32))
    return 1e-3 * bm * (1.0 if values["UNROLL"] == "4" else 1.1)


class TuningProfiler:
    """Evaluates a kernel by its tuned values (``cost``), as the real profiler would cache it;
    a session finds each kernel at its cost's ratio to the first."""

    kind = "fake"
    capacity = 4
    threads = 1

    def __init__(self, store: Store, hardware, cache=None, kill_after: int = 0) -> None:
        self.store, self.hardware = store, hardware
        self.evaluated: list[str] = []  # measured (not from the cache)
        self.sessions: list[list[str]] = []
        self.cache = {} if cache is None else cache  # the evaluation cache, across sessions
        self.kill_after = kill_after  # the session dies at this measurement (0: never)

    def _latency(self, kernel: Kernel) -> float | None:
        return cost(values_of(kernel.source, find_tunables(KERNEL)))

    def _evaluation(self, kernel: Kernel) -> Evaluation:
        latency = self._latency(kernel)
        status = Status.PASSED if latency else Status.COMPILE_ERROR
        return Evaluation(
            problem="matmul", workload="small", backend="cpu", kernel=kernel.name,
            kernel_hash=kernel.hash, hardware=self.hardware.key(), status=status,
            latency_s=latency, noise=0.01, ci=0.01, peak_s=1e-4, bound="matmul",
            tolerance=2e-5, error="" if latency else "BM=128 does not fit",
        )  # fmt: skip

    def race(self, kernel, problem, workload, race_s) -> Evaluation:
        if kernel.hash in self.cache:
            return self.cache[kernel.hash]
        if len(self.evaluated) + 1 == self.kill_after:
            raise Killed
        self.evaluated.append(kernel.hash)
        evaluation = self.cache[kernel.hash] = self._evaluation(kernel)
        self.store.put_evaluation(evaluation)
        return evaluation

    def evaluate(self, kernel, problem, workload, *, fresh=False) -> Evaluation:
        return self.race(kernel, problem, workload, None)

    def retime(self, kernels, problem, workload) -> Retiming:
        self.sessions.append([k.hash for k in kernels])
        times = [self._latency(k) or 1.0 for k in kernels]
        ratios = tuple(t / times[0] for t in times)
        found = tuple(self._evaluation(k) for k in kernels)
        return Retiming(found, ratios, tuple(0.003 for _ in kernels), rounds=8)


class Killed(Exception):
    """The session dies here (as a SIGKILL would end it)."""


def optimizer(
    tmp_path, hw, client, search: SearchConfig, cache=None, kill_after: int = 0
) -> tuple[Optimizer, TuningProfiler]:
    """An optimizer on the workspace in ``tmp_path`` (its run made the first time)."""
    store = Store.open(tmp_path / "ws")
    run = store.get_run("r1")
    if run is None:
        run = RunRecord("r1", "matmul", "small", "cpu", hw.key(), search.strategy,
                        {"start_source": KERNEL})  # fmt: skip
        store.create_run(run)
    profiler = TuningProfiler(store, hw, cache, kill_after)
    context = RunContext(
        store, run, load_problem("matmul"), get_backend("cpu"), hw, RunWorkloads(("small",))
    )
    opt = Optimizer(context, client, profiler, search)
    return opt, profiler


def autotune(opt: Optimizer) -> str:
    async def go():
        start = await opt.measurer.admit(KERNEL, None, None, 0, KernelOrigin.BASELINE)
        opt.commit(0, [start], start)
        await opt.optimize(start, [start], start, 1)
        return opt.context.store.get_run("r1").best_hash

    return asyncio.run(go())


def test_autotune_keeps_the_fastest_variant_and_never_tries_one_twice(tmp_path, hw):
    search = SearchConfig(
        strategy="autotune", iterations=3, variants=4, memory="off", references=False
    )
    opt, profiler = optimizer(tmp_path, hw, NoLLM(), search)  # an LLM call would raise
    best = autotune(opt)
    kernels = {k.hash: k for k in opt.context.store.kernels("r1")}
    tunables = find_tunables(KERNEL)
    assert values_of(kernels[best].source, tunables) == {"BM": "32", "UNROLL": "4"}
    tried = [label(values_of(k.source, tunables)) for k in kernels.values()]
    assert len(tried) == len(set(tried))  # no variant measured twice across iterations
    assert len(profiler.evaluated) == len(set(profiler.evaluated))
    assert all(k.origin == KernelOrigin.TUNED for k in kernels.values() if k.iteration)
    # every gain was confirmed in a session beside the kernel it varies, then beside its twin
    assert any(len(s) >= 3 and s[0] == s[1] for s in profiler.sessions)
    # the table carries each re-timed variant's ratio from its last session (the twin's)
    (table,) = variant_tables(list(kernels.values()), run_evaluations(opt.context.store, "r1"),
                              frozenset(), frozenset([best]), "cpu",
                              stored_retimings(opt.context.store, "r1"))  # fmt: skip
    (kept,) = [r for r in table.rows if r.kept]
    assert kept.session_ratio is not None and kept.session_ratio < 0.97
    assert kept.session_reference != best  # against the kernel it varied


def test_a_variant_that_does_not_build_is_recorded_and_skipped(tmp_path, hw):
    search = SearchConfig(
        strategy="autotune", iterations=1, variants=8, memory="off", references=False
    )
    opt, _ = optimizer(tmp_path, hw, NoLLM(), search)
    best = autotune(opt)
    evaluations = run_evaluations(opt.context.store, "r1")
    broken = [h for h, e in evaluations.items() if e.status is Status.COMPILE_ERROR]
    assert broken and best not in broken
    kernels = opt.context.store.kernels("r1")
    tables = variant_tables(kernels, evaluations, frozenset(), frozenset([best]), "cpu")
    assert len(tables) == 1
    rows = tables[0].rows
    assert rows[0].values == "(as written)"
    assert [r.kept for r in rows].count(True) == 1
    assert rows[-1].status == "COMPILE_ERROR" and rows[-1].latency_s is None
    passed = [r.latency_s for r in rows[1:] if r.latency_s is not None]
    assert passed == sorted(passed)  # fastest first


def test_the_planner_is_told_the_variants_measured_before_its_iteration(tmp_path, hw):
    search = SearchConfig(
        strategy="autotune", iterations=1, variants=4, memory="off", references=False
    )
    opt, _ = optimizer(tmp_path, hw, NoLLM(), search)
    autotune(opt)
    kernels = opt.context.store.kernels("r1")
    start = next(k for k in kernels if k.origin == KernelOrigin.BASELINE)
    evaluations = run_evaluations(opt.context.store, "r1")
    lines = variant_lines(kernels, evaluations, start, "cpu", before=2)
    assert lines[0].startswith("BM=32 UNROLL=2: speedup 1.20x over this kernel")
    assert any(line.endswith("COMPILE_ERROR") for line in lines)
    assert variant_lines(kernels, evaluations, start, "cpu", before=1) == []  # not yet measured


class TunableTeam:
    """A planner with one plan, an executor that writes a kernel declaring tunables."""

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.model == "planner":
            return Reply("TITLE: block the loops\nSTEPS:\n1. Block the loops, sizes as tunables.\n")
        return Reply(f"Here it is.\n```c\n{KERNEL}```\n")


def test_a_written_kernel_that_declares_tunables_is_tuned_with_no_llm_request(tmp_path, hw):
    search = SearchConfig(beam=1, plans=1, samples=1, iterations=1, fixer=0, memory="off",
                          variants=4)  # fmt: skip
    start = KERNEL.replace("void kernel(", "/* the parent */\nvoid kernel(")
    with ScriptedServer(default=TunableTeam()) as server:
        llm = load_config(write_config(tmp_path / "accelopt.yaml", server.base_url))
        opt, _ = optimizer(tmp_path, hw, LLMClient(llm), search)

        async def go():
            parent = await opt.measurer.admit(start, None, None, 0, KernelOrigin.BASELINE)
            opt.commit(0, [parent], parent)
            await opt.optimize(parent, [parent], parent, 1)
            await opt.client.aclose()

        asyncio.run(go())
        requests = server.requests
    assert [r.model for r in requests] == ["planner", "executor"]  # tuning asked nothing
    kernels = opt.context.store.kernels("r1")
    tuned = [k for k in kernels if k.origin == KernelOrigin.TUNED]
    assert len(tuned) == 4
    # the variants are the plan's children of the same parent: they compete as the plan's kernel
    assert {(k.parent_hash, k.plan_title) for k in tuned} == {(kernels[0].hash, "block the loops")}
    best = opt.context.store.get_run("r1").best_hash
    assert best in {k.hash for k in tuned}
    assert "tune:" in requests[1].messages[-1]["content"]  # the executor was told it may declare


def test_an_autotune_run_killed_while_it_tunes_resumes_and_measures_nothing_twice(tmp_path, hw):
    search = SearchConfig(
        strategy="autotune", iterations=3, variants=4, memory="off", references=False
    )
    cache: dict = {}
    killed, first = optimizer(tmp_path, hw, NoLLM(), search, cache, kill_after=7)
    with pytest.raises(Killed):  # inside iteration 2's tuning: 1 start, 4 variants + 2
        asyncio.run(_drive(killed, resume=False))
    assert [i.iteration for i in killed.context.store.iterations("r1")] == [0, 1]
    resumed, second = optimizer(tmp_path, hw, NoLLM(), search, cache)
    _, _, best = asyncio.run(_drive(resumed, resume=True))
    assert set(first.evaluated).isdisjoint(second.evaluated)  # the cache answered the rest
    whole, _ = optimizer(tmp_path / "whole", hw, NoLLM(), search)
    _, _, reference = asyncio.run(_drive(whole, resume=False))
    assert best.hash == reference.hash  # where a run that was never killed ends
    tunables = find_tunables(KERNEL)
    assert values_of(best.kernel.source, tunables) == {"BM": "32", "UNROLL": "4"}


def test_a_tunable_named_as_a_size_of_the_problem_is_never_varied(tmp_path, hw):
    """The sizes are the harness's (``-D`` flags): a variant redefining M would compute another
    problem. A model that declares one gets its other tunables tuned, that one left alone."""
    sized = "#ifndef M\n#define M 64 /* tune: 1 2 4 */\n#endif\n" + KERNEL
    search = SearchConfig(
        strategy="autotune", iterations=1, variants=8, memory="off", references=False
    )
    opt, _ = optimizer(tmp_path, hw, NoLLM(), search)

    async def go():
        start = await opt.measurer.admit(sized, None, None, 0, KernelOrigin.BASELINE)
        opt.commit(0, [start], start)
        await opt.optimize(start, [start], start, 1)

    asyncio.run(go())
    kernels = opt.context.store.kernels("r1")
    (m,) = [t for t in find_tunables(sized) if t.name == "M"]
    assert len(kernels) > 1  # BM and UNROLL were tuned ...
    assert {values_of(k.source, [m])["M"] for k in kernels} == {"64"}  # ... M never
