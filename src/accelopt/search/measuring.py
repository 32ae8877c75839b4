"""Measuring the run's kernels: each admitted to the run and evaluated (racing the kernel it must
beat), re-timing sessions kept in the store, the held-out workloads at the end, and the profile
the agents are shown of a kernel.

Evaluations come from the profiler, which owns the evaluation cache (the store's): a resumed run
measures only what is missing. Re-timing sessions are kept in the store by iteration, never in
the evaluation cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from accelopt.agents.planner import Plan
from accelopt.backends.base import reference_kernels
from accelopt.backends.kernel import Kernel
from accelopt.profiling.composite import combine, combine_ratios
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profile import Profile, build_profile
from accelopt.profiling.profiler import Profiler
from accelopt.search.context import RunContext
from accelopt.search.evaluations import run_evaluations
from accelopt.search.retimings import RetimingRecord, get_retiming, put_retiming
from accelopt.search.selection import Candidate, noise_of
from accelopt.store.records import KernelOrigin, KernelRecord


@dataclass
class Measurer:
    """The kernels of the context's run, recorded and measured by ``profiler`` on its tuned
    workloads (the score is their geometric mean; the first is the run's workload, whose sizes a
    profile describes) and, at the end, on its held-out ones (never shown to the agents)."""

    context: RunContext
    profiler: Profiler
    _profiles: dict[str, asyncio.Future[Profile]] = field(default_factory=dict, init=False)
    _primary: dict[str, Evaluation] = field(default_factory=dict, init=False)  # on ``workload``

    def __post_init__(self) -> None:
        # As many evaluations in flight as the profiler can run (a Ray cluster: many more than
        # asyncio's default thread pool would allow).
        self._pool = ThreadPoolExecutor(max_workers=max(1, self.profiler.capacity))
        # the parent's own work (compiler remarks for profiles) never queues behind evaluations
        self._local = ThreadPoolExecutor(max_workers=2)
        self._sizes = self.context.problem.workload(self.context.workload).sizes
        self._cost = self.context.problem.cost.at(self._sizes)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._local.shutdown(wait=False)

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(fn, *args))

    async def _here(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._local, partial(fn, *args))

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
        kernel = Kernel(source, self.context.backend.name, f"{origin}-{t}")
        record = KernelRecord(
            hash=kernel.hash,
            source=source,
            backend=self.context.backend.name,
            iteration=t,
            origin=origin,
            parent_hash=parent.hash if parent else "",
            plan_title=plan.title if plan else "",
            plan_steps=plan.steps if plan else (),
        )
        self.context.store.add_kernel(self.context.run.id, record)
        return Candidate(record, await self.measure(kernel, t, race or parent))

    async def measure(self, kernel: Kernel, t: int, parent: Candidate | None = None) -> Evaluation:
        """The kernel's evaluation, from the profiler (cached, or measured once however many
        ask for it at the same time): on each tuned workload, combined (``composite``); the
        others are measured only once the first passed, and not beaten by ``parent`` before
        its timing ended (``race_s``: racing)."""
        self.context.phase("evaluating", t)
        first = await self._off_loop(
            self.profiler.race,
            kernel,
            self.context.problem,
            self.context.workload,
            race_s(parent),
        )
        found = [first]
        if first.passed and not first.raced and len(self.context.tuned) > 1:
            rest = [self.evaluate_on(kernel, w) for w in self.context.tuned[1:]]
            found += await asyncio.gather(*rest)
        self._primary[kernel.hash] = first
        evaluation = combine(found, self.context.tuned)
        if self.context.progress is not None:
            self.context.progress.evaluated += 1
            self.context.progress.statuses[evaluation.status.value] += 1
            self.context.progress.refresh()
        return evaluation

    async def evaluate_on(self, kernel: Kernel, workload: str) -> Evaluation:
        evaluation: Evaluation = await self._off_loop(
            self.profiler.evaluate, kernel, self.context.problem, workload
        )
        return evaluation

    async def references(self) -> list[Evaluation]:
        """The problem's references (``backends.base.reference_kernels``: NumPy and the PyTorch
        kinds), each timed on the tuned workloads in this session and combined as a kernel's
        figures are; none for a backend they are not compared with."""
        kernels = reference_kernels(self.context.problem, self.context.backend.name)
        if not kernels:
            return []
        self.context.phase("timing references", 0)

        async def timed(kernel: Kernel) -> Evaluation:
            tuned = self.context.tuned
            found = await asyncio.gather(*(self.evaluate_on(kernel, w) for w in tuned))
            return combine(list(found), self.context.tuned)

        return list(await asyncio.gather(*(timed(k) for k in kernels)))

    async def hold_out(self, kernels: Sequence[Candidate]) -> None:
        """Each kernel measured on each held-out workload (cached in the store, where reports
        find them; a resumed run measures only what is missing)."""
        if not self.context.held_out:
            return
        self.context.phase("holding out", 0)
        jobs = [
            self.evaluate_on(Kernel(c.kernel.source, self.context.backend.name, "held-out"), w)
            for c in {c.hash: c for c in kernels}.values()
            for w in self.context.held_out
        ]
        await asyncio.gather(*jobs)

    async def session(
        self, t: int, group: Sequence[Candidate], measured_at: str = ""
    ) -> RetimingRecord:
        """``group`` timed in one session per tuned workload (the first is the reference; a
        second that is the first again is its twin), or as the store kept it; ``measured_at``
        is kept with it (a run's closing session)."""
        ctx = self.context
        hashes = tuple(c.hash for c in group)
        kept = get_retiming(ctx.store, ctx.run.id, t, hashes)
        if kept is not None:
            return kept
        kernels = [Kernel(c.kernel.source, ctx.backend.name, f"retime-{t}") for c in group]
        sessions = [
            await self._off_loop(self.profiler.retime, kernels, ctx.problem, w) for w in ctx.tuned
        ]  # one workload after another: each session has the device to itself
        combined = [
            combine_ratios([s.ratios[i] for s in sessions], [s.ratio_ci[i] for s in sessions])
            for i in range(len(group))
        ]
        record = RetimingRecord(
            kernels=hashes,
            ratios=tuple(r for r, _ in combined),
            ratio_ci=tuple(c for _, c in combined),
            twin=len(hashes) > 1 and hashes[1] == hashes[0],
            rounds=min(s.rounds for s in sessions),
            clean_rounds=min(
                s.rounds if s.clean_rounds is None else s.clean_rounds for s in sessions
            ),
            disturbed=any(s.disturbed for s in sessions),
            evaluations=tuple(e for s in sessions for e in s.evaluations),
            measured_at=measured_at,
        )
        return put_retiming(ctx.store, ctx.run.id, t, record)

    async def retimed(self, kernel: Kernel) -> Evaluation:
        """A fresh evaluation of ``kernel`` (never cached) on each tuned workload, combined."""
        ctx = self.context
        sessions = [
            await self._off_loop(self.profiler.retime, [kernel], ctx.problem, w) for w in ctx.tuned
        ]
        return combine([s.evaluations[0] for s in sessions], self.context.tuned)

    async def profile(self, cand: Candidate) -> Profile:
        """The kernel's profile for the agents, made once however many ask for it."""
        if cand.hash not in self._profiles:
            self._profiles[cand.hash] = asyncio.ensure_future(self._build_profile(cand))
        return await self._profiles[cand.hash]

    async def _build_profile(self, cand: Candidate) -> Profile:
        source = cand.kernel.source
        remarks = await self._here(
            self.context.backend.remarks, source, self.context.problem, self._sizes
        )
        return build_profile(self.primary(cand), self._cost, self.context.hardware, remarks)

    def primary(self, cand: Candidate) -> Evaluation:
        """The candidate's evaluation on ``workload`` (the sizes its profile describes): itself
        on one tuned workload; else measured this session, or cached (a resumed run)."""
        if len(self.context.tuned) == 1:
            return cand.evaluation
        if cand.hash not in self._primary:  # read the run's once, not per candidate
            ctx = self.context
            found = run_evaluations(ctx.store, ctx.run, workload=ctx.workload)
            for kernel_hash, evaluation in found.items():
                self._primary.setdefault(kernel_hash, evaluation)
        return self._primary.get(cand.hash, cand.evaluation)


def race_s(parent: Candidate | None) -> float | None:
    """The latency a child must beat to go on being timed: its parent's, widened by the noise
    the search's comparisons allow (``selection.noise_of``). A child whose interval lies wholly
    above it is NOT_FASTER whatever more timing would say, so its timing stops there."""
    if parent is None or parent.latency is None or parent.evaluation.disturbed:
        return None  # a disturbed figure is no evidence to stop another kernel's timing on
    return parent.latency * (1 + noise_of(parent.evaluation))
