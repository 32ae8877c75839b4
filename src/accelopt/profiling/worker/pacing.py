"""The pace of a timing in the worker: the messages that tell the parent it goes on (``Ticker``)
and whether its median is known well enough to stop (``Precision``)."""

from __future__ import annotations

import os
import time

from accelopt.profiling.stats import ci_half_width
from accelopt.profiling.worker.contention import CpuSnapshot, contention, snapshot
from accelopt.profiling.worker.steps import Report

TICK_S = 0.25  # a timing loop tells the parent it is alive this often
DRIFT_SHARE = 1 / 3  # timing stops once its own interval is this share of the machine's drift


class Ticker:
    """Tells the parent, every TICK_S of timed calls, that they go on (the timing phase's deadline
    restarts with each message). One per timing: a session's kernels share it."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.last = time.perf_counter()
        self.waiting = ""  # what the timing waits for (``TimedLoop``), or '': it goes on
        self._load_from: CpuSnapshot | None = None  # the machine when the waiting began

    def wait_for_the_machine(self, disturbed: int, seen: int) -> None:
        """From now on, the ticks say the timing waits for clean batches, and why: how many of
        the ``seen`` batches were ``disturbed``, and what others used of the CPUs meanwhile."""
        now = snapshot()
        if self._load_from is None or now is None:
            self._load_from = now
            return
        cpus = os.cpu_count() or 1
        others = contention(self._load_from, now).others * cpus
        self.waiting = (
            f"waiting for the machine: {disturbed} of {seen} batches disturbed, other work is "
            f"using {others:.1f} of {cpus} CPUs"
        )

    def reset(self) -> None:
        self.last = time.perf_counter()

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self.last >= TICK_S:
            self.report(*(("wait", self.waiting) if self.waiting else ("call", "timing")))
            self.last = now


class Precision:
    """Whether the median of the timed calls is known to within ``target`` (its 95 % interval's
    relative half-width); checked every CHECK_EVERY_S of timing, as sorting costs time."""

    CHECK_EVERY_S = 0.05

    def __init__(self, target: float, drift: float = 0.0) -> None:
        """``drift``: the machine's drift between evaluations, which the reported interval adds
        to this timing's own; once the timing's is well below it (DRIFT_SHARE), timing longer
        would not narrow the reported interval (sqrt(1 + 1/9) = 1.05 of the drift alone)."""
        self.target = max(target, DRIFT_SHARE * drift)
        self.next_check_s = 0.0

    def __call__(self, samples: list[float], elapsed_s: float) -> bool:
        if elapsed_s < self.next_check_s:
            return False
        self.next_check_s = elapsed_s + self.CHECK_EVERY_S
        return ci_half_width(samples) <= self.target
