"""Tuning a kernel's declared parameters by measuring, with no LLM call (``backends/tunables.py``).

A kernel that PASSED and declares tunables gets up to ``SearchConfig.variants`` variants
(``tunables.sweep``: the whole product when it fits, else single-parameter moves first, then a
seeded random draw). Each is admitted to the run like any kernel, as the same plan's child of the
same parent (origin ``tuned``), and evaluated racing the kernel it varies: one clearly slower
stops timing early. A variant that does not build, fails its checks or crashes is recorded with
its status and left out. The fastest few that could be faster (``compare``: not NOT_FASTER) are
then re-timed beside that kernel in one session on one device, with the search's own rules
(``settling.retime``: its noise floor, and a gain confirmed against the kernel's twin); the
fastest variant found faster there is kept, else the kernel itself.

What a run measured of a kernel's variants is read back as its variant table
(``variants.variant_tables``) and as the planner's lines (``briefs.variant_lines``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.agents.planner import Plan
from accelopt.backends.tunables import base, label, language_of, render, sweep, values_of
from accelopt.search import settling
from accelopt.search.context import RunContext
from accelopt.search.measuring import Measurer
from accelopt.search.selection import Candidate, Comparison, compare
from accelopt.search.variants import declared
from accelopt.store.records import KernelOrigin, KernelRecord

AUTOTUNE_PLAN = Plan(title="autotune", steps=())  # the plan of the variants autotune makes
RACED_IN_SESSION = 3  # the fastest variants re-timed beside the kernel they vary, at most


def _seed(kernel_hash: str, t: int) -> int:
    return int(hashlib.sha256(f"{kernel_hash}:{t}".encode()).hexdigest()[:8], 16)


def tried_labels(
    kernels: Sequence[KernelRecord], source: str, backend: str, before: int
) -> frozenset[str]:
    """The values already tried on ``source`` (itself or a variant of it) in iterations before
    ``before``."""
    language = language_of(backend)
    tunables = declared(source, backend)
    mine = base(source, language)
    return frozenset(
        label(values_of(k.source, tunables, language))
        for k in kernels
        if k.iteration < before and base(k.source, language) == mine
    )


@dataclass(frozen=True)
class Tuner:
    """Variants of the run's kernels, admitted and measured by ``measurer``; at most ``variants``
    per kernel and tuning (0: no tuning)."""

    context: RunContext
    measurer: Measurer
    variants: int

    async def tune(
        self, t: int, cand: Candidate, parent: Candidate | None, plan: Plan
    ) -> Candidate:
        """``cand`` (written for ``plan`` on ``parent``) or its fastest variant, as the module's
        docstring says; ``cand`` itself where it did not pass or declares nothing."""
        ctx = self.context
        backend = ctx.backend.name
        # a name the harness defines (a size of the problem) is not the kernel's to vary: a
        # variant redefining it would compute another problem, and only fail its checks
        sizes = set(ctx.problem.params)
        tunables = [t for t in declared(cand.kernel.source, backend) if t.name not in sizes]
        if not tunables or not cand.evaluation.passed or self.variants == 0:
            return cand
        language = language_of(backend)
        current = values_of(cand.kernel.source, tunables, language)
        tried = tried_labels(ctx.store.kernels(ctx.run.id), cand.kernel.source, backend, t)
        chosen = sweep(tunables, current, self.variants, _seed(cand.hash, t), tried)
        if not chosen:
            return cand
        ctx.phase("tuning", t)
        sources = [render(cand.kernel.source, values, language) for values in chosen]
        admit = self.measurer.admit
        variants = await asyncio.gather(
            *(admit(s, parent, plan, t, KernelOrigin.TUNED, race=cand) for s in sources)
        )
        return await self._race(t, cand, list(variants))

    async def tune_further(self, t: int, cand: Candidate) -> Candidate:
        """``cand`` or its fastest variant, made for ``AUTOTUNE_PLAN`` with ``cand`` as the
        parent: what ``--strategy autotune`` does each iteration to the run's best."""
        return await self.tune(t, cand, cand, AUTOTUNE_PLAN)

    async def _race(self, t: int, cand: Candidate, variants: list[Candidate]) -> Candidate:
        out = Comparison.NOT_FASTER
        hopeful = [
            v
            for v in variants
            if v.hash != cand.hash and compare(v.evaluation, cand.evaluation) != out
        ]
        contenders = sorted(hopeful, key=lambda v: v.latency or float("inf"))[:RACED_IN_SESSION]
        if not contenders:
            return cand
        verdicts = await settling.retime(self.measurer, t, cand, contenders)
        faster = [v for v in contenders if verdicts.get(v.hash) is Comparison.FASTER]
        return faster[0] if faster else cand
