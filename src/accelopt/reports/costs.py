"""What a run's result cost: dollars per point of % of peak gained, LLM calls per improvement
kept, and the tuned variants measured for free (pure, from the store's records)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelopt.llm.client import Usage
from accelopt.store.records import IterationRecord, KernelOrigin, KernelRecord


@dataclass(frozen=True)
class ResultCost:
    usd: float  # every session's priced calls (replays cost nothing)
    unknown_calls: int  # calls without a price: ``usd`` is then a lower bound
    gain_points: float | None  # the best's % of peak minus the baseline's, in points
    usd_per_point: float | None  # None when nothing was gained
    llm_calls: int  # calls made in every session (replays left out), failed ones included
    improvements: int  # times an iteration kept a new best kernel
    calls_per_improvement: float | None  # None when none was kept
    variants: int  # tuned variants measured: no LLM call, $0

    @property
    def text(self) -> str:
        """One line for a terminal."""
        gain = "—" if self.gain_points is None else f"{self.gain_points:+.1f} points of peak"
        per_point = "—" if self.usd_per_point is None else f"${self.usd_per_point:.4f} a point"
        each = self.calls_per_improvement
        per_kept = "—" if each is None else f"{each:.1f}"
        unknown = f" (+{self.unknown_calls} unpriced)" if self.unknown_calls else ""
        return (
            f"${self.usd:.4f}{unknown} for {gain}: {per_point}; {self.llm_calls} LLM calls for "
            f"{self.improvements} kept improvements ({per_kept} a kept one); "
            f"{self.variants} tuned variants measured for free"
        )


def improvements(iterations: Sequence[IterationRecord]) -> int:
    """How many iterations kept a best kernel other than the one before them."""
    ordered = sorted(iterations, key=lambda i: i.iteration)
    return sum(1 for a, b in itertools.pairwise(ordered) if b.best_hash != a.best_hash)


def result_cost(
    usage: Mapping[str, Usage],
    baseline_pct: float | None,
    best_pct: float | None,
    iterations: Sequence[IterationRecord],
    kernels: Sequence[KernelRecord],
) -> ResultCost:
    usd = sum(u.cost_usd for u in usage.values())
    gain = None
    if baseline_pct is not None and best_pct is not None:
        gain = (best_pct - baseline_pct) * 100
    calls = sum(u.calls - u.replayed for u in usage.values())
    kept = improvements(iterations)
    return ResultCost(
        usd=usd,
        unknown_calls=sum(u.unknown_cost for u in usage.values()),
        gain_points=gain,
        usd_per_point=usd / gain if gain is not None and gain > 0 else None,
        llm_calls=calls,
        improvements=kept,
        calls_per_improvement=calls / kept if kept else None,
        variants=sum(1 for k in kernels if k.origin == KernelOrigin.TUNED),
    )
