"""The control timed with a kernel: what the machine could do at the moment the kernel was timed.

A kernel's latency moves with its neighbours, the clock and memory contention; so does any loop
bound by the same resource. Between the slices of a kernel's timing (``TimedLoop``), with the
device lock still held, the worker runs a short *control*: the loop that sets the problem's
ceiling (``hardware/microbench/control.c``: FMA chains for a matmul-bound problem, multiply+add
chains for a vector-bound one, a streaming pass with the problem's read:write mix for a
memory-bound one), on the kernel's thread count. The calibrated % of peak is then the roofline
time at the control's figure over the kernel's latency (``parent/scoring.py``): a neighbour that
slows both cancels in the ratio.

The control runs in the worker, trusted code on its own arrays; the kernel's process can only
disturb it by running while it runs (a thread left spinning to slow the control down would
inflate the kernel's calibrated figure). So before each control the worker waits until the
kernel's process is idle (no thread of it running or runnable in ``/proc/PID/task/*/stat``: an
OpenMP pool spins for 5-10 ms after each call before it sleeps), and a control during which that
process ran (its threads' CPU time, ``/proc/PID/task/*/schedstat``, grew by more than
DISTURBED_SHARE of the control's time) is left out (None). An evaluation with too few controls
left is not calibrated, and says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import time
from collections.abc import Sequence
from functools import cache

from accelopt import settings
from accelopt.backends.device import Device, HostDevice
from accelopt.hardware.measure import sources_of
from accelopt.hardware.toolchain import find_compiler, target_flags
from accelopt.profiling import stats
from accelopt.profiling.worker.disturbance import task_ns
from accelopt.profiling.worker.protocol import CONTROL_SOURCE, ControlSpec

# A control is a few runs of the loop, each about as long as one of the kernel's calls (``match``:
# within MIN_RUN_S and MAX_RUN_S), and its figure their median: what the kernel's median call
# meets (a neighbour on one of its CPUs stalls a short call's threads at their barrier for a
# whole scheduler slice, as it does the control's short runs), over about CONTROL_S of runs.
RUN_S = 0.003
MIN_RUN_S, MAX_RUN_S = 0.0005, 0.01
CONTROL_S = 0.012
MIN_RUNS, MAX_RUNS = 3, 12
DISTURBED_SHARE = 0.05  # a control during which the kernel's process ran more is left out
STREAMS = 5  # arrays of the memory control: up to 4 read and 1 written, or 1 read and 4 written
MIN_SPAN_BYTES = 4 << 20  # the memory control's arrays together span the kernel's rotation sets,
MAX_SPAN_BYTES = 256 << 20  # within these bounds (256 MiB: far beyond any last-level cache)
PASS_SHARE = 4  # a memory pass covers 1 / PASS_SHARE of the arrays: each starts from memory


@cache
def library(fused: bool) -> ctypes.CDLL:
    """control.c built as a shared library (fused: FMA), once per source, flags and compiler."""
    compiler = find_compiler()
    flags = (
        "-O3",
        *target_flags(compiler),
        "-shared",
        "-fPIC",
        "-pthread",
        "-ffp-contract=fast" if fused else "-ffp-contract=off",
    )
    identity = "\n".join([*compiler.command, compiler.version, *flags])
    digest = hashlib.sha256(sources_of(CONTROL_SOURCE) + identity.encode()).hexdigest()[:16]
    path = settings.cache_dir() / "microbench" / f"control-{digest}.so"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        command = [*compiler.command, *flags, str(CONTROL_SOURCE), "-o", str(tmp)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the control does not build: {done.stderr.strip()[-300:]}")
        os.replace(tmp, path)
    lib = ctypes.CDLL(str(path))
    lib.accelopt_flops.argtypes = [ctypes.c_int, ctypes.c_long]
    lib.accelopt_flops.restype = ctypes.c_double
    lib.accelopt_stream_init.argtypes = [ctypes.c_int, ctypes.c_long]
    lib.accelopt_stream_init.restype = ctypes.c_int
    lib.accelopt_stream.argtypes = [ctypes.c_int] * 3 + [ctypes.c_long, ctypes.c_int]
    lib.accelopt_stream.restype = ctypes.c_double
    return lib


_streams: dict[str, int] = {}  # elements per array of the memory control, once made


def _stream_elements(span_bytes: int) -> int:
    """The memory control's arrays, spanning what the kernel's rotation sets span (so that both
    start from the same level of the memory hierarchy), made once per worker and kept (first
    touching them costs more than a control): made again only for a wider span."""
    span = min(MAX_SPAN_BYTES, max(MIN_SPAN_BYTES, span_bytes))
    elements = span // STREAMS // 4
    if _streams.get("elements", 0) < elements:
        if library(False).accelopt_stream_init(STREAMS, elements) != 0:
            raise RuntimeError("the memory control could not allocate its arrays")
        _streams["elements"] = elements
    return elements


class Control:
    """One evaluation's controls: ``measure`` runs one and returns its figure (FLOP/s or bytes/s),
    or None when the kernel's process (``pids``) ran meanwhile; ``note`` says why one failed."""

    def __init__(
        self,
        spec: ControlSpec,
        threads: int,
        pids: Sequence[int],
        span_bytes: int,
        device: Device | None = None,
    ) -> None:
        """``span_bytes``: what the kernel's rotation sets span (the memory control's arrays);
        ``device``: the kernel's, whose process is stopped while the control runs (None: a
        kernel in this process, with nothing to stop)."""
        self.spec, self.threads, self.pids = spec, threads, tuple(pids)
        self.device: Device = device if device is not None else HostDevice()
        self.lib = library(spec.kind == "fma")
        self.elements = _stream_elements(span_bytes) if spec.kind == "memory" else 0
        self.rates: list[float | None] = []
        self.note = ""
        self.spent_s = 0.0
        self._size = 0  # iterations or elements of one run, sized by the first run
        self.run_s = RUN_S

    def match(self, call_s: float) -> None:
        """Runs as long as one of the kernel's calls (``call_s``, within MIN_RUN_S-MAX_RUN_S)."""
        self.run_s = min(MAX_RUN_S, max(MIN_RUN_S, call_s))
        self._size = 0

    def measure(self) -> float | None:
        began = time.perf_counter()
        try:
            rate = self._measure()
        finally:
            self.spent_s += time.perf_counter() - began
        self.rates.append(rate)
        return rate

    def _measure(self) -> float | None:
        """The control's figure, with the kernel's process stopped (``Device.pause``: it is
        between its calls); None if that process ran meanwhile all the same."""
        self.device.pause()
        try:
            before, start = task_ns(self.pids), time.perf_counter()
            runs = min(MAX_RUNS, max(MIN_RUNS, round(CONTROL_S / self.run_s)))
            rate = stats.point([self._run() for _ in range(runs)])
            wall_ns = (time.perf_counter() - start) * 1e9
            ran = self.pids and task_ns(self.pids) - before > DISTURBED_SHARE * wall_ns
        finally:
            self.device.resume()
        if ran:
            self.note = "the kernel's process ran while the control did (a thread left busy)"
            return None
        return rate if rate > 0 else None

    def _run(self) -> float:
        """One run of about ``run_s`` (the first sizes the rest); its rate. A memory control streams
        its stores past the cache where the ISA can (non-temporal stores: what the best of the
        ceiling's patterns do; plain stores elsewhere)."""
        memory = self.spec.kind == "memory"
        size = self._size or (self.elements // PASS_SHARE if memory else 100_000)
        start = time.perf_counter()
        if memory:
            rate = self.lib.accelopt_stream(
                self.threads, self.spec.reads, self.spec.writes, size, 1
            )
        else:
            rate = self.lib.accelopt_flops(self.threads, size)
        took = time.perf_counter() - start
        if not self._size and took > 0:  # later runs last about RUN_S
            wanted = int(size * self.run_s / took)
            self._size = max(1000, min(wanted, self.elements) if memory else wanted)
        return rate
