"""One evaluation inside a worker: build, check on fresh seeds, time on rotated sets, verify.

Each step fails with a status when the kernel fails it; ``execute`` stops at the first. Its
``KernelResult`` goes to the parent, which scores it (it holds the hardware spec and decides
PASSED/SUSPICIOUS, ``parent/scoring.py``).

The timed calls are a ``TimedLoop`` (``timed_loop.py``); a re-timing session of several kernels is
a ``RetimeRun`` (``retime.py``), which runs these same steps for each.
"""

from __future__ import annotations

import ctypes
import math
import subprocess
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from accelopt import settings
from accelopt.backends.base import KernelError, KernelLoadError, LoadedKernel, get_backend
from accelopt.backends.device import Buffer, Device, HostDevice
from accelopt.backends.guards import describe, find_overruns
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.problems.records import Problem
from accelopt.problems.shipping import resolve_ref
from accelopt.profiling.config import HARNESS_VERSION
from accelopt.profiling.stats import summarize
from accelopt.profiling.worker import contention, hostmemory, placement, references, sandbox
from accelopt.profiling.worker.control import Control
from accelopt.profiling.worker.correctness import check_outputs, modified_input
from accelopt.profiling.worker.freshness import Audit, Freshness
from accelopt.profiling.worker.hostmemory import Lease
from accelopt.profiling.worker.protocol import (
    SEPARATE,
    Channel,
    EvaluateRequest,
    KernelResult,
    Phase,
)
from accelopt.profiling.worker.timed_loop import BATCH_S, MAX_BATCH, Failed, RotationSets, TimedLoop
from accelopt.profiling.worker.timing import rotation_sets

__all__ = ["EvaluationRun", "Failed", "RotationSets", "Ticker"]

TICK_S = 0.25  # a timing loop tells the parent it is alive this often


def _flush_c_stdio() -> None:
    ctypes.CDLL(None).fflush(None)


class Ticker:
    """Tells the parent, every TICK_S of timed calls, that they go on (the timing phase's deadline
    restarts with each message). One per timing: a session's kernels share it."""

    def __init__(self, phase: Callable[[str, str], None]) -> None:
        self.phase = phase
        self.last = time.perf_counter()

    def reset(self) -> None:
        self.last = time.perf_counter()

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self.last >= TICK_S:
            self.phase("call", "timing")
            self.last = now


class EvaluationRun:
    """One kernel's evaluation in the worker (see the module's docstring); ``result`` is what it
    found so far, sent to the parent as it is once ``execute`` returns."""

    def __init__(
        self, request: EvaluateRequest, channel: Channel, problem: Problem | None = None
    ) -> None:
        """``problem``: the request's, when the caller has loaded it already (a session)."""
        self.channel = channel
        self.config = request.config
        self.problem = problem if problem is not None else resolve_ref(request.problem)
        self.workload = request.workload
        self.sizes = self.problem.workload(self.workload).sizes
        self.backend = get_backend(request.backend)
        self.device: Device = HostDevice()  # the backend's, once execute holds the device lock
        self.kernel = Kernel(request.kernel.source, request.backend, request.kernel.name)
        self.seeds = request.seeds
        self.threads = request.threads
        self.llc_bytes = request.llc_bytes
        self.lock_path = Path(request.lock_path)
        self.result = KernelResult()
        self.loaded: LoadedKernel | None = None
        self.last_seed: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] = ((), ())
        self.call_s: list[float] = []  # the correctness calls' wall time, seen by the worker
        self.rng = np.random.default_rng()  # nothing the kernel can know: not the problem's seeds
        self.fresh: Freshness | None = None  # the rotation sets' inputs, once filled
        self.refresh_s = 0.0  # seconds to rewrite one set's inputs (measured filling them)
        self.tick = Ticker(self.phase)
        self.control_spec = request.control
        self.race_s = request.race_s
        self.drift = request.drift
        # arrays the worker keeps for what is read back (hostmemory.py), given back by close
        self.host = Lease(hostmemory.worker_memory(self.config.host_memory_bytes))

    def phase(self, name: str, detail: str = "") -> None:
        self.channel.send(Phase(phase=name, detail=detail))

    def _note(self, **found: Any) -> None:
        """Record what a step found in the result."""
        for name, value in found.items():
            setattr(self.result, name, value)

    def execute(self) -> KernelResult:
        try:
            with self.recording():
                sets = self.prepare()
                if sets is not None:
                    self.time(sets)
        finally:
            self.close()
        return self.result

    @property
    def failed(self) -> bool:
        return self.result.status is not None

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Runs a step: its failure becomes the result's status and error, never an exception."""
        try:
            yield
        except Failed as failure:
            self._note(status=failure.status, error=failure.error)
        except KernelError as exc:  # the kernel's own code raised (or broke a run-time rule)
            self._note(status=exc.status, error=str(exc))
        except Exception as exc:  # a harness fault is reported as data, never lost
            tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            self._note(status=Status.CRASH, error=f"harness error: {tail or exc}")

    def prepare(self) -> RotationSets | None:
        """Build, load and check the kernel; the rotation sets to time it on (None: check only).

        Everything that loads the machine (compiling, references, copying the rotation sets,
        checking outputs) holds the device lock shared, so it never runs beside a timing."""
        self.phase("lock")
        with devicelock.shared(self.lock_path):
            self.phase("start")
            self.device = self.backend.device()  # may import torch, start CUDA, an executor
            artifact = self.build()
            # Every buffer exists before the kernel is loaded: a separate kernel process
            # (the cpu backend's) is trusted only until then.
            checked = self._check_buffers()
            sets = None if self.config.check_only else self._rotation_buffers()
            self.load(artifact)
            self.check(*checked)
            if sets is not None:
                self.phase("prepare")
                self._fill_rotation(sets)
        return sets

    def _kernel_memory(self) -> AbstractContextManager[object]:
        """The address-space cap while kernel code runs in this process; none where the kernel
        has a process of its own (capped there, for its whole life: executor.c)."""
        if getattr(self.device, "kernel_pids", ()):
            return nullcontext()
        return sandbox.memory_cap(self.config.memory_cap_bytes)

    def close(self) -> None:
        isolation = getattr(self.device, "isolation", None)
        if isolation is not None:  # the kernel ran in its own process, never in this one
            self._note(isolation=isolation, kernel_process=SEPARATE)
        if self.loaded is not None:
            self.loaded.close()
        close = getattr(self.device, "close", None)
        if close is not None:
            close()
        self.host.close()
        _flush_c_stdio()

    # -- build -------------------------------------------------------------------------------
    def build(self) -> Path:
        self.phase("compile")
        built = self.backend.build(
            self.kernel, self.problem, self.sizes, self.config.compile_timeout_s
        )
        self._note(compile_s=built.seconds, compile_cached=built.cached)
        if not built.ok:
            raise Failed(built.status or Status.COMPILE_ERROR, built.error)
        assert built.artifact is not None
        return built.artifact

    def load(self, artifact: Path) -> None:
        self.phase("load")
        self.backend.set_threads(self.threads)
        try:
            with self._kernel_memory():  # constructors run here
                self.loaded = self.backend.load(
                    artifact, self.problem, self.device, self.config.memory_cap_bytes
                )
        except (KernelLoadError, OSError) as exc:
            raise Failed(Status.COMPILE_ERROR, str(exc)) from None
        if self.backend.compiles_on_first_call:
            self._first_call()

    def _first_call(self) -> None:
        """JIT backends compile at the first launch: made here, on zeros of the workload's
        sizes, under the compile deadline; what fails is the build's fault."""
        assert self.loaded is not None
        self.phase("compile", "first launch")
        arrays = [self.device.empty(t.dims(self.sizes), 0.0) for t in self.problem.inputs]
        arrays += self._empty_outputs()
        self.result.kernel_ran = True
        start = time.perf_counter()
        try:
            with self._kernel_memory():
                self.loaded(arrays)
        except KernelError as exc:  # Triton's or the launcher's error: the build failed
            build_error = exc.status is Status.CRASH and not exc.fault
            raise Failed(Status.COMPILE_ERROR if build_error else exc.status, str(exc)) from None
        self.result.compile_s = (self.result.compile_s or 0.0) + time.perf_counter() - start

    # -- correctness -------------------------------------------------------------------------
    def _empty_outputs(self, fenced: bool = False) -> list[Buffer]:
        shapes = self.problem.output_shapes(self.sizes)
        return [self.device.empty(s, np.nan, fenced=fenced) for s in shapes]

    def _labels(self) -> list[str]:
        """How the kernel's arguments are named in errors, in call order."""
        return [f"input {t.name!r}" for t in self.problem.inputs] + [
            f"output {t.name!r}" for t in self.problem.outputs
        ]

    def _check_guards(self, arrays: list[Buffer], detail: str) -> None:
        """The guard regions around every argument must be as they were made (guards.py)."""
        for label, buffer in zip(self._labels(), arrays, strict=True):
            guards = self.device.guards(buffer)
            overruns = find_overruns(guards) if guards is not None else []
            if overruns:
                raise Failed(Status.INCORRECT, f"the kernel {describe(label, overruns)} ({detail})")

    def _call(self, arrays: list[Buffer], detail: str) -> None:
        assert self.loaded is not None
        self.phase("call", detail)
        self.result.kernel_ran = True
        try:
            with self._kernel_memory():
                self.loaded(arrays)
        except KernelError as exc:
            message = f"{exc} during the kernel call ({detail})"
            raise KernelError(message, exc.status, exc.fault) from None
        self._check_guards(arrays, detail)

    def _prepare(self, seed: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """The seed's inputs and float64 references: computed once, then reused (references.py)."""

        def compute() -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
            fresh = self.problem.generate(self.sizes, seed)
            return fresh, self.problem.reference(*(x.astype(np.float64) for x in fresh))

        store = references.worker_store(
            settings.cache_dir(),
            HARNESS_VERSION,
            self.config.reference_memory_bytes,
            self.config.reference_disk_bytes,
        )
        return store.get(self.problem.versioned_name, self.workload, seed, compute)

    def _prepared(self) -> Iterator[tuple[str, tuple[np.ndarray, ...], tuple[np.ndarray, ...]]]:
        """Inputs and float64 references per seed, two seeds at a time on two threads (NumPy
        releases the GIL), never while kernel code runs: the memory cap stays the kernel's."""
        n = len(self.seeds)
        with ThreadPoolExecutor(max_workers=2) as pool:
            for first in range(0, n, 2):
                batch = self.seeds[first : first + 2]
                self.phase("reference", f"seeds {first + 1}-{first + len(batch)} of {n}")
                prepared = list(pool.map(self._prepare, batch))  # all done before any call
                for j, (fresh, refs) in enumerate(prepared):
                    yield f"seed {first + j + 1} of {n}", fresh, refs

    def _check_buffers(self) -> tuple[list[Buffer], list[Buffer]]:
        """The correctness calls' buffers, fenced: an access beyond a guard region faults."""
        device = self.device
        inputs = [device.empty(t.dims(self.sizes), fenced=True) for t in self.problem.inputs]
        return inputs, self._empty_outputs(fenced=True)

    def _read_back(self, buffer: Buffer, name: tuple[str, int]) -> np.ndarray:
        """A correctness call's buffer on the host: where the device copies anyway, into the
        array this evaluation keeps for ``name`` (``hostmemory.py``), the same for every seed."""
        if not getattr(self.device, "copies_to_host", False):
            return self.device.to_host(buffer)
        return self.device.to_host(buffer, out=self.host.array(name, tuple(buffer.shape)))

    def check(self, inputs: list[Buffer], outputs: list[Buffer]) -> None:
        """Same buffers, fresh contents for every seed: a kernel that caches by address fails."""
        start = time.perf_counter()
        in_names = [t.name for t in self.problem.inputs]
        out_names = [t.name for t in self.problem.outputs]
        device = self.device
        worst = 0.0
        for detail, fresh, refs in self._prepared():
            for buf, x in zip(inputs, fresh, strict=True):
                device.upload(x, into=buf)
            for out in outputs:
                device.fill(out, np.nan)
            call_start = time.perf_counter()
            self._call([*inputs, *outputs], detail)
            self.call_s.append(time.perf_counter() - call_start)
            # The call is over: checking its outputs is the harness's time, not the kernel's
            # (on a busy machine it may take longer than a call's deadline allows).
            self.phase("check", detail)
            read = [self._read_back(b, ("input", i)) for i, b in enumerate(inputs)]
            changed = modified_input(in_names, read, fresh)
            if changed:
                raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} ({detail})")
            host_outputs = [self._read_back(o, ("output", i)) for i, o in enumerate(outputs)]
            verdict = check_outputs(out_names, host_outputs, refs, self.problem.tolerance)
            worst = max(worst, verdict.max_rel_err)
            self.result.max_rel_err = worst
            if verdict.error:
                raise Failed(Status.INCORRECT, f"{verdict.error} ({detail})")
            self.last_seed = (fresh, refs)
        self.result.check_s = time.perf_counter() - start

    # -- timing ------------------------------------------------------------------------------
    def _rotation_buffers(self) -> RotationSets:
        """Input/output sets at distinct addresses: together they span twice the last-level
        cache (and COLD_SPAN_BYTES), so each timed call reads from memory. Filled after the
        check with rolls of the last seed's inputs (``_fill_rotation``)."""
        count = rotation_sets(
            self.problem.buffer_bytes(self.sizes), self.llc_bytes, self.config.rotation_budget_bytes
        )
        empty = self.device.empty
        return [
            (tuple(empty(t.dims(self.sizes)) for t in self.problem.inputs), self._empty_outputs())
            for _ in range(count)
        ]

    def _fill_rotation(self, sets: RotationSets) -> None:
        """Every set's inputs: independent random rolls of the last seed's (``freshness.py``);
        what one set's rewrite costs decides how often the timed batches rewrite them."""
        self.fresh = Freshness(self.device, [ins for ins, _ in sets], self.last_seed[0], self.rng)
        start = time.perf_counter()
        for index in range(len(sets)):
            self.fresh.refresh(index)
        self.refresh_s = (time.perf_counter() - start) / max(len(sets), 1)

    def _control(self, sets: RotationSets) -> Control | None:
        """The control to time with the kernel, where the request asks for one and it builds."""
        if self.control_spec is None:
            return None
        pids = getattr(self.device, "kernel_pids", ())
        span = len(sets) * self.problem.buffer_bytes(self.sizes)
        try:
            return Control(self.control_spec, self.threads, pids, span)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            self._note(control_note=f"the control could not run: {exc}")
            return None

    def time(self, sets: RotationSets) -> None:
        control = self._control(sets)
        loop = TimedLoop(self, sets, control)
        self.phase("lock")
        with devicelock.exclusive(self.lock_path):
            start = time.perf_counter()
            self.phase("call", "timing")
            self.result.kernel_ran = True
            pids = getattr(self.device, "kernel_pids", ())
            before = contention.snapshot(pids)
            with self._kernel_memory(), placement.pinned(pids, self.threads) as where:
                self._note(placement=where)
                self.tick.reset()
                loop.start()
                loop.run_to_end()
                loop.confirm()
            self.result.time_s = time.perf_counter() - start
            self._record_contention(before, contention.snapshot(pids))
        self.summarize(loop)
        self.phase("lock")  # the other worker may be timing: waiting is not this kernel's time
        with devicelock.shared(self.lock_path):
            self.verify_timed(loop)

    def summarize(self, loop: TimedLoop) -> None:
        stats = summarize(loop.samples)
        self._note(
            latency_s=stats.latency_s, min_s=stats.min_s, noise=stats.noise, calls=loop.count,
            ci_low_s=stats.ci_low_s, ci_high_s=stats.ci_high_s, raced=loop.raced,
            slice_medians=loop.slice_medians,
        )  # fmt: skip
        if loop.control is not None:
            self._note(control_rates=loop.control.rates, control_note=loop.control.note)

    def verify_timed(self, loop: TimedLoop) -> None:
        """After the timing (the device lock held shared): every set's guards, the calls the
        audit kept (``_verify``), then whether the kernel was faster on the sparse batches than on
        the full ones, as measured and confirmed (``TimedLoop.confirm``: SUSPICIOUS)."""
        self.phase("verify")
        for ins, outs in loop.sets:  # a few microseconds a set: every set
            self._check_guards([*ins, *outs], "in the timed calls")
        self._verify(loop.audit, loop.fresh)
        if loop.skipped:
            raise Failed(Status.SUSPICIOUS, loop.skipped)

    def _warmup_count(self, n_sets: int) -> int:
        """Warm-up calls: the code, the threads and the branch predictors, not the data (every
        set's pages are already faulted in: inputs are written, outputs are filled with NaN)."""
        return max(1, self.config.warmup_calls)

    def _batch_size(self, n_sets: int, call_s: float) -> int:
        """Calls per round trip: 1 where the device times each call itself; else enough calls
        of ``call_s`` (the fastest warm-up call, as the device timed it: the correctness calls'
        wall time holds their guard checks) for about BATCH_S (the worker's round trip,
        subtracted, is then a small part), each set at most once (every call gets freshly
        perturbed inputs)."""
        if not getattr(self.device, "batches", False):
            return 1
        return max(1, min(n_sets, MAX_BATCH, math.ceil(BATCH_S / max(call_s, 1e-7))))

    def _record_contention(
        self, before: contention.CpuSnapshot | None, after: contention.CpuSnapshot | None
    ) -> None:
        """What other processes and the hypervisor took of the machine while this kernel was
        timed (reported with the evaluation; never a reason to reject it)."""
        if before is not None and after is not None:
            seen = contention.contention(before, after)
            self._note(load_others=seen.others, load_steal=seen.steal)

    def _reference(self, inputs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        return tuple(self.problem.reference(*(x.astype(np.float64) for x in inputs)))

    def _verify(self, audit: Audit, fresh: Freshness) -> None:
        """The timed calls kept by the audit: their inputs as the harness left them, their
        outputs right, element by element, against the reference on those (rolled, perturbed)
        inputs."""
        in_names = [t.name for t in self.problem.inputs]
        out_names = [t.name for t in self.problem.outputs]
        expected = [
            fresh.rebuild(rolls, [self.host.array(("expected", n, k), x.shape)
                                  for k, x in enumerate(inputs)])
            for n, (inputs, _, rolls) in enumerate(audit.kept)
        ]  # fmt: skip
        for n, (inputs, _, _) in enumerate(audit.kept):
            changed = modified_input(in_names, inputs, expected[n])
            if changed:
                raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} while timed")
        with ThreadPoolExecutor(max_workers=2) as pool:  # NumPy releases the GIL
            references = list(pool.map(self._reference, expected))
        for n, ((_, outputs, _), refs) in enumerate(zip(audit.kept, references, strict=True), 1):
            verdict = check_outputs(out_names, outputs, refs, self.problem.tolerance)
            if verdict.error:
                raise Failed(
                    Status.INCORRECT,
                    f"{verdict.error} (timed call {audit.calls[n - 1]}, checked afterwards: "
                    "every timed call gets inputs no call saw before)",
                )
