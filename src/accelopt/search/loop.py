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

The steps are parts of their own, each given what it needs when the ``Optimizer`` is made:
``measuring`` (admitting and measuring kernels), ``children`` (plan → write → fix),
``settling`` (re-timing the unsure), ``lessons`` (memory in and out) and ``tuning``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from accelopt.agents.context import problem_view
from accelopt.backends.base import Backend
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.chat import ChatModel
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import Profiler
from accelopt.search import settling, tuning
from accelopt.search.children import ChildMaker, ParentBrief
from accelopt.search.config import SearchConfig
from accelopt.search.evaluations import run_evaluations, run_raced
from accelopt.search.failing import CallTally
from accelopt.search.headline import closing_session
from accelopt.search.history import plans_tried
from accelopt.search.lessons import Lessons
from accelopt.search.measuring import Measurer
from accelopt.search.phases import PhaseHook, Phases
from accelopt.search.progress import Progress
from accelopt.search.selection import Candidate, best, best_of_plan, next_beam
from accelopt.store.records import IterationRecord, KernelRecord, RunRecord, RunStatus
from accelopt.store.store import Store


@dataclass
class Optimizer:
    """One run's loop: its parts, each made here from the run's inputs, and its iterations, each
    ended by its commit."""

    store: Store
    client: ChatModel
    profiler: Profiler  # owns the evaluation cache (the store's)
    backend: Backend
    hardware: HardwareSpec
    problem: Problem
    workload: str
    config: SearchConfig
    run: RunRecord
    progress: Progress | None = None
    on_phase: PhaseHook | None = None
    # the workloads the score is the geometric mean over (default: ``workload`` alone), and
    # those measured only at the end (never shown to the agents)
    tuned: tuple[str, ...] = ()
    held_out: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.tuned = self.tuned or (self.workload,)
        self.phase: PhaseHook = Phases(self.on_phase, self.progress)
        self.waste: Counter[str] = Counter()  # this iteration's calls that gave nothing usable
        self.calls = CallTally(self.client)  # this step's calls: did every one fail?
        self.stopped = ""  # why the run stopped early: its endpoint failed (``failing``)
        self.measurer = Measurer(
            self.store, self.run, self.profiler, self.backend, self.hardware, self.problem,
            self.workload, self.tuned, self.held_out, self.phase, self.progress,
        )  # fmt: skip
        view = problem_view(self.problem, self.workload, self.tuned[1:])
        facts = self.backend.facts(self.hardware)
        self.maker = ChildMaker(
            self.calls, self.measurer, view, facts, self.config, partial(tuning.tune, self),
            self.phase, self.waste,
        )  # fmt: skip
        self.lessons = Lessons(
            self.store, self.calls, self.config, view, facts.language, self.run.id,
            self.backend.name, self.hardware.key(), self.measurer.profile, self.phase, self.waste,
        )  # fmt: skip
        # what ``run`` and ``tuning`` ask of the loop: a kernel recorded in the run and evaluated;
        # kernels re-timed beside their parent in one session; a first kernel from the reference
        self.admit = self.measurer.admit
        self.retime = partial(settling.retime, self.measurer)
        self.draft = self.maker.draft

    # -- the loop ------------------------------------------------------------------------------
    async def iteration(
        self, t: int, beam: list[Candidate], baseline: Candidate, overall: Candidate
    ) -> tuple[list[Candidate], Candidate]:
        """One iteration from ``beam``: the next beam and the run's best after it."""
        self.calls.reset()
        if self.config.strategy == "autotune":  # the best so far, tuned further: no LLM call
            top = await tuning.tune(self, t, overall, overall, tuning.AUTOTUNE_PLAN)
            return [top], top
        sampling = self.config.strategy == "sampling"
        # sampling: the same planner and executor calls as beam search, all from the starting
        # kernel, in B chains of N planner calls (as many at once as beam search makes)
        parents = [baseline] * self.config.beam if sampling else beam
        self.waste.clear()
        written = [k for k in self.store.kernels(self.run.id, every_write=True) if k.iteration < t]
        evaluations = run_evaluations(self.store, self.run)
        jobs = []
        n = self.config.plans
        for chain, parent in enumerate(parents):
            brief = self.brief(t, parent, written, evaluations)
            first = chain * n if sampling else 0
            jobs.append(self.maker.children(t, parent, brief, n, first))
        groups = [g for found in await asyncio.gather(*jobs) for g in found]
        decided = await settling.settle(self.measurer, self.phase, t, groups)
        await self.lessons.learn(t, groups, decided)
        limit = self.config.per_plan
        kids = [k for g in groups for k in best_of_plan(g.kernels, g.parent, limit, decided)]
        lineage = {g.parent.hash: g.parent for g in groups}
        nxt = next_beam(beam, kids, self.config.beam, parents=lineage, decided=decided) or beam
        return nxt, best(overall, nxt, decided)

    def brief(
        self,
        t: int,
        parent: Candidate,
        written: Sequence[KernelRecord],
        evaluations: Mapping[str, Evaluation],
    ) -> ParentBrief:
        """What the planner is shown of ``parent`` in iteration ``t``: its lessons, the plans
        tried on its lineage (``written``: every write of the run before ``t``), and what its
        tuning measured before, where it declares tunables."""
        variants: list[str] = []
        if tuning.declared(parent.kernel.source, self.backend.name):
            variants = tuning.variant_lines(
                self.store.kernels(self.run.id), evaluations, parent.kernel, self.backend.name, t
            )
        return ParentBrief(
            tuple(self.lessons.shown(t, parent)),
            tuple(plans_tried(written, evaluations, parent.hash, before=t)),
            tuple(variants),
        )

    def commit(self, t: int, beam: list[Candidate], overall: Candidate) -> None:
        """The iteration's record, its experiences and the run's best, in one transaction; $
        and counts from the store, so they hold across every session of the run."""
        self.phase("committing", t)
        spent = self.store.spent([self.run.id])
        found = run_evaluations(self.store, self.run)
        evaluations = found.values()
        measured = set(found) | run_raced(self.store, self.run)  # raced ones were evaluated
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
        self.store.commit_iteration(self.run.id, record, best_hash=overall.hash)
        if self.progress is not None:
            budget = self.client.budget
            self.progress.iteration = t
            self.progress.phase = ""
            self.progress.best_latency_s = overall.latency
            self.progress.best_pct = overall.evaluation.pct_of_peak
            self.progress.spent_usd = spent.usd
            self.progress.unknown_cost_calls = budget.unknown_cost_calls if budget else 0
            self.progress.refresh()

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
                    self.stopped = self.calls.sentence(f"iteration {t}", self.run.id)
                    return RunStatus.FAILED
                self.commit(t, beam, overall)
            await self.measurer.hold_out([baseline, overall])
            await closing_session(self.measurer, baseline, overall)  # what the run reports
        finally:
            self.measurer.close()
        return RunStatus.BUDGET if self.exhausted() else RunStatus.FINISHED
