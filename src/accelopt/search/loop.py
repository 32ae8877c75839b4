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
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from accelopt.agents.attempts import TriedPlan
from accelopt.agents.context import ProblemView, problem_view
from accelopt.agents.executor import ExecutorInput, WrittenKernel, execute
from accelopt.agents.fixer import NO_CODE, FixerInput, fix
from accelopt.agents.planner import Plan, PlannerInput, propose
from accelopt.agents.summarizer import SummarizerInput, summarize
from accelopt.backends.base import Backend
from accelopt.backends.facts import BackendFacts
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.chat import ChatModel
from accelopt.memory.records import Experience, ExperienceKind
from accelopt.memory.retrieval import retrieve
from accelopt.memory.selection import Outcome, Pair, select_pairs
from accelopt.problems.records import Problem
from accelopt.profiling.composite import combine, combine_ratios
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profile import Profile, build_profile
from accelopt.profiling.profiler import Profiler
from accelopt.search import samples, tuning
from accelopt.search.config import SearchConfig
from accelopt.search.history import plans_tried
from accelopt.search.progress import Progress
from accelopt.search.selection import (
    Candidate,
    Comparison,
    best,
    best_of_plan,
    compare,
    decide,
    next_beam,
    noise_of,
    session_compare,
    session_verdicts,
    slower,
)
from accelopt.store.records import (
    IterationRecord,
    KernelOrigin,
    KernelRecord,
    RunRecord,
    RunStatus,
)
from accelopt.store.store import Store

FIXABLE = {
    Status.COMPILE_ERROR, Status.REJECTED, Status.CRASH, Status.TIMEOUT, Status.INCORRECT,
    Status.SUSPICIOUS,
}  # fmt: skip
# What the loop reports through ``on_phase`` (and the progress line) as it enters each step.
PHASES = (
    "drafting", "planning", "writing", "evaluating", "fixing", "tuning", "settling", "learning",
    "committing", "holding out",
)  # fmt: skip
# Children re-timed beside their parent in one session, at most (beside the parent and its twin,
# one fewer: ``retime``): each kernel of a session holds its own rotation buffers (hundreds of
# MiB), so more are split into several sessions.
SESSION_CHILDREN = 3

PhaseHook = Callable[[str, int], None]

# A problem without a kernel to start from gets a first one written from its reference: the
# executor carries out this plan (at most DRAFT_SAMPLES times, each repaired by the fixer).
DRAFT_PLAN = Plan(
    title="A first correct kernel, written from the reference",
    steps=(
        "Compute exactly what the reference computes, for the sizes given, taking the "
        "arguments in the signature's order (inputs, then outputs).",
        "Keep it straightforward: plain loops in the reference's order of operations, "
        "accumulating in a wider type where the reference sums many terms; parallelize only "
        "the outermost independent loop.",
        "Correctness first: the search makes it fast afterwards.",
    ),
)
DRAFT_SAMPLES = 2
DRAFT_FIX_ROUNDS = 2


@dataclass(frozen=True)
class Child:
    """What one (parent, plan) produced: the kernels written for it, evaluated."""

    parent: Candidate
    plan: Plan
    kernels: tuple[Candidate, ...]


@dataclass
class Optimizer:
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
        self.view: ProblemView = problem_view(self.problem, self.workload, self.tuned[1:])
        self.facts: BackendFacts = self.backend.facts(self.hardware)
        self.sizes = self.problem.workload(self.workload).sizes
        self.cost = self.problem.cost.evaluate(self.sizes)
        # As many evaluations in flight as the profiler can run (a Ray cluster: many more than
        # asyncio's default thread pool would allow).
        self._pool = ThreadPoolExecutor(max_workers=max(1, self.profiler.capacity))
        # the parent's own work (compiler remarks for profiles) never queues behind evaluations
        self._local = ThreadPoolExecutor(max_workers=2)
        self._profiles: dict[str, asyncio.Future[Profile]] = {}
        self._primary: dict[str, Evaluation] = {}  # kernel hash -> evaluation on ``workload``
        self.waste: Counter[str] = Counter()  # this iteration's calls that gave nothing usable

    def phase(self, name: str, t: int) -> None:
        if self.on_phase is not None:
            self.on_phase(name, t)
        if self.progress is not None:
            self.progress.phase = f"{name} iteration {t}" if t else name
            self.progress.refresh()

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(fn, *args))

    async def _here(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._local, partial(fn, *args))

    # -- evaluation ----------------------------------------------------------------------------
    async def measure(self, kernel: Kernel, t: int, parent: Candidate | None = None) -> Evaluation:
        """The kernel's evaluation, from the profiler (cached, or measured once however many
        ask for it at the same time): on each tuned workload, combined (``composite``); the
        others are measured only once the first passed, and not beaten by ``parent`` before
        its timing ended (``race_s``: racing)."""
        self.phase("evaluating", t)
        first = await self._off_loop(
            self.profiler.race, kernel, self.problem, self.workload, race_s(parent)
        )
        found = [first]
        if first.passed and not first.raced and len(self.tuned) > 1:
            rest = [self.evaluate_on(kernel, w) for w in self.tuned[1:]]
            found += await asyncio.gather(*rest)
        self._primary[kernel.hash] = first
        evaluation = combine(found, self.tuned)
        if self.progress is not None:
            self.progress.evaluated += 1
            self.progress.statuses[evaluation.status.value] += 1
            self.progress.refresh()
        return evaluation

    async def evaluate_on(self, kernel: Kernel, workload: str) -> Evaluation:
        evaluation: Evaluation = await self._off_loop(
            self.profiler.evaluate, kernel, self.problem, workload
        )
        return evaluation

    async def hold_out(self, kernels: Sequence[Candidate]) -> None:
        """Each kernel measured on each held-out workload (cached in the store, where reports
        find them; a resumed run measures only what is missing)."""
        if not self.held_out:
            return
        self.phase("holding out", 0)
        jobs = [
            self.evaluate_on(Kernel(c.kernel.source, self.backend.name, "held-out"), w)
            for c in {c.hash: c for c in kernels}.values()
            for w in self.held_out
        ]
        await asyncio.gather(*jobs)

    async def admit(
        self,
        source: str,
        parent: Candidate | None,
        plan: Plan | None,
        t: int,
        origin: KernelOrigin,
        race: Candidate | None = None,
    ) -> Candidate:
        """Record a new kernel in the run, then evaluate it (or reuse its evaluation), racing
        ``race`` (default: its parent)."""
        kernel = Kernel(source, self.backend.name, f"{origin}-{t}")
        record = KernelRecord(
            hash=kernel.hash,
            source=source,
            backend=self.backend.name,
            iteration=t,
            origin=origin,
            parent_hash=parent.hash if parent else "",
            plan_title=plan.title if plan else "",
            plan_steps=plan.steps if plan else (),
        )
        self.store.add_kernel(self.run.id, record)
        return Candidate(record, await self.measure(kernel, t, race or parent))

    # -- agents --------------------------------------------------------------------------------
    async def profile(self, cand: Candidate) -> Profile:
        """The kernel's profile for the planner, made once however many plans ask for it."""
        if cand.hash not in self._profiles:
            self._profiles[cand.hash] = asyncio.ensure_future(self._build_profile(cand))
        return await self._profiles[cand.hash]

    async def _build_profile(self, cand: Candidate) -> Profile:
        remarks = await self._here(
            self.backend.remarks, cand.kernel.source, self.problem, self.sizes
        )
        return build_profile(self.primary(cand), self.cost, self.hardware, remarks)

    def primary(self, cand: Candidate) -> Evaluation:
        """The candidate's evaluation on ``workload`` (the sizes its profile describes): itself
        on one tuned workload; else measured this session, or cached (a resumed run)."""
        if len(self.tuned) == 1:
            return cand.evaluation
        if cand.hash not in self._primary:  # read the run's once, not per candidate
            found = self.store.run_evaluations(self.run.id, workload=self.workload)
            for kernel_hash, evaluation in found.items():
                self._primary.setdefault(kernel_hash, evaluation)
        return self._primary.get(cand.hash, cand.evaluation)

    def lessons(self, t: int, parent: Candidate) -> list[Experience]:
        """The lessons ``parent`` is shown in iteration ``t``: retrieved when the iteration first
        starts and recorded, so that a resumed iteration shows exactly the same ones."""
        if self.config.memory == "off" or self.config.lessons == 0:
            return []
        ids = self.store.get_retrieval(self.run.id, t, parent.hash)
        if ids is None:
            found = retrieve(
                self.store,
                problem_text=f"{self.problem.name} {self.problem.description}",
                kernel_text=parent.kernel.source,
                k=self.config.lessons,
                scope=self.config.memory,
                run_id=self.run.id,
                backend=self.backend.name,
                hardware=self.hardware.key(),
                problem=self.problem.name,
            )
            found_ids = [e.id for e in found if e.id is not None]
            ids = self.store.save_retrieval(self.run.id, t, parent.hash, found_ids)
        return self.store.experiences_by_id(ids)

    async def plan_parent(
        self,
        t: int,
        parent: Candidate,
        count: int,
        lessons: list[Experience],
        tried: Sequence[TriedPlan],
        first: int = 0,
    ) -> list[Child]:
        """``count`` plans for ``parent`` (planner calls ``first``, ``first + 1``, ...: each
        call site has its own sample index, ``search.samples``), each call shown the titles
        already drafted in this chain (so that they differ; replay keeps the chain
        deterministic); each plan's kernels are written as soon as it arrives."""
        profile = await self.profile(parent)
        variants = []  # what its tuning measured before, where it declares tunables
        if tuning.declared(parent.kernel.source, self.backend.name):
            variants = tuning.variant_lines(
                self.store.kernels(self.run.id), self.store.run_evaluations(self.run.id),
                parent.kernel, self.backend.name, t,
            )  # fmt: skip
        drafted: list[str] = []
        writing: list[asyncio.Future[Child]] = []
        for n in range(first, first + count):
            given = PlannerInput(self.view, parent.kernel.source, profile, self.facts, lessons,
                                 tried=tuple(tried), drafted=tuple(drafted),
                                 variants=tuple(variants))  # fmt: skip
            self.phase("planning", t)
            planned = await propose(self.client, given, sample_index=samples.planner(t, n))
            if planned.plan is None:
                self.waste["planner failed"] += 1
                continue
            drafted.append(planned.plan.title)
            writing.append(asyncio.ensure_future(self.write(t, parent, planned.plan, n)))
        return list(await asyncio.gather(*writing))

    async def write(self, t: int, parent: Candidate, plan: Plan, n: int) -> Child:
        """K kernels for one plan, evaluated and repaired."""
        job = ExecutorInput(self.view, parent.kernel.source, plan, self.facts)
        self.phase("writing", t)
        slots = [n * self.config.samples + k for k in range(self.config.samples)]
        written = await asyncio.gather(*(self.write_one(job, t, slot) for slot in slots))
        kernels = await asyncio.gather(
            *(
                self.evaluate_with_fixes(r, parent, plan, t, slot)
                for r, slot in zip(written, slots, strict=True)
            )
        )
        tuned = await asyncio.gather(
            *(tuning.tune(self, t, k, parent, plan) for k in kernels if k is not None)
        )  # a kernel that declares tunables competes as its fastest variant (no LLM call)
        return Child(parent, plan, tuple(tuned))

    async def write_one(self, job: ExecutorInput, t: int, slot: int) -> WrittenKernel:
        """Kernel ``slot`` of iteration ``t``; a reply without a usable kernel is asked once
        more (paid and counted, as the published system retries)."""
        result = await execute(self.client, job, sample_index=samples.executor(t, slot))
        if result.source is None and result.call.ok:
            self.waste["executor asked again"] += 1
            again = samples.executor(t, slot, again=True)
            result = await execute(self.client, job, sample_index=again)
        return result

    async def evaluate_with_fixes(
        self, written: WrittenKernel, parent: Candidate | None, plan: Plan, t: int, slot: int,
        rounds: int | None = None,
    ) -> Candidate | None:  # fmt: skip
        """Admit kernel ``slot`` as written and repair it while it fails (``rounds``, default
        F); a reply that still had no kernel goes to the fixer too. None when nothing usable
        came of the slot. ``parent`` is None for a first kernel written from the reference."""
        cand = None
        if written.source is not None:
            cand = await self.admit(written.source, parent, plan, t, KernelOrigin.EXECUTOR)
        elif not written.call.ok:
            self.waste["executor failed"] += 1
            return None
        for round_ in range(self.config.fixer if rounds is None else rounds):
            if cand is not None and cand.evaluation.status not in FIXABLE:
                break
            self.phase("fixing", t)
            given = self.fixer_input(cand, written, parent, plan)
            repaired = await fix(self.client, given, sample_index=samples.fixer(t, slot, round_))
            if repaired.source is None:
                break
            cand = await self.admit(repaired.source, parent, plan, t, KernelOrigin.FIXER)
        if cand is None:
            self.waste["executor no code"] += 1
        return cand

    def fixer_input(
        self, cand: Candidate | None, written: WrittenKernel, parent: Candidate | None, plan: Plan
    ) -> FixerInput:
        """What the fixer is shown: the failed kernel (or the reply that had none), the last
        correct kernel it descends from, and the plan it was carrying out."""
        if cand is None:
            source, status, error, log = "", NO_CODE, written.error, ""
        else:
            e = cand.evaluation
            source, status, error, log = cand.kernel.source, e.status.value, e.error, e.log
        return FixerInput(
            self.view, source, status, error, log, self.facts,
            parent_source=parent.kernel.source if parent else "", plan_title=plan.title,
            plan_steps=plan.steps,
        )  # fmt: skip

    async def draft(self) -> Candidate | None:
        """A first kernel when the problem has none to start from: written by the executor from
        the reference (DRAFT_PLAN), each of DRAFT_SAMPLES attempts repaired by the fixer for at
        least DRAFT_FIX_ROUNDS rounds; the first that passes, or None. Iteration 0's calls: a
        resumed run replays them, and pays for none again."""
        job = ExecutorInput(self.view, "", DRAFT_PLAN, self.facts)
        rounds = max(self.config.fixer, DRAFT_FIX_ROUNDS)
        for slot in range(DRAFT_SAMPLES):
            self.phase("drafting", 0)
            written = await self.write_one(job, 0, slot)
            cand = await self.evaluate_with_fixes(written, None, DRAFT_PLAN, 0, slot, rounds)
            if cand is not None and cand.evaluation.passed:
                return cand
        return None

    # -- selection -----------------------------------------------------------------------------
    async def settle(self, t: int, children: Sequence[Child]) -> dict[str, Comparison]:
        """Re-time each parent with its children whose gain is within twice the noise, in one
        session (interleaved on one device; at most SESSION_CHILDREN children a session, each
        holding its own buffers); the verdict per child hash."""
        unsure: dict[str, tuple[Candidate, dict[str, Candidate]]] = {}
        for child in children:
            for kid in child.kernels:
                if kid.hash == child.parent.hash:
                    continue
                if compare(kid.evaluation, child.parent.evaluation) is Comparison.UNSURE:
                    unsure.setdefault(child.parent.hash, (child.parent, {}))[1][kid.hash] = kid
        if not unsure:
            return {}
        self.phase("settling", t)
        sessions = [
            (parent, group)
            for parent, kids in unsure.values()
            for group in _chunks(list(kids.values()), SESSION_CHILDREN)
        ]
        verdicts = await asyncio.gather(*(self.retime(t, p, kids) for p, kids in sessions))
        return {h: v for found in verdicts for h, v in found.items()}

    async def retime(
        self, t: int, parent: Candidate, kids: list[Candidate]
    ) -> dict[str, Comparison]:
        """One session: the parent and ``kids`` timed interleaved. A child it finds faster is
        timed again beside the parent and its twin (the parent again, in a kernel process of its
        own: ``stats.against_twin``), and that session's verdict is the one kept. Sessions
        are kept in the store (a resumed iteration reuses them), never in the evaluation cache."""
        first = await self._session(t, [parent, *kids])
        verdicts = {kid.hash: session_compare(*found)
                    for kid, found in zip(kids, session_verdicts(first), strict=True)}  # fmt: skip
        claimed = [kid for kid in kids if verdicts[kid.hash] is Comparison.FASTER]
        for group in _chunks(claimed, SESSION_CHILDREN - 1):
            again = await self._session(t, [parent, parent, *group])
            found = zip(group, session_verdicts(again), strict=True)
            verdicts |= {kid.hash: session_compare(*ratio) for kid, ratio in found}
        return verdicts

    async def _session(self, t: int, group: list[Candidate]) -> dict[str, Any]:
        """``group`` timed in one session per tuned workload (the first is the reference; a
        second that is the first again is its twin), or as the store kept it."""
        hashes = [c.hash for c in group]
        data = self.store.get_retiming(self.run.id, t, hashes)
        if data is not None:
            return data
        kernels = [Kernel(c.kernel.source, self.backend.name, f"retime-{t}") for c in group]
        sessions = [
            await self._off_loop(self.profiler.retime, kernels, self.problem, w) for w in self.tuned
        ]  # one workload after another: each session has the device to itself
        combined = [
            combine_ratios([s.ratios[i] for s in sessions], [s.ratio_ci[i] for s in sessions])
            for i in range(len(group))
        ]
        return self.store.put_retiming(self.run.id, t, hashes, {
            "ratios": [r for r, _ in combined],
            "ratio_ci": [c for _, c in combined],
            "twin": len(hashes) > 1 and hashes[1] == hashes[0],
            "rounds": min(s.rounds for s in sessions),
            "evaluations": [e.model_dump() for s in sessions for e in s.evaluations],
        })  # fmt: skip

    async def learn(
        self, t: int, children: Sequence[Child], decided: dict[str, Comparison]
    ) -> None:
        """Choose this iteration's experiences (published rule, noise-aware) and have each
        summarized; they stay invisible until the iteration is committed."""
        if self.config.memory == "off" or self.config.experience_slots == 0:
            return
        self.phase("learning", t)
        outcomes = [
            _outcome(c, k, decided) for c in children if c.parent.latency for k in c.kernels
        ]
        pairs = select_pairs(outcomes, slots=self.config.experience_slots)
        found = {c.parent.hash: c.parent for c in children}
        found |= {k.hash: k for c in children for k in c.kernels}
        plans = {(c.parent.hash, c.plan.title): c.plan for c in children}
        await asyncio.gather(*(self.summarize_pair(t, p, found, plans) for p in pairs))

    async def summarize_pair(
        self,
        t: int,
        pair: Pair,
        found: dict[str, Candidate],
        plans: dict[tuple[str, str], Plan],
    ) -> None:
        slow, fast = found[pair.slow_hash], found[pair.fast_hash]
        plan = plans[(pair.parent_hash, pair.plan_title)]
        given = SummarizerInput(
            self.view, slow.kernel.source, fast.kernel.source, pair.speedup, self.facts.language,
            plan_title=plan.title, plan_steps=plan.steps,
            slow_profile=await self.profile(slow), fast_profile=await self.profile(fast),
            plan_made_slower=pair.kind == ExperienceKind.NEGATIVE,
        )  # fmt: skip
        result = await summarize(self.client, given, sample_index=samples.summarizer(t))
        if result.lesson is None:
            self.waste["summarizer no lesson" if result.no_lesson else "summarizer failed"] += 1
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
                iteration=t,
                parent_hash=pair.parent_hash,
                plan_title=pair.plan_title,
            )
        )

    # -- the loop ------------------------------------------------------------------------------
    async def iteration(
        self, t: int, beam: list[Candidate], baseline: Candidate, overall: Candidate
    ) -> tuple[list[Candidate], Candidate]:
        """One iteration from ``beam``: the next beam and the run's best after it."""
        if self.config.strategy == "autotune":  # the best so far, tuned further: no LLM call
            top = await tuning.tune(self, t, overall, overall, tuning.AUTOTUNE_PLAN)
            return [top], top
        sampling = self.config.strategy == "sampling"
        # sampling: the same planner and executor calls as beam search, all from the starting
        # kernel, in B chains of N planner calls (as many at once as beam search makes)
        parents = [baseline] * self.config.beam if sampling else beam
        self.waste = Counter()
        kernels = [k for k in self.store.kernels(self.run.id, every_write=True) if k.iteration < t]
        evaluations = self.store.run_evaluations(self.run.id)
        jobs = []
        n = self.config.plans
        for chain, parent in enumerate(parents):
            lessons = self.lessons(t, parent)
            tried = plans_tried(kernels, evaluations, parent.hash, before=t)
            first = chain * n if sampling else 0
            jobs.append(self.plan_parent(t, parent, n, lessons, tried, first))
        children = [c for group in await asyncio.gather(*jobs) for c in group]
        decided = await self.settle(t, children)
        await self.learn(t, children, decided)
        limit = self.config.per_plan
        kids = [k for c in children for k in best_of_plan(c.kernels, c.parent, limit, decided)]
        lineage = {c.parent.hash: c.parent for c in children}
        nxt = next_beam(beam, kids, self.config.beam, parents=lineage, decided=decided) or beam
        return nxt, best(overall, nxt, decided)

    def commit(self, t: int, beam: list[Candidate], overall: Candidate) -> None:
        """The iteration's record, its experiences and the run's best, in one transaction; $
        and counts from the store, so they hold across every session of the run."""
        self.phase("committing", t)
        spent = self.store.spent([self.run.id])
        found = self.store.run_evaluations(self.run.id)
        evaluations = found.values()
        measured = set(found) | self.store.run_raced(self.run.id)  # raced ones were evaluated
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
        held-out workloads (no LLM call: also when the budget ran out); returns the run's final
        status."""
        try:
            for t in range(start, self.config.iterations + 1):
                if self.exhausted():
                    break
                beam, overall = await self.iteration(t, beam, baseline, overall)
                self.commit(t, beam, overall)
            await self.hold_out([baseline, overall])
        finally:
            self._pool.shutdown(wait=False)
            self._local.shutdown(wait=False)
        return RunStatus.BUDGET if self.exhausted() else RunStatus.FINISHED


def _outcome(child: Child, kid: Candidate, decided: dict[str, Comparison]) -> Outcome:
    """What memory selection needs of one kernel written for ``child``'s plan, with the beam's
    noise-aware verdicts (faster than its parent; slower than it)."""
    parent = child.parent
    return Outcome(
        parent.hash,
        child.plan.title,
        kid.hash,
        parent.latency or 0.0,
        kid.latency,
        faster=decide(kid, parent, decided),
        slower=slower(kid.evaluation, parent.evaluation),
    )


def race_s(parent: Candidate | None) -> float | None:
    """The latency a child must beat to go on being timed: its parent's, widened by the noise
    the search's comparisons allow (``selection.noise_of``). A child whose interval lies wholly
    above it is NOT_FASTER whatever more timing would say, so its timing stops there."""
    if parent is None or parent.latency is None:
        return None
    return parent.latency * (1 + noise_of(parent.evaluation))


def _chunks(items: list[Candidate], size: int) -> list[list[Candidate]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
