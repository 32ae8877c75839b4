"""Timed calls that cannot be answered from memory, nor by recomputing only what changed.

Where the inputs come from. Every rotation set's every input starts as its own random circular
shift (a flat roll, by an offset drawn from the worker's secret generator) of the last
correctness seed's input: every value is one the problem's generator made (a non-negative input
stays non-negative), but each input is shifted independently, so the pairings across inputs (row
``i`` of ``lhs`` with column ``j`` of ``rhs``) are ones no call computed. A kernel that keeps
results by address or by content, or diffs its inputs against the last ones it saw, has nothing
to reuse on a set's first visit.

Two kinds of timed batches (``Refreshes``):

* *full*: before the batch, outside the timed window, every input of every set in the batch gets
  a new roll (``Freshness.refresh``): every element changes, so an incremental kernel must
  recompute everything, and a content cache misses;
* *sparse*: before each call, POSITIONS values of every input are copied from other random
  positions of the same base tensor (``Freshness.perturb``): a kernel that keeps its last result
  and recomputes only what changed is fast here, and wrong wherever it got that wrong.

When rewriting a call's inputs costs little beside the call (compute-bound problems:
``all_full``), every batch is full and nothing is left to reuse. Otherwise (memory-bound problems,
where a refresh costs about a call) about one batch in FULL_SHARE, chosen at random, is full; the
sparse batches make the reported latency (the steady state, as before full batches existed: a
full batch runs just after the harness wrote its inputs, partly into cache, and its time differs
for an honest kernel by ±20 % either way), and ``sparse_faster`` compares the two medians: a
kernel clearly faster on inputs that changed in a few places than on inputs new throughout skips
work, and is SUSPICIOUS.

``Audit`` keeps a few timed calls, chosen uniformly at random from all of them after the fact,
whose outputs are then checked against the reference on exactly the inputs those calls got
(``Freshness.expected``), element by element (``correctness.check_outputs``).

Why the rolls start from the last seed and not from a freshly generated hidden set: after its
first call on one set, a kernel has seen every value of any base the sets are rolled from, so a
hidden base would only hide the very first call; generating it costs a pass of the problem's
generator per evaluation (0.2-0.5 s for adamw's 90 MB), more than the rest of the fill.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelopt.profiling import stats

POSITIONS = 4  # changed per input per call of a sparse batch
CHEAP_REFRESH = 0.1  # every batch is full when a set's refresh costs at most this share of a call
FULL_SHARE = 6  # otherwise one batch in this many at least is full, at random ...
FULL_COST = 0.1  # ... or fewer, so that rewriting costs about this share of the calls' time ...
MIN_FULL = 6  # ... and timing goes on until there are this many full and sparse batches
SPARSE_FASTER = 0.75  # sparse median's interval below this times the full one's: SUSPICIOUS
CONFIRM_ROUNDS = 8  # ... once confirmed by this many rounds of (kept out, rewritten, sparse)


@dataclass
class _Roll:
    """One input of one set: the offset of its roll of the base, and the values changed since."""

    offset: int = 0
    changes: dict[int, float] | None = None


class Freshness:
    """The inputs of every rotation set, as the harness writes them (the module's docstring)."""

    def __init__(
        self,
        device: Any,
        inputs_per_set: Sequence[Sequence[Any]],
        base: Sequence[np.ndarray],
        rng: np.random.Generator,
    ) -> None:
        self._device = device
        self._inputs = inputs_per_set
        self._shapes = [x.shape for x in base]
        flats = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in base]
        self._base = flats
        # Each base twice over: any roll is then a contiguous slice, written without a copy.
        self._doubled = [np.concatenate((f, f)) for f in flats]
        self._rng = rng
        self._rolls = [[_Roll() for _ in base] for _ in inputs_per_set]

    def refresh(self, set_index: int) -> None:
        """Every input of the set becomes a new random roll of its base (every element changes,
        as far as the base's values differ)."""
        rolls = self._rolls[set_index]
        for buffer, doubled, shape, roll in zip(
            self._inputs[set_index], self._doubled, self._shapes, rolls, strict=True
        ):
            n = doubled.size // 2
            roll.offset, roll.changes = int(self._rng.integers(max(n, 1))), None
            self._device.upload(doubled[roll.offset : roll.offset + n].reshape(shape), into=buffer)

    def perturb(self, set_index: int) -> None:
        """Change POSITIONS values of every input of the set (inputs of one value stay)."""
        for buffer, flat, roll in zip(
            self._inputs[set_index], self._base, self._rolls[set_index], strict=True
        ):
            if flat.size < 2:
                continue
            where = self._rng.integers(flat.size, size=POSITIONS)
            values = flat[self._rng.integers(flat.size, size=POSITIONS)]
            self._device.poke(buffer, where, values)
            roll.changes = roll.changes or {}
            roll.changes.update(zip(where.tolist(), values.tolist(), strict=True))

    def state(self, set_index: int) -> list[_Roll]:
        """How the set's inputs are made now (each input's roll and changes): a few numbers to
        keep, where ``expected`` copies the inputs; ``rebuild`` makes them from these."""
        return [
            _Roll(r.offset, dict(r.changes) if r.changes else None) for r in self._rolls[set_index]
        ]

    def expected(self, set_index: int) -> list[np.ndarray]:
        """The inputs the set holds now, as the harness made them."""
        return self.rebuild(self._rolls[set_index])

    def rebuild(
        self, rolls: Sequence[_Roll], into: Sequence[np.ndarray] | None = None
    ) -> list[np.ndarray]:
        """The inputs a set held when ``state`` gave ``rolls``: new arrays, or written into
        ``into`` (float32 arrays of the inputs' shapes)."""
        out = []
        for k, (doubled, shape, roll) in enumerate(
            zip(self._doubled, self._shapes, rolls, strict=True)
        ):
            rolled = doubled[roll.offset : roll.offset + doubled.size // 2]
            if into is None:
                x = rolled.copy()
            else:
                x = into[k].reshape(-1)  # a view: the array is C-contiguous
                np.copyto(x, rolled)
            if roll.changes:
                x[np.fromiter(roll.changes, dtype=np.int64)] = np.fromiter(
                    roll.changes.values(), dtype=np.float32
                )
            out.append(x.reshape(shape))
        return out


def all_full(refresh_s: float, call_s: float) -> bool:
    """Whether every timed batch can be full: a set's refresh (``refresh_s``, measured when the
    sets were filled) costs at most CHEAP_REFRESH of a call (the correctness calls' median)."""
    return refresh_s <= CHEAP_REFRESH * call_s


class Refreshes:
    """Which timed batches are full: all of them, or (``every`` False) each with probability
    1 / FULL_SHARE from the secret generator until MIN_FULL were (the comparison needs them, and
    the fewer batches that takes the sooner a timing can end), then 1 / ``share`` (``full_share``:
    rarer where rewriting costs more beside a call), so that a kernel cannot tell in advance."""

    def __init__(self, every: bool, rng: np.random.Generator) -> None:
        self.every = every
        self.share = FULL_SHARE
        self.drawn = 0  # full batches drawn so far
        self._rng = rng

    def next_is_full(self) -> bool:
        if self.every:
            return True
        share = FULL_SHARE if self.drawn < MIN_FULL else self.share
        full = int(self._rng.integers(share)) == 0
        self.drawn += full
        return full


def full_share(refresh_s: float, call_s: float) -> int:
    """One full batch in how many once there are MIN_FULL, where not every batch is: rare enough
    that rewriting inputs (``refresh_s`` a set) costs at most FULL_COST of the calls'
    (``call_s`` each) time, never more often than one in FULL_SHARE."""
    return max(FULL_SHARE, math.ceil(refresh_s / max(FULL_COST * call_s, 1e-9)))


def batch_kind(rewritten: bool, after_rewrite: bool, first_visit: bool) -> str:
    """What a timed batch's sample is: "full" (its inputs rewritten just before it), "sparse", or
    "settling" (neither kind) for a sparse batch that is a set's first visit since the fill or
    that comes right after a rewrite.

    A first visit is new data to the kernel, so it is not sparse (a cheat computes in full there,
    and those slow samples held up the sparse median's interval); nor is it full: first visits
    all come at the start of the timing, where an honest kernel may run slower than later
    (threads, clocks and caches still warming), and rewritten batches are compared with sparse
    ones only because both are spread at random over the same time. A batch right after a
    rewrite pays for the rewrite's dirty cache lines (adamw's baseline: 15 ms steady, 19-24 ms
    after a 90 MB rewrite): counted, it would widen the latency's interval."""
    if rewritten:
        return "full"
    return "settling" if first_visit or after_rewrite else "sparse"


def confirms(sparse: Sequence[float], full: Sequence[float]) -> bool:
    """Whether a confirmation's rounds (``TimedLoop.confirm``) agree that sparse calls are clearly
    faster: its sparse median below SPARSE_FASTER times its full one, with half its rounds or more
    of each kind. Medians, not intervals: neither kind runs right after a rewrite there, and the
    accusation already needed the main timing's intervals to agree."""
    least = CONFIRM_ROUNDS // 2
    if len(sparse) < least or len(full) < least:
        return False
    return stats.point(sparse) < SPARSE_FASTER * stats.point(full)


def sparse_faster(sparse: Sequence[float], full: Sequence[float]) -> str:
    """Why the kernel is SUSPICIOUS, or '': its calls on inputs changed in a few places
    (``sparse``, seconds per call by batch) are clearly faster than those on inputs new throughout
    (``full``): the upper end of the sparse median's 95 % interval is below SPARSE_FASTER times
    the lower end of the full one's (``stats.interval``; with few samples the interval spans
    them all), so noise on a busy machine widens the intervals rather than accusing the kernel.
    Both kinds are interleaved in one timing, so drift in the machine's speed cancels. Honest
    kernels measured 0.78-1.16 here (sparse over full medians, short timings on a busy machine;
    freshly written inputs are partly in cache, but leave dirty lines to write back), so only the
    sparse side being faster is tested, with that margin; a kernel that recomputes only what
    changed takes a few percent of its full time."""
    if not sparse or not full:
        return ""
    sparse_found, full_found = stats.estimate(sparse), stats.estimate(full)
    if sparse_found.high >= SPARSE_FASTER * full_found.low:
        return ""
    ratio = sparse_found.point / full_found.point
    return (
        f"on inputs that changed in a few places since its last call on the same buffers the "
        f"kernel took {ratio:.0%} of its time on inputs new throughout (clearly below "
        f"{SPARSE_FASTER:.0%}): it recomputes only what changed, or caches results, so its time "
        "is not the problem's"
    )


class Audit:
    """A uniform sample of ``size`` timed calls out of however many there will be (reservoir
    sampling): a kernel cannot tell which of its calls will be checked."""

    def __init__(self, size: int, rng: np.random.Generator) -> None:
        self.size = size
        self._rng = rng
        self.kept: list[Any] = []  # (inputs, outputs, expected inputs) per slot
        self.calls: list[int] = []  # the number of the timed call kept in each slot
        self._pending: list[int] = []

    def choose(self, first: int, batch: Sequence[int]) -> list[int]:
        """Of the batch's calls (numbered ``first + 1`` on, on these sets), the sets to keep now;
        ``keep`` is then called once per returned set, in order."""
        chosen, self._pending = [], []
        for j, index in enumerate(batch):
            number = first + j + 1
            if len(self.kept) < self.size:
                self.kept.append(None)
                self.calls.append(number)
                slot = len(self.kept) - 1
            else:
                slot = int(self._rng.integers(number))
                if slot >= self.size:
                    continue
                self.calls[slot] = number
            self._pending.append(slot)
            chosen.append(index)
        return chosen

    @property
    def next_slot(self) -> int:
        """The slot the next ``keep`` fills (a kept call's copies can be made in place)."""
        return self._pending[0]

    def keep(
        self, inputs: list[np.ndarray], outputs: list[np.ndarray], expected: list[np.ndarray]
    ) -> None:
        self.kept[self._pending.pop(0)] = (inputs, outputs, expected)
