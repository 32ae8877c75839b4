"""The optimization loop: for T iterations, plan, write, evaluate, repair, settle, learn, commit.

**An iteration is one commit.** What an iteration produces is written as it happens — kernels,
evaluations (the profiler's cache), LLM calls (the store's recorder), the lessons each parent was
shown, one-session re-timings, experiences — but the iteration counts only once its record is
committed; its experiences become visible to retrieval in that same transaction. A run killed at
any point and resumed runs the uncommitted iteration again from the same inputs: the parents'
lessons are the ones recorded when it first started, their profiles come from cached evaluations
(re-timings never replace them), so every prompt is byte-identical and the recorded replies are
replayed: nothing completed before the kill is paid or measured twice, and experiences are unique
per (run, iteration, parent, plan).

The steps are parts of their own, each made with the run's context (``context.RunContext``) when
the ``Optimizer`` is made: ``measuring`` (admitting and measuring kernels), ``children`` (plan →
write → fix), ``settling`` (re-timing the unsure), ``lessons`` (memory in and out),
``generation`` (one iteration of children, settled and learned from) and ``tuner`` (variants of
declared tunables). Each iteration is the strategy's (``strategies``): it picks the parents and
what to make of them, through the ``Optimizer`` (``strategies.base.Means``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.agents.context import problem_view
from accelopt.llm.chat import ChatModel
from accelopt.profiling.profiler import Profiler
from accelopt.search.children import ChildMaker
from accelopt.search.config import SearchConfig
from accelopt.search.context import RunContext
from accelopt.search.evaluations import run_evaluations, run_raced
from accelopt.search.failing import CallTally
from accelopt.search.generation import Generation
from accelopt.search.headline import closing_session
from accelopt.search.lessons import Lessons
from accelopt.search.measuring import Measurer
from accelopt.search.selection import Candidate
from accelopt.search.strategies import strategy_for
from accelopt.search.strategies.base import Frontier, Step
from accelopt.search.tuner import Tuner
from accelopt.store.records import IterationRecord, RunStatus


@dataclass
class Optimizer:
    """One run's loop: its parts, each made here from the run's context, and its iterations,
    each the strategy's (``config.strategy``) and ended by its commit."""

    context: RunContext
    client: ChatModel
    profiler: Profiler  # owns the evaluation cache (the store's)
    config: SearchConfig

    def __post_init__(self) -> None:
        ctx = self.context
        self.strategy = strategy_for(self.config.strategy)
        self.waste: Counter[str] = Counter()  # this iteration's calls that gave nothing usable
        self.calls = CallTally(self.client)  # this step's calls: did every one fail?
        self.stopped = ""  # why the run stopped early: its endpoint failed (``failing``)
        self.measurer = Measurer(ctx, self.profiler)
        self.tuner = Tuner(ctx, self.measurer, self.config.variants)
        view = problem_view(ctx.problem, ctx.workload, ctx.tuned[1:])
        facts = ctx.backend.facts(ctx.hardware)
        self.maker = ChildMaker(
            self.calls,
            self.measurer,
            view,
            facts,
            self.config,
            self.tuner.tune,
            ctx.phase,
            self.waste,
        )
        self.lessons = Lessons(
            ctx, self.calls, self.config, view, facts.language, self.measurer.profile, self.waste
        )
        self.generation = Generation(ctx, self.config, self.maker, self.lessons)

    # -- what a strategy makes its iterations of (``strategies.base.Means``) --------------------
    @property
    def width(self) -> int:
        return self.config.beam

    @property
    def plans(self) -> int:
        return self.config.plans

    async def children(
        self, t: int, parents: Sequence[Candidate], first_plans: Sequence[int], at: Frontier
    ) -> Step:
        return await self.generation.grow(t, parents, first_plans, at)

    async def tune(self, t: int, cand: Candidate) -> Candidate:
        return await self.tuner.tune_further(t, cand)

    # -- the loop ------------------------------------------------------------------------------
    async def iteration(
        self, t: int, beam: list[Candidate], baseline: Candidate, overall: Candidate
    ) -> tuple[list[Candidate], Candidate]:
        """One iteration from ``beam``: the next beam and the run's best after it."""
        self.calls.reset()
        self.waste.clear()
        at = Frontier(beam, baseline, overall)
        step = await self.strategy.make(self, t, self.strategy.parents(at, self.width), at)
        return step.beam, step.best

    def commit(self, t: int, beam: list[Candidate], overall: Candidate) -> None:
        """The iteration's record, its experiences and the run's best, in one transaction; $
        and counts from the store, so they hold across every session of the run."""
        store, run = self.context.store, self.context.run
        self.context.phase("committing", t)
        spent = store.spent([run.id])
        found = run_evaluations(store, run)
        evaluations = found.values()
        measured = set(found) | run_raced(store, run)  # raced ones were evaluated
        failed = Counter(e.status.value for e in evaluations if not e.passed)
        record = IterationRecord(
            iteration=t,
            beam=tuple(c.hash for c in beam),
            best_hash=overall.hash,
            best_latency_s=overall.latency,
            best_pct_of_peak=overall.evaluation.pct_of_peak,
            spent_usd=spent.usd,
            evaluated=len(measured),
            failed_by_status=dict(sorted(failed.items())),
            wasted=dict(sorted(self.waste.items())),
        )
        store.commit_iteration(run.id, record, best_hash=overall.hash)
        progress = self.context.progress
        if progress is not None:
            budget = self.client.budget
            progress.iteration = t
            progress.phase = ""
            progress.best_latency_s = overall.latency
            progress.best_pct = overall.evaluation.pct_of_peak
            progress.spent_usd = spent.usd
            progress.unknown_cost_calls = budget.unknown_cost_calls if budget else 0
            progress.refresh()

    def exhausted(self) -> bool:
        return self.client.budget is not None and bool(self.client.budget.exhausted())

    async def optimize(
        self, baseline: Candidate, beam: list[Candidate], overall: Candidate, start: int
    ) -> RunStatus:
        """Iterations ``start..T`` from ``beam``, then the baseline and the best measured on the
        held-out workloads and re-timed side by side (``headline``; no LLM call: also when the
        budget ran out); returns the run's final
        status. An iteration whose every LLM call failed is not committed: the run stops there,
        failed, and says why in ``stopped`` (a resume runs that iteration again)."""
        try:
            for t in range(start, self.config.iterations + 1):
                if self.exhausted():
                    break
                beam, overall = await self.iteration(t, beam, baseline, overall)
                if self.calls.all_failed():
                    self.stopped = self.calls.sentence(f"iteration {t}", self.context.run.id)
                    return RunStatus.FAILED
                self.commit(t, beam, overall)
            await self.measurer.hold_out([baseline, overall])
            await closing_session(self.measurer, baseline, overall)  # what the run reports
        finally:
            self.measurer.close()
        return RunStatus.BUDGET if self.exhausted() else RunStatus.FINISHED
