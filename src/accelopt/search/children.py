"""Making a parent's children: the planner proposes plans, the executor writes K kernels for each,
each is evaluated and repaired by the fixer while it fails, and one that declares tunables
competes as its fastest variant (``Tuner``). A problem without a kernel to start from gets a
first one the same way, written from its reference (``ChildMaker.draft``).

Every agent call has its own sample index (``search.samples``), so that a resumed iteration asks
the same questions in the same places and is answered from the record.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from accelopt.agents.context import ProblemView
from accelopt.agents.executor import ExecutorInput, WrittenKernel, execute
from accelopt.agents.fixer import NO_CODE, Failure, FixerInput, fix
from accelopt.agents.planner import Plan, PlannerInput, propose
from accelopt.backends.facts import BackendFacts
from accelopt.backends.status import Status
from accelopt.llm.chat import ChatModel
from accelopt.search import samples
from accelopt.search.briefs import ParentBrief
from accelopt.search.config import SearchConfig
from accelopt.search.measuring import Measurer
from accelopt.search.phases import PhaseHook
from accelopt.search.selection import Candidate
from accelopt.store.records import KernelOrigin

FIXABLE = {
    Status.COMPILE_ERROR,
    Status.REJECTED,
    Status.CRASH,
    Status.TIMEOUT,
    Status.INCORRECT,
    Status.SUSPICIOUS,
}

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
class PlanKernels:
    """What one plan of one parent produced: the kernels written for it, evaluated. Their records
    name the parent and the plan too; this is their group, with the parent's evaluation, which
    the beam keeps the best of (``best_of_plan``) and memory pairs with the parent."""

    parent: Candidate
    plan: Plan
    kernels: tuple[Candidate, ...]


# ``Tuner.tune``: a kernel (written for a plan on a parent) or its fastest variant
Tune = Callable[[int, Candidate, Candidate | None, Plan], Awaitable[Candidate]]


@dataclass
class ChildMaker:
    """Plan → write → fix for the parents of a run; what gave nothing usable is counted in
    ``waste`` (the iteration's tally, which its record keeps)."""

    client: ChatModel
    measurer: Measurer
    view: ProblemView
    facts: BackendFacts
    config: SearchConfig
    tune: Tune
    phase: PhaseHook
    waste: Counter[str]

    async def children(
        self, t: int, parent: Candidate, brief: ParentBrief, count: int, first: int = 0
    ) -> list[PlanKernels]:
        """``count`` plans for ``parent`` (planner calls ``first``, ``first + 1``, ...: each
        call site has its own sample index, ``search.samples``), each call shown the titles
        already drafted in this chain (so that they differ; replay keeps the chain
        deterministic); each plan's kernels are written as soon as it arrives."""
        profile = await self.measurer.profile(parent)
        drafted: list[str] = []
        writing: list[asyncio.Future[PlanKernels]] = []
        for n in range(first, first + count):
            given = PlannerInput(
                self.view,
                parent.kernel.source,
                profile,
                self.facts,
                brief.lessons,
                tried=brief.tried,
                drafted=tuple(drafted),
                variants=brief.variants,
            )
            self.phase("planning", t)
            planned = await propose(self.client, given, sample_index=samples.planner(t, n))
            if planned.plan is None:
                self.waste["planner failed"] += 1
                continue
            drafted.append(planned.plan.title)
            writing.append(asyncio.ensure_future(self.write(t, parent, planned.plan, n)))
        return list(await asyncio.gather(*writing))

    async def write(self, t: int, parent: Candidate, plan: Plan, n: int) -> PlanKernels:
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
            *(self.tune(t, k, parent, plan) for k in kernels if k is not None)
        )  # a kernel that declares tunables competes as its fastest variant (no LLM call)
        return PlanKernels(parent, plan, tuple(tuned))

    async def write_one(self, job: ExecutorInput, t: int, slot: int) -> WrittenKernel:
        """Kernel ``slot`` of iteration ``t``; a reply without a usable kernel is asked once
        more (paid and counted, as the published system retries)."""
        reply = await execute(self.client, job, sample_index=samples.executor(t, slot))
        if reply.source is None and reply.call.ok:
            self.waste["executor asked again"] += 1
            again = samples.executor(t, slot, again=True)
            reply = await execute(self.client, job, sample_index=again)
        return reply

    async def evaluate_with_fixes(
        self,
        written: WrittenKernel,
        parent: Candidate | None,
        plan: Plan,
        t: int,
        slot: int,
        rounds: int | None = None,
    ) -> Candidate | None:
        """Admit kernel ``slot`` as written and repair it while it fails (``rounds``, default
        F); a reply that still had no kernel goes to the fixer too. None when nothing usable
        came of the slot. ``parent`` is None for a first kernel written from the reference."""
        admit = self.measurer.admit
        cand = None
        if written.source is not None:
            cand = await admit(written.source, parent, plan, t, KernelOrigin.EXECUTOR)
        elif not written.call.ok:
            self.waste["executor failed"] += 1
            return None
        for round_ in range(self.config.fixer if rounds is None else rounds):
            if cand is not None and cand.evaluation.status not in FIXABLE:
                break
            self.phase("fixing", t)
            given = fixer_input(self.view, self.facts, cand, written, parent, plan)
            repaired = await fix(self.client, given, sample_index=samples.fixer(t, slot, round_))
            if repaired.source is None:
                break
            cand = await admit(repaired.source, parent, plan, t, KernelOrigin.FIXER)
        if cand is None:
            self.waste["executor no code"] += 1
        return cand

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


def fixer_input(
    view: ProblemView,
    facts: BackendFacts,
    cand: Candidate | None,
    written: WrittenKernel,
    parent: Candidate | None,
    plan: Plan,
) -> FixerInput:
    """What the fixer is shown: the failed kernel (or the reply that had none), the last
    correct kernel it descends from, and the plan it was carrying out."""
    if cand is None:
        source, failure = "", Failure(NO_CODE, written.error)
    else:
        e = cand.evaluation
        source, failure = cand.kernel.source, Failure(e.status.value, e.error, e.log)
    parent_source = parent.kernel.source if parent else ""
    return FixerInput(view, facts, source, failure, plan, parent_source)
