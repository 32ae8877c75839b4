"""A run's headline: its best and starting kernels re-timed side by side at its end.

The figures a run reports are measured in that run, together: the search's evaluations were made
at different times, under different loads, some carried from the cache of an earlier run, so
their ratio is not a speedup anyone measured. At the end of a run the starting kernel and the best
are timed interleaved in one session per tuned workload (``Measurer.session``, kept under the
iteration ``FINAL``); the session's median ratio is the headline speedup, with its interval, and
the latency and % of peak shown are the session's. The best reference (NumPy, PyTorch) is timed
again right after, alone (a session times kernels of one backend), and replaces the run's
earlier figure of that kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from accelopt.backends.base import reference_kernels
from accelopt.backends.kernel import Kernel
from accelopt.profiling.composite import combine
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.measuring import Measurer
from accelopt.search.references import fastest_reference
from accelopt.search.retimings import RetimingRecord, get_retiming
from accelopt.search.selection import Candidate
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

FINAL = -1  # the iteration a run's closing session is kept under


@dataclass(frozen=True)
class Headline:
    """What a run reports, measured at its end in one session."""

    baseline: Evaluation  # fresh, from the session (combined over the tuned workloads)
    best: Evaluation
    speedup: float | None  # the baseline's time over the best's: the session's median ratio
    interval: float | None  # the relative half-width of its 95 % interval
    rounds: int
    measured_at: str  # ISO 8601, UTC
    disturbed: bool = False  # too few clean rounds: the figures are of the slices' floors
    best_by_workload: dict[str, Evaluation] = field(default_factory=dict)  # the session's own

    def as_json(self) -> dict[str, Any]:
        return {
            "speedup": self.speedup,
            "speedup_interval": self.interval,
            "rounds": self.rounds,
            "measured_at": self.measured_at,
            "disturbed": self.disturbed,
            "baseline_latency_s": self.baseline.latency_s,
            "best_latency_s": self.best.latency_s,
            "best_pct_of_peak": self.best.pct_of_peak,
        }


def headline_of(session: RetimingRecord, tuned: Sequence[str]) -> Headline | None:
    """The headline in a closing session (``Measurer.session``: evaluations per workload, then
    per kernel; the first kernel the baseline, the last the best)."""
    found = list(session.evaluations)
    kinds = len(found) // max(1, len(tuned))
    if kinds == 0 or kinds * len(tuned) != len(found):
        return None
    per_kernel = [[found[w * kinds + i] for w in range(len(tuned))] for i in range(kinds)]
    baseline, best = combine(per_kernel[0], tuned), combine(per_kernel[-1], tuned)
    ratio = session.ratios[-1] if kinds > 1 else 1.0
    interval = session.ratio_ci[-1] if kinds > 1 else 0.0
    return Headline(
        baseline=baseline,
        best=best,
        speedup=1.0 / ratio if ratio else None,
        interval=interval,
        rounds=session.rounds,
        measured_at=session.measured_at,
        disturbed=session.disturbed,
        best_by_workload=dict(zip(tuned, per_kernel[-1], strict=True)),
    )


def stored_headline(store: Store, run: RunRecord, tuned: Sequence[str]) -> Headline | None:
    """The run's closing session for its baseline and committed best, or None (a run that
    stopped before its end, or whose best changed since)."""
    if not run.baseline_hash or not run.best_hash:
        return None
    found = get_retiming(store, run.id, FINAL, _hashes(run.baseline_hash, run.best_hash))
    return None if found is None else headline_of(found, tuned)


def _hashes(baseline: str, best: str) -> list[str]:
    return [baseline] if best == baseline else [baseline, best]


async def closing_session(
    measurer: Measurer, baseline: Candidate, best: Candidate
) -> Headline | None:
    """The baseline and the best timed side by side (``FINAL``; a resumed run that already
    did it reads it back), then the run's best reference timed again. None where the session
    gave no figure for each kernel on each workload (its worker failed): the run then reports
    the search's own figures, and says so."""
    group = [baseline] if best.hash == baseline.hash else [baseline, best]
    measurer.context.phase("re-timing side by side", 0)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    session = await measurer.session(FINAL, group, measured_at=stamp)
    headline = headline_of(session, measurer.context.tuned)
    if headline is not None and headline.best.passed:
        await _retime_reference(measurer)
    return headline


async def _retime_reference(measurer: Measurer) -> None:
    """The run's fastest reference timed again, on each tuned workload, replacing its figure."""
    ctx = measurer.context
    store, run = ctx.store, ctx.run
    fastest = fastest_reference(store.references(run.id))
    if fastest is None:
        return
    found = reference_kernels(ctx.problem, ctx.backend.name)
    kernels = [k for k in found if k.backend == fastest.backend]
    if not kernels:
        return
    fresh = await measurer.retimed(Kernel(kernels[0].source, kernels[0].backend, fastest.kernel))
    if fresh.passed:
        store.put_reference(run.id, fresh)
