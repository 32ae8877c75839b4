"""The optimization loop: for T iterations, plan, write, evaluate, repair, select, learn.

Every step is committed to the store as it happens: kernels when they are written, evaluations
when they are measured, LLM calls when they return (through the store's recorder), the beam at the
end of each iteration, lessons when they are written. A resumed run replays the recorded calls and
reuses the cached evaluations, so nothing is paid or measured twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from accelopt.agents.context import ProblemView, problem_view
from accelopt.agents.executor import ExecutorInput, KernelResult, execute
from accelopt.agents.fixer import FixerInput, fix
from accelopt.agents.planner import Plan, PlannerInput, propose
from accelopt.agents.summarizer import SummarizerInput, summarize
from accelopt.backends.base import Backend
from accelopt.backends.facts import BackendFacts
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import LLMClient
from accelopt.memory.records import Experience, Lesson
from accelopt.memory.retrieval import retrieve
from accelopt.memory.selection import Outcome, Pair, select_pairs
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profile import Profile, build_profile
from accelopt.profiling.profiler import Profiler
from accelopt.search.config import SearchConfig
from accelopt.search.progress import Progress
from accelopt.search.selection import Candidate, Comparison, best, compare, next_beam
from accelopt.store.records import IterationRecord, KernelRecord, RunRecord
from accelopt.store.store import Store

FIXABLE = {Status.COMPILE_ERROR, Status.REJECTED, Status.CRASH, Status.TIMEOUT, Status.INCORRECT}


@dataclass
class Child:
    """What one (parent, plan) produced: the kernels written for it, evaluated."""

    parent: Candidate
    plan: Plan
    kernels: list[Candidate] = field(default_factory=list)


@dataclass
class Optimizer:
    store: Store
    client: LLMClient
    evaluator: Profiler
    backend: Backend
    hardware: HardwareSpec
    problem: Problem
    workload: str
    config: SearchConfig
    run: RunRecord
    progress: Progress | None = None

    def __post_init__(self) -> None:
        self.view: ProblemView = problem_view(self.problem, self.workload)
        self.facts: BackendFacts = self.backend.facts(self.hardware)
        self.sizes = self.problem.workload(self.workload).sizes
        self.cost = self.problem.cost.evaluate(self.sizes)
        self._inflight: dict[str, asyncio.Future[Evaluation]] = {}
        # As many evaluations in flight as the profiler can run (a Ray cluster: many more than
        # asyncio's default thread pool would allow).
        self._pool = ThreadPoolExecutor(max_workers=max(1, self.evaluator.capacity))
        self._profiles: dict[str, Profile] = {}

    # -- evaluation ----------------------------------------------------------------------------
    async def measure(self, kernel: Kernel, fresh: bool = False) -> Evaluation:
        """The kernel's evaluation: cached (same kernel, problem, workload, hardware, harness)
        unless ``fresh``; concurrent requests for one kernel share one measurement."""
        if not fresh:
            cached = self.store.get_evaluation(
                kernel.hash, self.problem.name, self.workload, self.hardware.key()
            )
            if cached is not None:
                return cached
            if kernel.hash in self._inflight:
                return await self._inflight[kernel.hash]
        future: asyncio.Future[Evaluation] = asyncio.get_running_loop().create_future()
        self._inflight[kernel.hash] = future
        try:
            evaluation = await asyncio.get_running_loop().run_in_executor(
                self._pool, partial(self.evaluator.evaluate, kernel, self.problem, self.workload)
            )
            self.store.put_evaluation(evaluation)
            future.set_result(evaluation)
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            self._inflight.pop(kernel.hash, None)
        self._count(evaluation)
        return evaluation

    def _count(self, evaluation: Evaluation) -> None:
        if self.progress is not None:
            self.progress.evaluated += 1
            self.progress.statuses[evaluation.status.value] += 1
            self.progress.refresh()

    async def admit(
        self, source: str, parent: Candidate | None, plan: Plan | None, iteration: int, origin: str
    ) -> Candidate:
        """Record a new kernel in the run, then evaluate it (or reuse its evaluation)."""
        kernel = Kernel(source, self.backend.name, f"{origin}-{iteration}")
        record = KernelRecord(
            hash=kernel.hash,
            source=source,
            backend=self.backend.name,
            iteration=iteration,
            origin=origin,
            parent_hash=parent.hash if parent else "",
            plan_title=plan.title if plan else "",
            plan_steps=plan.steps if plan else (),
        )
        self.store.add_kernel(self.run.id, record)
        return Candidate(record, await self.measure(kernel))

    # -- agents --------------------------------------------------------------------------------
    async def profile(self, cand: Candidate) -> Profile:
        if cand.hash not in self._profiles:
            remarks = await asyncio.to_thread(
                self.backend.remarks, cand.kernel.source, self.problem, self.sizes
            )
            self._profiles[cand.hash] = build_profile(
                cand.evaluation, self.cost, self.hardware, remarks
            )
        return self._profiles[cand.hash]

    def lessons(self, cand: Candidate) -> list[Lesson]:
        """The top-k lessons for this kernel from the memory scope of the run."""
        if self.config.memory == "off" or self.config.lessons == 0:
            return []
        problem_text = f"{self.problem.name} {self.problem.description}"
        found = retrieve(
            self.store,
            problem_text=problem_text,
            kernel_text=cand.kernel.source,
            k=self.config.lessons,
            scope=self.config.memory,
            run_id=self.run.id,
        )
        return [experience.lesson for experience in found]

    async def plan_and_write(
        self, iteration: int, parent: Candidate, n: int, lessons: list[Lesson]
    ) -> Child | None:
        given = PlannerInput(self.view, parent.kernel.source, await self.profile(parent),
                             self.facts, lessons)  # fmt: skip
        planned = await propose(self.client, given, sample_index=iteration * 1000 + n)
        if planned.plan is None:
            return None
        plan = planned.plan
        job = ExecutorInput(self.view, parent.kernel.source, plan, self.facts)
        written = await asyncio.gather(
            *(execute(self.client, job, sample_index=k) for k in range(self.config.samples))
        )
        kernels = await asyncio.gather(
            *(self.evaluate_with_fixes(r, parent, plan, iteration) for r in written if r.source)
        )
        return Child(parent, plan, list(kernels))

    async def evaluate_with_fixes(
        self, written: KernelResult, parent: Candidate, plan: Plan, iteration: int
    ) -> Candidate:
        assert written.source is not None
        cand = await self.admit(written.source, parent, plan, iteration, "executor")
        for round_ in range(self.config.fixer):
            if cand.evaluation.status not in FIXABLE:
                break
            given = FixerInput(
                self.view,
                cand.kernel.source,
                cand.evaluation.status.value,
                cand.evaluation.error,
                cand.evaluation.log,
                self.facts,
            )
            repaired = await fix(self.client, given, sample_index=round_)
            if repaired.source is None:
                break
            cand = await self.admit(repaired.source, parent, plan, iteration, "fixer")
        return cand

    # -- selection -----------------------------------------------------------------------------
    async def settle(self, children: Sequence[Child]) -> None:
        """Re-time, in one session, each child whose gain over its parent is within 2x noise."""
        for child in children:
            for i, kid in enumerate(child.kernels):
                if compare(kid.evaluation, child.parent.evaluation) is not Comparison.UNSURE:
                    continue
                parent_kernel = Kernel(child.parent.kernel.source, self.backend.name, "parent")
                parent_eval = await self.measure(parent_kernel, fresh=True)
                kid_eval = await self.measure(
                    Kernel(kid.kernel.source, self.backend.name, "child"), fresh=True
                )
                child.parent = Candidate(child.parent.kernel, parent_eval)
                child.kernels[i] = Candidate(kid.kernel, kid_eval)

    async def learn(self, children: Sequence[Child]) -> None:
        """Choose this iteration's experiences (published rule) and have each summarized."""
        if self.config.memory == "off" or self.config.experience_slots == 0:
            return
        outcomes = [
            Outcome(c.parent.hash, c.plan.title, k.hash, c.parent.latency or 0.0, k.latency)
            for c in children
            if c.parent.latency
            for k in c.kernels
        ]
        pairs = select_pairs(outcomes, slots=self.config.experience_slots)
        sources = {c.parent.hash: c.parent.kernel.source for c in children}
        sources |= {k.hash: k.kernel.source for c in children for k in c.kernels}
        await asyncio.gather(*(self.summarize_pair(p, sources) for p in pairs))

    async def summarize_pair(self, pair: Pair, sources: dict[str, str]) -> None:
        given = SummarizerInput(
            self.view, sources[pair.slow_hash], sources[pair.fast_hash], pair.speedup,
            self.facts.language,
        )  # fmt: skip
        result = await summarize(self.client, given)
        if result.lesson is None:
            return
        self.store.add_experience(
            Experience(
                lesson=result.lesson,
                kind=pair.kind,
                speedup=pair.speedup,
                problem=self.problem.name,
                backend=self.backend.name,
                hardware=self.hardware.key(),
                model=result.call.model,
                run_id=self.run.id,
                slow_hash=pair.slow_hash,
                fast_hash=pair.fast_hash,
            )
        )

    # -- the loop ------------------------------------------------------------------------------
    async def iteration(
        self, t: int, beam: list[Candidate], baseline: Candidate
    ) -> list[Candidate]:
        parents = beam if self.config.strategy == "beam" else [baseline]
        per_parent = (
            self.config.plans
            if self.config.strategy == "beam"
            else self.config.plans * self.config.beam  # same executor calls, all from baseline
        )
        jobs = []
        for parent in parents:
            lessons = self.lessons(parent)
            jobs += [self.plan_and_write(t, parent, n, lessons) for n in range(per_parent)]
        children = [c for c in await asyncio.gather(*jobs) if c is not None]
        await self.settle(children)
        await self.learn(children)
        kids = [k for c in children for k in c.kernels]
        if self.config.strategy == "sampling":
            pool = [c for c in [*beam, *kids] if c.latency is not None]
            return sorted(pool, key=lambda c: c.latency or 0.0)[: self.config.beam] or beam
        updated = {c.parent.hash: c.parent for c in children}
        parents_now = [updated.get(p.hash, p) for p in beam]
        return next_beam(parents_now, kids, self.config.beam) or beam

    def commit(self, t: int, beam: list[Candidate], overall: Candidate) -> None:
        budget = self.client.budget
        statuses = dict(self.progress.statuses) if self.progress else {}
        self.store.add_iteration(
            self.run.id,
            IterationRecord(
                iteration=t,
                beam=tuple(c.hash for c in beam),
                best_hash=overall.hash,
                best_latency_s=overall.latency,
                best_pct_of_peak=overall.evaluation.pct_of_peak,
                spent_usd=budget.spent_usd if budget else 0.0,
                evaluated=self.progress.evaluated if self.progress else 0,
                failed_by_status={k: v for k, v in statuses.items() if k != "PASSED"},
            ),
        )
        self.store.update_run(self.run.id, best_hash=overall.hash)
        if self.progress is not None:
            self.progress.iteration = t
            self.progress.best_latency_s = overall.latency
            self.progress.best_pct = overall.evaluation.pct_of_peak
            self.progress.spent_usd = budget.spent_usd if budget else 0.0
            self.progress.unknown_cost_calls = budget.unknown_cost_calls if budget else 0
            self.progress.refresh()

    async def optimize(self, baseline: Candidate, beam: list[Candidate], start: int) -> str:
        """Iterations ``start..T`` from ``beam``; returns the run's final status."""
        overall = best([baseline, *beam]) or baseline
        try:
            for t in range(start, self.config.iterations + 1):
                if self.client.budget is not None and self.client.budget.exhausted():
                    return "budget"
                beam = await self.iteration(t, beam, baseline)
                overall = best([overall, *beam]) or overall
                self.commit(t, beam, overall)
        finally:
            self._pool.shutdown(wait=False)
        exhausted = self.client.budget is not None and self.client.budget.exhausted()
        return "budget" if exhausted else "finished"
