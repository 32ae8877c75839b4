"""Timing several in-process callables interleaved in one session: eager, Inductor and accelopt
(or a kernel and the subgraph it replaced), in rounds, so that a drift of the machine's speed
touches them all alike.

A round calls every callable once, as one sample: ``inner`` back-to-back calls timed together
(``inner`` calibrated per callable in the warmup so that a sample lasts at least
``min_sample_s``; the figure kept is the sample over ``inner``, the time per call). The order
rotates every round (A B C, B C A, C A B, ...), so no callable always goes first. Where the
model's code has imported torch and CUDA is initialised, the device is synchronised before the
clock is read (torch is never imported here). The comparisons are per round: a speedup is the
median of the rounds' ratios, with the 95 % interval of that median by order statistics
(``profiling.stats.estimate``), so drift between rounds cancels within each ratio.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from accelopt.model.records import Speedup, Timed
from accelopt.profiling.stats import estimate

MIN_BUDGET_ROUNDS = 5  # rounds a session times, at least, whatever its budget
MAX_INNER = 100_000  # calls in one sample, at most (a callable too fast for the clock to see)

Clock = Callable[[], float]


@dataclass
class Session:
    """What an interleaved session measured. ``seconds``: per callable, its time per call in
    each round (seconds, in round order); ``inner``: the calls in each of its samples;
    ``elapsed_s``: the session's wall time, warmup included."""

    names: tuple[str, ...]
    seconds: dict[str, list[float]] = field(default_factory=dict)
    inner: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def rounds(self) -> int:
        return min((len(v) for v in self.seconds.values()), default=0)

    def timed(self) -> list[Timed]:
        """Each callable's median time per call in ms and the 95 % interval of that median."""
        out = []
        for name in self.names:
            samples = self.seconds[name]
            if not samples:
                raise ValueError(f"{name!r} was not timed")
            found = estimate(samples)
            ms = (found.point * 1e3, found.low * 1e3, found.high * 1e3)
            out.append(Timed(name, *ms, len(samples)))
        return out

    def speedup(self, candidate: str, baseline: str) -> Speedup:
        """``baseline``'s time over ``candidate``'s, per round: the median of those ratios
        (above 1: the candidate is faster) and the 95 % interval of that median."""
        for name in (candidate, baseline):
            if name not in self.seconds:
                raise ValueError(f"{name!r} was not timed in this session")
        pairs = zip(self.seconds[candidate], self.seconds[baseline], strict=True)
        ratios = [b / c for c, b in pairs if c > 0]
        if not ratios:
            raise ValueError(f"no round timed {candidate!r} above zero")
        found = estimate(ratios)
        return Speedup(candidate, baseline, found.point, found.low, found.high)


def round_order(names: tuple[str, ...], round_index: int) -> list[str]:
    """The callables' order in round ``round_index``: the list rotated by the round's index."""
    k = round_index % len(names) if names else 0
    return [*names[k:], *names[:k]]


def _synchronizer() -> Callable[[], None] | None:
    """``torch.cuda.synchronize`` where the model's code imported torch and CUDA is initialised
    (kernels queued on the device are then part of the sample); else None."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is None:
        return None
    try:
        if cuda.is_available() and cuda.is_initialized():
            return cuda.synchronize
    except Exception:  # a broken CUDA setup: time on the host alone
        return None
    return None


def _sample(fn: Callable[[], object], inner: int, clock: Clock) -> float:
    """Seconds per call over ``inner`` back-to-back calls of ``fn``."""
    sync = _synchronizer()
    if sync is not None:
        sync()
    start = clock()
    for _ in range(inner):
        fn()
    if sync is not None:
        sync()
    return (clock() - start) / inner


def _calibrated(per_call_s: float, min_sample_s: float) -> int:
    """The calls a sample needs to last ``min_sample_s`` at ``per_call_s`` each."""
    if per_call_s <= 0:
        return MAX_INNER
    return max(1, min(MAX_INNER, math.ceil(min_sample_s / per_call_s - 1e-9)))


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 30,
    warmup: int = 3,
    min_sample_s: float = 0.002,
    budget_s: float | None = None,
    clock: Clock = time.perf_counter,
) -> Session:
    """Time ``fns`` interleaved: ``warmup`` rounds (at least one) that calibrate each one's
    ``inner`` (a first call that compiles is slow; every warmup sample re-estimates ``inner``
    from its time per call, so the last one decides), then up to ``rounds`` timed rounds.
    ``budget_s``: no round starts once the session (warmup included) has run that long, after
    at least ``MIN_BUDGET_ROUNDS`` timed rounds (or ``rounds``, if fewer)."""
    names = tuple(fns)
    if not names:
        raise ValueError("nothing to time")
    start = clock()
    inner = dict.fromkeys(names, 1)
    for r in range(max(1, warmup)):
        for name in round_order(names, r):
            per_call = _sample(fns[name], inner[name], clock)
            inner[name] = _calibrated(per_call, min_sample_s)
    session = Session(names, {n: [] for n in names}, inner)
    for r in range(rounds):
        over_budget = budget_s is not None and clock() - start >= budget_s
        if over_budget and r >= MIN_BUDGET_ROUNDS:
            break
        for name in round_order(names, r):
            session.seconds[name].append(_sample(fns[name], inner[name], clock))
    session.elapsed_s = clock() - start
    return session
