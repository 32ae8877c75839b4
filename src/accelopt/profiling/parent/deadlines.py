"""How long each phase of an evaluation may take before its worker is killed.

The worker names the phase it enters (``protocol.Phase``); the pool waits for its next message at
most that phase's deadline. Every figure is derived here, from the evaluation config and the
kernel's roofline time (``Deadlines.for_evaluation``), with the reason for each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from accelopt.profiling.config import EvalConfig

TIMING = "timing"  # the detail of the timed calls' phase
WAIT = "wait"  # the timed calls go on, waiting for clean batches (its detail says why)

COMPILE_MARGIN_S = 30.0
"""Beyond the compiler's own timeout (which the backend applies to the compiler process): the
worker's start-up, writing the source and loading the headers, so that the compiler's own
deadline, which names what went wrong, fires first."""

REFERENCE_FLOOR_S = 120.0
REFERENCE_PER_PEAK = 1000.0
"""The float64 references (NumPy, far from any roofline) of a large workload take much longer
than a kernel: the reference phase, and checking the timed outputs against references, may take
``REFERENCE_PER_PEAK`` times the workload's roofline time, and never less than
``REFERENCE_FLOOR_S`` (a first run computes every seed's references on a cold cache, possibly on a
busy machine)."""


@dataclass(frozen=True)
class Deadlines:
    """Seconds each phase may take before the worker is killed (None: no limit).

    A timed call's deadline follows the kernel's own slowest correctness call, as the parent saw
    it (``timing_factor`` times it, at least ``timing_floor_s``); before any call has been seen,
    ``call_s`` (scaled from the roofline) applies. In a re-timing session (one request, several
    kernels checked one after another, then timed interleaved) it is the slowest correctness call
    of any of its kernels: the ``CallClock`` spans the request.
    """

    compile_s: float
    call_s: float
    reference_s: float
    start_s: float = 60.0
    lock_s: float = 900.0
    timing_factor: float = 50.0
    timing_floor_s: float = 10.0

    def for_phase(
        self, phase: str, detail: str = "", slowest_call_s: float | None = None
    ) -> float | None:
        timing = (phase == "call" and detail == TIMING) or phase == WAIT
        if timing and slowest_call_s is not None:
            return max(self.timing_floor_s, self.timing_factor * slowest_call_s)
        return {
            "start": self.start_s,
            "compile": self.compile_s,
            "load": self.call_s,
            "reference": self.reference_s,
            "check": self.reference_s,
            "prepare": self.reference_s,
            "verify": self.reference_s,
            "call": self.call_s,
            "wait": self.call_s,
            # Others' timings hold it, each under its own deadline; a holder that never lets go
            # (a process that inherited the lock) must not block every evaluation forever.
            "lock": self.lock_s,
        }.get(phase, self.start_s)


class CallClock:
    """The slowest correctness call of an evaluation, timed by the parent from the worker's phase
    messages (a call lasts from its ``call`` message to the next message)."""

    def __init__(self) -> None:
        self.slowest_s: float | None = None
        self._started: float | None = None

    def saw(self, phase: str, detail: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._started is not None:
            took = now - self._started
            self.slowest_s = took if self.slowest_s is None else max(self.slowest_s, took)
        checking = phase == "call" and detail != TIMING
        self._started = now if checking else None


def for_evaluation(config: EvalConfig, peak_s: float) -> Deadlines:
    """The deadlines of an evaluation under ``config`` of a kernel whose roofline time is
    ``peak_s``. Checking a call's outputs, filling the timed calls' buffers and checking the timed
    outputs (which recomputes references) are the harness's work: the reference's deadline."""
    return Deadlines(
        compile_s=config.compile_timeout_s + COMPILE_MARGIN_S,
        call_s=config.call_timeout_s(peak_s),
        reference_s=max(REFERENCE_FLOOR_S, REFERENCE_PER_PEAK * peak_s),
        lock_s=config.lock_timeout_s,
        timing_factor=config.timing_call_factor,
        timing_floor_s=config.call_timeout_floor_s,
    )
