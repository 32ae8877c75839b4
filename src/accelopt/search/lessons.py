"""The run's lessons: those each parent is shown, and those an iteration teaches.

The lessons a parent is shown in an iteration are retrieved when the iteration first starts and
recorded, so that a resumed iteration shows exactly the same ones. What an iteration teaches is
chosen by the published rule, noise-aware (``memory.pairs``), summarized, and stored as
experiences that stay invisible to retrieval until the iteration is committed; they are unique
per (run, iteration, parent, plan).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from accelopt.agents.context import ProblemView
from accelopt.agents.planner import Plan
from accelopt.agents.summarizer import SummarizerInput, summarize
from accelopt.llm.chat import ChatModel
from accelopt.memory.pairs import Outcome, Pair, select_pairs
from accelopt.memory.records import Experience, ExperienceKind
from accelopt.memory.retrieval import Lookup, rank
from accelopt.profiling.profile import Profile
from accelopt.search import samples
from accelopt.search.children import PlanKernels
from accelopt.search.config import SearchConfig
from accelopt.search.context import RunContext
from accelopt.search.selection import Candidate, Comparison, decide, slower


@dataclass
class Lessons:
    """Lessons in and out of memory for the context's run (``view``: its problem as the agents
    see it; ``language``: the planner's), kept per backend and hardware (``HardwareSpec.key``);
    a summary that gave no lesson is counted in ``waste`` (the iteration's tally)."""

    context: RunContext
    client: ChatModel
    config: SearchConfig
    view: ProblemView
    language: str
    profile: Callable[[Candidate], Awaitable[Profile]]
    waste: Counter[str]

    def shown(self, t: int, parent: Candidate) -> list[Experience]:
        """The lessons ``parent`` is shown in iteration ``t``: retrieved when the iteration first
        starts and recorded, so that a resumed iteration shows exactly the same ones."""
        if self.config.memory == "off" or self.config.lessons == 0:
            return []
        store, run_id = self.context.store, self.context.run.id
        ids = store.get_retrieval(run_id, t, parent.hash)
        if ids is None:
            view, config = self.view, self.config
            lookup = Lookup(
                f"{view.name} {view.description}",
                parent.kernel.source,
                self.context.backend.name,
                self.context.hardware.key(),
                view.name,
                config.lessons,
                config.memory,
                run_id,
            )
            found_ids = [e.id for e, _ in rank(store, lookup) if e.id is not None]
            ids = store.save_retrieval(run_id, t, parent.hash, found_ids)
        return store.experiences_by_id(ids)

    async def learn(
        self, t: int, groups: Sequence[PlanKernels], decided: Mapping[str, Comparison]
    ) -> None:
        """Choose this iteration's experiences (published rule, noise-aware) and have each
        summarized; they stay invisible until the iteration is committed."""
        if self.config.memory == "off" or self.config.experience_slots == 0:
            return
        self.context.phase("learning", t)
        outcomes = [_outcome(g, k, decided) for g in groups if g.parent.latency for k in g.kernels]
        pairs = select_pairs(outcomes, slots=self.config.experience_slots)
        found = {g.parent.hash: g.parent for g in groups}
        found |= {k.hash: k for g in groups for k in g.kernels}
        plans = {(g.parent.hash, g.plan.title): g.plan for g in groups}
        await asyncio.gather(*(self._summarize(t, p, found, plans) for p in pairs))

    async def _summarize(
        self,
        t: int,
        pair: Pair,
        found: Mapping[str, Candidate],
        plans: Mapping[tuple[str, str], Plan],
    ) -> None:
        slow, fast = found[pair.slow_hash], found[pair.fast_hash]
        given = SummarizerInput(
            self.view,
            slow.kernel.source,
            fast.kernel.source,
            pair.speedup,
            self.language,
            plan=plans[(pair.parent_hash, pair.plan_title)],
            slow_profile=await self.profile(slow),
            fast_profile=await self.profile(fast),
            plan_made_slower=pair.kind == ExperienceKind.NEGATIVE,
        )
        result = await summarize(self.client, given, sample_index=samples.summarizer(t))
        if result.lesson is None:
            self.waste["summarizer no lesson" if result.no_lesson else "summarizer failed"] += 1
            return
        self.context.store.add_experience(
            Experience(
                lesson=result.lesson,
                kind=pair.kind,
                speedup=pair.speedup,
                problem=self.view.name,
                backend=self.context.backend.name,
                hardware=self.context.hardware.key(),
                model=result.call.model,
                run_id=self.context.run.id,
                slow_hash=pair.slow_hash,
                fast_hash=pair.fast_hash,
                iteration=t,
                parent_hash=pair.parent_hash,
                plan_title=pair.plan_title,
            )
        )


def _outcome(group: PlanKernels, kid: Candidate, decided: Mapping[str, Comparison]) -> Outcome:
    """What memory selection needs of one kernel written for ``group``'s plan, with the beam's
    noise-aware verdicts (faster than its parent; slower than it)."""
    parent = group.parent
    return Outcome(
        parent.hash,
        group.plan.title,
        kid.hash,
        parent.latency or 0.0,
        kid.latency,
        faster=decide(kid, parent, decided),
        slower=slower(kid.evaluation, parent.evaluation),
    )
