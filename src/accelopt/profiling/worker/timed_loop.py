"""One kernel's timed calls in the worker (``TimedLoop``; the messages that say they go on and
when they are precise enough: ``pacing.py``).

The timed batches are *full* (every input of the batch's sets rewritten, a new roll, before the
batch) or *sparse* (a few values changed before each call): all full where that is cheap beside a
call, else one in FULL_SHARE at random (``freshness.py`` says why, and which samples make the
latency). Either way every call gets inputs no call saw before.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from accelopt.backends.base import LoadedKernel
from accelopt.backends.device import Buffer, CanarySet, Device
from accelopt.backends.status import Status
from accelopt.profiling import stats
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.worker import disturbance
from accelopt.profiling.worker.control import Control
from accelopt.profiling.worker.freshness import (
    CONFIRM_ROUNDS,
    MIN_FULL,
    Audit,
    Refreshes,
    all_full,
    batch_kind,
    confirms,
    full_share,
    sparse_faster,
)
from accelopt.profiling.worker.hostmemory import Lease
from accelopt.profiling.worker.pacing import Precision, Ticker
from accelopt.profiling.worker.rotation import Rotation
from accelopt.profiling.worker.steps import Failed

BATCH_S = 0.0005  # a batch of calls in another process lasts about this long...
MAX_BATCH = 256  # ... and holds at most this many calls (kernel_host.c)
SLICE_S = 0.25  # a control runs before the timing, after it and every this many seconds of it
RACE_MIN_SAMPLES = 16  # a race is decided on this many samples at least: the interval of
# fewer spans their extremes (median_ci_ranks), and one outlier would leave the raced figure with
# an interval too wide for the search to call it slower
MIN_CLEAN = 16  # clean batches (``disturbance.py``) a latency is the median of, at least; with
# fewer once the wait is over (``EvalConfig.disturbed_wait_s``) the measurement is disturbed
SLICE_WAIT_S = 0.5  # a session's slice waits this long at most for a clean batch
SHRINK_EVERY = 8  # batches: where more than half of the last ones were disturbed, the batch is
# halved (down to one call): a shorter window is less often hit by another process's time slice


@dataclass(frozen=True)
class LoopSetup:
    """What a ``TimedLoop`` is given by the run that checked the kernel (it never reaches back
    into the run)."""

    config: EvalConfig
    device: Device  # times the calls, arms the canaries, copies the kept calls back
    host: Lease  # the arrays the kept calls are copied into
    rng: np.random.Generator  # nothing the kernel can know
    tick: Callable[[], None]  # tells the parent the timing goes on (``Ticker``)
    canary_seed: int
    call_s: Sequence[float] = ()  # the correctness calls' wall times, as the worker saw them
    drift: float = 0.0  # the machine's drift between evaluations (``Precision``)
    race_s: float | None = None  # the latency raced: stop once clearly slower (``_lost_race``)
    threads: int = 1  # the kernel's OpenMP threads (what its pool may spin after a call)


class TimedLoop:
    """One kernel's timed calls: a short warm-up (``start``), then timed batches round the
    rotation sets, run to the end at once (``run_to_end``: until min_calls and min_time are met and
    the median is known to ci_target, or ci_time_cap_s passed) or in slices resumed later
    (``run_slice``: a re-timing session interleaves several kernels' slices).

    Before each batch its sets' inputs are rewritten (a full batch) or before each call a few of
    their values changed (a sparse one): no call sees inputs seen before; its canaries are armed.
    After each batch the canaries must be written, and a few calls chosen at random are kept to be
    checked against the reference (``EvaluationRun.verify_timed``, which also compares the sparse
    batches with the full ones). ``full`` and ``sparse`` hold a sample per batch (seconds per
    call), ``samples`` those the latency is the median of, ``count`` the timed calls, ``batch``
    the calls per batch (``start`` sizes it).
    """

    def __init__(
        self,
        setup: LoopSetup,
        rotation: Rotation,
        loaded: LoadedKernel,
        control: Control | None = None,
    ) -> None:
        self.setup, self.config, self.device = setup, setup.config, setup.device
        self.sets, self.refresh_s = rotation.sets, rotation.refresh_s
        self.calls = [loaded.bind([*ins, *outs]) for ins, outs in self.sets]
        self.fresh = rotation.fresh  # the sets' inputs, filled by the harness (``rotation.fill``)
        self.refreshes = Refreshes(self._every_batch_full(), setup.rng)
        self.audit = Audit(self.config.verify_calls, setup.rng)
        self.canaries: CanarySet | None = None
        self.full: list[float] = []  # seconds per call, per full batch ...
        self.sparse: list[float] = []  # ... and per sparse batch (not right after a full one)
        self.settling: list[float] = []  # sparse batches right after a full one: neither kind
        self._after_full = False  # the last batch rewrote its inputs just before it ran
        self._unseen = set(range(len(self.sets)))  # sets not called since their last rewrite
        self.skipped = ""  # why the kernel skips work (``confirm``), or ''
        self._ahead: set[int] = set()  # sets rewritten ahead of their batch (``confirm``)
        self._kinds = {"full": self.full, "sparse": self.sparse, "settling": self.settling}
        # ... and of each kind the batches no other process disturbed (``disturbance.py``): the
        # latency's; the comparison of the kinds takes them all, as a disturbance hits both
        self._clean: dict[str, list[float]] = {"full": [], "sparse": [], "settling": []}
        self.count = 0
        self.elapsed_s = 0.0  # seconds of timed batches so far
        self.spent_s = 0.0  # ... and of the warm-up and untimed calls
        self.warm = 0
        self.batch = 1
        self._precise = Precision(self.config.ci_target, setup.drift)
        self.control = control  # timed before, between the slices of and after the timing
        self.slice_medians: list[float | None] = []  # each slice's median latency (None: none)
        self._slice_from = 0  # where the current slice's samples start
        self.raced = False  # stopped early: clearly slower than the run's race_s
        self._control_base = 0.0  # the controls' seconds before this timing
        # batches a thread waited for a CPU in (``disturbance.py``): left out of every kind
        self.disturbed: list[float] = []
        self.delay = disturbance.RunDelay(self.device.kernel_pids, setup.threads)
        self.delay.available = self.delay.available and self.config.detect_disturbance
        self._recent: list[bool] = []  # whether each of the last batches was disturbed
        # each batch's seconds per call less the longest wait of one of its threads (an
        # estimate of it undisturbed: ``RunDelay.longest``)
        self.floors: list[float] = []
        self.slice_floor: float | None = None  # the last slice's fastest floor (``run_slice``)

    def _every_batch_full(self, call_s: float | None = None) -> bool:
        """Whether every batch is full: as the policy says, or (auto) where a set's refresh costs
        little beside ``call_s`` (the fastest warm-up call; before the warm-up, the correctness
        calls' median, whose wall time holds their guard checks)."""
        policy, checked_s = self.config.full_batches, self.setup.call_s
        if policy != "auto" or not checked_s:
            return policy != "some"
        return all_full(self.refresh_s, call_s or stats.point(checked_s))

    @property
    def samples(self) -> list[float]:
        """The samples the latency is the median of: every batch's where all are full, else the
        sparse batches' (``freshness.py``)."""
        return self._clean["full"] if self.refreshes.every else self._clean["sparse"]

    @property
    def mixed(self) -> bool:
        return not self.refreshes.every

    @property
    def is_disturbed(self) -> bool:
        """Too few clean batches for a latency: the figures are of a disturbed machine."""
        return self.delay.available and len(self.samples) < MIN_CLEAN

    @property
    def reported(self) -> list[float]:
        """What the latency is the median of: the clean samples, or where there are too few
        (``is_disturbed``) every sample, disturbed ones too, as what was seen."""
        if not self.is_disturbed:
            return self.samples
        return self.full if self.refreshes.every else self.sparse

    def start(self) -> None:
        """Arm the canaries and warm up: with the device lock held exclusive (and the kernel's
        memory capped where it runs in this process)."""
        n, device = len(self.calls), self.device
        began = time.perf_counter()
        self.canaries = device.canaries([o for _, o in self.sets], self.setup.canary_seed)
        # Warm-up calls: the code, the threads and the branch predictors, not the data (every
        # set's pages are already faulted in: inputs are written, outputs are filled with NaN).
        self.warm = max(1, self.config.warmup_calls)
        warm_s = []
        for i in range(self.warm):
            warm_s.append(device.time_calls([self.calls[i % n]]))
            self._unseen.discard(i % n)
            self.setup.tick()
        self.delay.rescan()  # the OpenMP pool's threads, made by the first call
        self.batch = self._batch_size(min(warm_s))
        self.refreshes.every = self._every_batch_full(min(warm_s))
        self.refreshes.share = full_share(self.refresh_s, min(warm_s))
        if self.control is not None:
            self.control.match(min(warm_s))
        self.check_idle()
        self.spent_s += time.perf_counter() - began

    def check_idle(self) -> None:
        """The kernel's process, let run after a call, must fall idle as an OpenMP pool does
        (``disturbance.between_calls``); one that keeps a thread busy between its calls (to slow
        what is timed beside it) is REJECTED. Stopped again afterwards."""
        self.device.resume()
        kept_running = disturbance.between_calls(self.device.kernel_pids, self.setup.threads)
        self.device.pause()
        if kept_running:
            raise Failed(Status.REJECTED, kept_running)

    def _batch_size(self, call_s: float) -> int:
        """Calls per round trip: 1 where the device times each call itself; else enough calls
        of ``call_s`` (the fastest warm-up call, as the device timed it: the correctness calls'
        wall time holds their guard checks) for about BATCH_S (the worker's round trip,
        subtracted, is then a small part), each set at most once (every call gets freshly
        perturbed inputs)."""
        if not self.device.batches:
            return 1
        return max(1, min(len(self.calls), MAX_BATCH, math.ceil(BATCH_S / max(call_s, 1e-7))))

    def run_to_end(self) -> None:
        """Timed batches until ``_finished``, in slices of SLICE_S with a control before, between
        and after them (where there is a control)."""
        clock = time.perf_counter
        begin = clock()
        self._control_base = self._control_s()
        if self.control is not None:
            self.control.measure()
        next_slice = SLICE_S
        while not self._finished(self.elapsed_s + self._timed_since(begin)):
            self._run_batch()
            if self.control is not None and self._timed_since(begin) >= next_slice:
                self._end_slice()
                next_slice += SLICE_S
        self._end_slice()
        self.elapsed_s += self._timed_since(begin)
        self.check_idle()
        self.spent_s += clock() - begin

    def _control_s(self) -> float:
        return self.control.spent_s if self.control is not None else 0.0

    def _timed_since(self, begin: float) -> float:
        """Seconds of timed batches since ``begin``: the controls' time left out."""
        return time.perf_counter() - begin - (self._control_s() - self._control_base)

    def _end_slice(self) -> None:
        """The slice's median latency (if it has samples), then a control."""
        new = self.samples[self._slice_from :]
        self.slice_medians.append(stats.point(new) if new else None)
        self._slice_from = len(self.samples)
        self.delay.rescan()
        if self.control is not None:
            self.control.measure()

    def run_slice(self, seconds: float) -> list[float]:
        """An untimed call (the kernel's code and threads were idle while others ran), then timed
        batches for ``seconds`` (one at least); this slice's samples."""
        clock = time.perf_counter
        began = clock()
        self._call_untimed((self.warm + self.count) % len(self.calls))
        first, floors_from = len(self.samples), len(self.floors)
        self.delay.rescan()
        begin = clock()
        give_up = max(seconds, SLICE_WAIT_S)
        while True:
            self._run_batch()
            took = clock() - begin
            if took >= seconds and len(self.samples) > first and self._both_kinds():
                break
            if took >= give_up:  # no clean batch: a disturbed slice, dropped by the session
                break
        end = clock()
        self.elapsed_s += end - begin
        self.spent_s += end - began
        self.slice_floor = min(self.floors[floors_from:], default=None)
        return self.samples[first:]

    def _call_untimed(self, index: int) -> None:
        self.calls[index]()
        self._unseen.discard(index)

    def _both_kinds(self, least: int = 1) -> bool:
        """Whether there are ``least`` samples of each kind (always, where every batch is full)."""
        return not self.mixed or min(len(self.full), len(self.sparse)) >= least

    def _finished(self, elapsed_s: float) -> bool:
        cfg = self.config
        capped_s = max(cfg.ci_time_cap_s, cfg.min_time_s)
        if elapsed_s >= min(cfg.max_time_s, capped_s + cfg.disturbed_wait_s):
            return bool(self.samples or self.disturbed)  # waited enough: disturbed, or as it is
        if not self._both_kinds():  # a few more batches: the comparison needs both
            return False
        if self._lost_race(elapsed_s):
            self.raced = True
            return True
        enough = self.count >= cfg.min_calls and elapsed_s >= cfg.min_time_s
        enough = enough and self._both_kinds(MIN_FULL) and not self.is_disturbed
        if enough and (elapsed_s >= capped_s or self._precise(self.samples, elapsed_s)):
            return True
        if elapsed_s >= capped_s:
            self._wait_for_the_machine()
        return False

    def _wait_for_the_machine(self) -> None:
        """Say, with the timing's ticks, that it goes on for clean batches and why."""
        if isinstance(self.setup.tick, Ticker):
            seen = len(self.disturbed) + len(self.samples)
            self.setup.tick.wait_for_the_machine(len(self.disturbed), seen)

    def _lost_race(self, elapsed_s: float) -> bool:
        """Whether the kernel is already clearly slower than the latency it races (a search's
        parent, ``race_s``: the upper end of its interval): the lower end of this median's 95 %
        interval is above it, after min_time_s and RACE_MIN_SAMPLES samples."""
        race_s, samples = self.setup.race_s, self.samples  # clean samples only
        if race_s is None or len(samples) < RACE_MIN_SAMPLES:
            return False
        return elapsed_s >= self.config.min_time_s and stats.estimate(samples).low > race_s

    def confirm(self) -> None:
        """Where the sparse batches look clearly faster than the full ones
        (``freshness.sparse_faster``), measure again before accusing, with the device still held:
        CONFIRM_ROUNDS rounds, each rewriting the sets of the batch after next, then timing the
        batch in between (kept out: it pays the rewrite's dirty cache lines), the rewritten batch
        (full) and one more (sparse). Neither kind runs right after a rewrite here, so an honest
        kernel's two medians agree; ``skipped`` says why only if the sparse median is still below
        SPARSE_FASTER of the full one (``freshness.confirms``)."""
        if not self.mixed or not sparse_faster(self.sparse, self.full):
            return
        kinds: dict[str, list[float]] = {"full": [], "sparse": [], "settling": []}
        for _ in range(CONFIRM_ROUNDS):
            ahead = [
                (self.warm + self.count + self.batch + j) % len(self.calls)
                for j in range(self.batch)
            ]
            for index in ahead:
                self.fresh.refresh(index)
            self._ahead.update(ahead)
            self._after_full = True
            for _batch in range(3):
                kind, sample = self._run_batch(rewrite=False)
                kinds[kind].append(sample)
        if confirms(kinds["sparse"], kinds["full"]):
            self.skipped = sparse_faster(self.sparse, self.full)

    def _run_batch(self, rewrite: bool | None = None) -> tuple[str, float]:
        """One timed batch (its inputs rewritten as ``rewrite`` says, else as the policy draws):
        its kind and its sample."""
        k, n = self.batch, len(self.calls)
        assert self.canaries is not None
        batch = [(self.warm + self.count + j) % n for j in range(k)]
        refresh = self.refreshes.next_is_full() if rewrite is None else rewrite
        rewritten = refresh or self._ahead.issuperset(batch)  # now, or ahead (``confirm``)
        for index in batch:
            if refresh:
                self.fresh.refresh(index)
            elif index not in self._ahead:
                self.fresh.perturb(index)
            self.canaries.arm(index)
        first_visit = not self._unseen.isdisjoint(batch)  # a set not called since the fill
        before = self.delay.read() if self.delay.available else None
        sample = self.device.time_calls([self.calls[i] for i in batch]) / k
        after = self.delay.read() if before is not None else None
        delay = self.delay.waited(before, after) if before and after else 0
        longest = self.delay.longest(before, after) if before and after else 0
        self._unseen.difference_update(batch)
        self._ahead.difference_update(batch)
        kind = batch_kind(rewritten, self._after_full, first_visit)
        floor = sample - longest * 1e-9 / k
        if floor > 0:  # a thread that waited longer than the batch took tells nothing of it
            self.floors.append(floor)
        self._kinds[kind].append(sample)
        disturbed = disturbance.disturbed(delay, sample * k)
        (self.disturbed if disturbed else self._clean[kind]).append(sample)
        self._shrink_if_disturbed(disturbed)
        self._after_full = refresh
        self.count += k
        if not self.canaries.written():
            raise Failed(
                Status.INCORRECT,
                f"a timed call (of calls {self.count - k + 1}-{self.count}) left its output "
                "unwritten: the kernel skips work when called again on buffers it has seen",
            )
        for index in self.audit.choose(self.count - k, batch):
            ins, outs = self.sets[index]
            slot = self.audit.next_slot
            # the inputs the harness wrote are kept as their rolls (rebuilt when verified)
            self.audit.keep(
                self._copies(ins, ("in", slot)),
                self._copies(outs, ("out", slot)),
                self.fresh.state(index),
            )
        self.setup.tick()
        return kind, sample

    def _shrink_if_disturbed(self, disturbed: bool) -> None:
        """Halve the batch where more than half of the last SHRINK_EVERY were disturbed."""
        self._recent.append(disturbed)
        if len(self._recent) < SHRINK_EVERY:
            return
        if 2 * sum(self._recent) > len(self._recent) and self.batch > 1:
            self.batch = max(1, self.batch // 2)
        self._recent.clear()

    def _copies(self, buffers: Sequence[Buffer], slot: tuple[str, int]) -> list[np.ndarray]:
        """The buffers' contents, copied into the arrays of the audit's ``slot`` (a call kept
        later in the same slot replaces this one: its copies go where this one's were)."""
        device, host = self.device, self.setup.host
        return [
            device.to_host(b, out=host.array(("audit", id(self), *slot, k), tuple(b.shape)))
            for k, b in enumerate(buffers)
        ]
