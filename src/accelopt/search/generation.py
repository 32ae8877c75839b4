"""One generation of children the agents write: each parent's plans written, evaluated and
repaired (``ChildMaker``), those within the noise of their parent re-timed beside it
(``settling``), the lessons of the iteration learned (``Lessons``), and the next beam chosen
(``selection.next_beam``). What the planner is shown of each parent is its ``ParentBrief``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelopt.profiling.evaluation import Evaluation
from accelopt.search import settling
from accelopt.search.briefs import ParentBrief, variant_lines
from accelopt.search.children import ChildMaker
from accelopt.search.config import SearchConfig
from accelopt.search.context import RunContext
from accelopt.search.evaluations import run_evaluations
from accelopt.search.history import plans_tried
from accelopt.search.lessons import Lessons
from accelopt.search.selection import Candidate, best, best_of_plan, next_beam
from accelopt.search.strategies.base import Frontier, Step
from accelopt.search.variants import declared
from accelopt.store.records import KernelRecord


@dataclass(frozen=True)
class Generation:
    """Children of the context's run written by ``maker``, settled by its measurer, learned
    from by ``lessons``, kept as ``config`` says (B, N, per plan)."""

    context: RunContext
    config: SearchConfig
    maker: ChildMaker
    lessons: Lessons

    async def grow(
        self, t: int, parents: Sequence[Candidate], first_plans: Sequence[int], at: Frontier
    ) -> Step:
        """Iteration ``t`` from ``parents`` (each one's planner calls numbered from its
        ``first_plans`` entry): the next beam, from ``at.beam`` and the children, and the run's
        best after it."""
        ctx = self.context
        written = [k for k in ctx.store.kernels(ctx.run.id, every_write=True) if k.iteration < t]
        evaluations = run_evaluations(ctx.store, ctx.run)
        n = self.config.plans
        jobs = [
            self.maker.children(t, parent, self.brief(t, parent, written, evaluations), n, first)
            for parent, first in zip(parents, first_plans, strict=True)
        ]
        groups = [g for found in await asyncio.gather(*jobs) for g in found]
        decided = await settling.settle(self.maker.measurer, t, groups)
        await self.lessons.learn(t, groups, decided)
        limit = self.config.per_plan
        kids = [k for g in groups for k in best_of_plan(g.kernels, g.parent, limit, decided)]
        lineage = {g.parent.hash: g.parent for g in groups}
        beam = at.beam
        nxt = next_beam(beam, kids, self.config.beam, parents=lineage, decided=decided) or beam
        return Step(nxt, best(at.best, nxt, decided))

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
        ctx = self.context
        backend = ctx.backend.name
        variants: list[str] = []
        if declared(parent.kernel.source, backend):
            kernels = ctx.store.kernels(ctx.run.id)
            variants = variant_lines(kernels, evaluations, parent.kernel, backend, t)
        return ParentBrief(
            tuple(self.lessons.shown(t, parent)),
            tuple(plans_tried(written, evaluations, parent.hash, before=t)),
            tuple(variants),
        )
