"""One evaluation inside a worker: build, check on fresh seeds, time on rotated sets, verify.

Each step returns a status when the kernel fails it; ``execute`` stops at the first. The parent
turns the result into an ``Evaluation`` (it holds the hardware spec and decides PASSED/SUSPICIOUS).
"""

from __future__ import annotations

import ctypes
import math
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from accelopt import settings
from accelopt.backends.base import KernelError, KernelLoadError, LoadedKernel, get_backend
from accelopt.backends.device import Buffer, CanarySet, Device, HostDevice
from accelopt.backends.guards import describe, find_overruns
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.problems.loader import load_problem
from accelopt.profiling import contention, references, sandbox
from accelopt.profiling.config import HARNESS_VERSION, EvalConfig
from accelopt.profiling.correctness import check_outputs, modified_input
from accelopt.profiling.freshness import Audit, Freshness
from accelopt.profiling.protocol import Channel
from accelopt.profiling.timing import ci_half_width, rotation_sets, summarize

TICK_S = 0.25  # a timing loop tells the parent it is alive this often
BATCH_S = 0.002  # a batch of calls in another process lasts about this long...
MAX_BATCH = 256  # ... and holds at most this many calls (executor.c)


class _Precision:
    """Whether the median of the timed calls is known to within ``target`` (its 95 % interval's
    relative half-width); checked every CHECK_EVERY_S of timing, as sorting costs time."""

    CHECK_EVERY_S = 0.05

    def __init__(self, target: float) -> None:
        self.target = target
        self.next_check_s = 0.0

    def __call__(self, samples: list[float], elapsed_s: float) -> bool:
        if elapsed_s < self.next_check_s:
            return False
        self.next_check_s = elapsed_s + self.CHECK_EVERY_S
        return ci_half_width(samples) <= self.target


class Failed(Exception):
    """A kernel failed a step: carries the status and a short reason."""

    def __init__(self, status: Status, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


def _flush_c_stdio() -> None:
    ctypes.CDLL(None).fflush(None)


class EvaluationRun:
    def __init__(self, request: dict[str, Any], channel: Channel) -> None:
        self.channel = channel
        self.config = EvalConfig(**request["config"])
        self.problem = load_problem(request["problem"])
        self.workload: str = request["workload"]
        self.sizes = self.problem.workload(self.workload).sizes
        self.backend = get_backend(request["backend"])
        self.device: Device = HostDevice()  # the backend's, once execute holds the device lock
        self.kernel = Kernel(request["source"], request["backend"], request["kernel_name"])
        self.seeds: list[int] = request["seeds"]
        self.threads = int(request["threads"])
        self.llc_bytes: int | None = request.get("llc_bytes")
        self.lock_path = Path(request["lock_path"])
        self.result: dict[str, Any] = {"status": None, "error": "", "kernel_ran": False}
        self.loaded: LoadedKernel | None = None
        self.last_seed: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] = ((), ())
        self.call_s: list[float] = []  # the correctness calls' wall time, seen by the worker

    def phase(self, name: str, detail: str = "") -> None:
        self.channel.send({"type": "phase", "phase": name, "detail": detail})

    def execute(self) -> dict[str, Any]:
        try:
            # Everything that loads the machine (compiling, references, copying the rotation sets,
            # checking outputs) holds the device lock shared, so it never runs beside a timing.
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
                    self._fill_rotation(sets)
            if sets is not None:
                self.time(sets)
        except Failed as failure:
            self.result.update(status=str(failure.status), error=failure.error)
        except KernelError as exc:  # the kernel's own code raised (or broke a run-time rule)
            self.result.update(status=str(exc.status), error=str(exc))
        except Exception as exc:  # a harness fault is reported as data, never lost
            tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            self.result.update(status=str(Status.CRASH), error=f"harness error: {tail or exc}")
        finally:
            self._close()
        return self.result

    def _kernel_memory(self) -> AbstractContextManager[object]:
        """The address-space cap while kernel code runs in this process; none where the kernel
        has a process of its own (capped there, for its whole life: executor.c)."""
        if getattr(self.device, "kernel_pids", ()):
            return nullcontext()
        return sandbox.memory_cap(self.config.memory_cap_bytes)

    def _close(self) -> None:
        isolation = getattr(self.device, "isolation", None)
        if isolation is not None:  # the kernel ran in its own process, never in this one
            self.result.update(isolation=isolation, kernel_process="separate")
        if self.loaded is not None:
            self.loaded.close()
        close = getattr(self.device, "close", None)
        if close is not None:
            close()
        _flush_c_stdio()

    # -- build -------------------------------------------------------------------------------
    def build(self) -> Path:
        self.phase("compile")
        built = self.backend.build(
            self.kernel, self.problem, self.sizes, self.config.compile_timeout_s
        )
        self.result.update(compile_s=built.seconds, compile_cached=built.cached)
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
        self.result["kernel_ran"] = True
        start = time.perf_counter()
        try:
            with self._kernel_memory():
                self.loaded(arrays)
        except KernelError as exc:  # Triton's or the launcher's error: the build failed
            build_error = exc.status is Status.CRASH and not exc.fault
            raise Failed(Status.COMPILE_ERROR if build_error else exc.status, str(exc)) from None
        self.result["compile_s"] = self.result.get("compile_s", 0.0) + time.perf_counter() - start

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
        self.result["kernel_ran"] = True
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
        return store.get(self.problem.name, self.workload, seed, compute)

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
            changed = modified_input(in_names, [device.to_host(b) for b in inputs], fresh)
            if changed:
                raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} ({detail})")
            host_outputs = [device.to_host(o) for o in outputs]
            verdict = check_outputs(out_names, host_outputs, refs, self.problem.tolerance)
            worst = max(worst, verdict.max_rel_err)
            self.result["max_rel_err"] = worst
            if verdict.error:
                raise Failed(Status.INCORRECT, f"{verdict.error} ({detail})")
            self.last_seed = (fresh, refs)
        self.result["check_s"] = time.perf_counter() - start

    # -- timing ------------------------------------------------------------------------------
    def _rotation_buffers(self) -> list[tuple[tuple[Buffer, ...], list[Buffer]]]:
        """Input/output sets at distinct addresses: together they span twice the last-level
        cache (and COLD_SPAN_BYTES), so each timed call reads from memory. Filled after the
        check with the last seed's inputs (``_fill_rotation``)."""
        count = rotation_sets(
            self.problem.buffer_bytes(self.sizes), self.llc_bytes, self.config.rotation_budget_bytes
        )
        empty = self.device.empty
        return [
            (tuple(empty(t.dims(self.sizes)) for t in self.problem.inputs), self._empty_outputs())
            for _ in range(count)
        ]

    def _fill_rotation(self, sets: list[tuple[tuple[Buffer, ...], list[Buffer]]]) -> None:
        inputs, _ = self.last_seed
        for ins, _ in sets:
            for buf, x in zip(ins, inputs, strict=True):
                self.device.upload(x, into=buf)

    def time(self, sets: list[tuple[tuple[Buffer, ...], list[Buffer]]]) -> None:
        self.result["rotation_sets"] = len(sets)
        assert self.loaded is not None
        calls = [self.loaded.bind([*ins, *outs]) for ins, outs in sets]
        rng = np.random.default_rng()  # nothing the kernel can know: not the problem's seeds
        fresh = Freshness(self.device, [ins for ins, _ in sets], self.last_seed[0], rng)
        audit = Audit(self.config.verify_calls, rng)
        self.phase("lock")
        with devicelock.exclusive(self.lock_path):
            start = time.perf_counter()
            self.phase("call", "timing")
            self.result["kernel_ran"] = True
            pids = getattr(self.device, "kernel_pids", ())
            before = contention.snapshot(pids)
            with self._kernel_memory():
                canaries = self.device.canaries([o for _, o in sets], self.seeds[0])
                samples, count = self._timed_loop(calls, sets, canaries, fresh, audit)
            self.result["time_s"] = time.perf_counter() - start
            self._record_contention(before, contention.snapshot(pids))
        stats = summarize(samples)
        self.result.update(
            latency_s=stats.latency_s, min_s=stats.min_s, noise=stats.noise, calls=count,
            ci_low_s=stats.ci_low_s, ci_high_s=stats.ci_high_s,
        )  # fmt: skip
        self.phase("lock")  # the other worker may be timing: waiting is not this kernel's time
        with devicelock.shared(self.lock_path):
            self.phase("verify")
            for ins, outs in sets:  # a few microseconds a buffer: every set
                self._check_guards([*ins, *outs], "in the timed calls")
            self._verify(audit, fresh)

    def _warmup_count(self, n_sets: int) -> int:
        """Warm-up calls: the code, the threads and the branch predictors, not the data (every
        set's pages are already faulted in: inputs are copies, outputs are filled with NaN)."""
        return max(1, self.config.warmup_calls)

    def _tick(self, last: float) -> float:
        now = time.perf_counter()
        if now - last >= TICK_S:
            self.phase("call", "timing")
            return now
        return last

    def _batch_size(self, n_sets: int) -> int:
        """Calls per round trip: 1 where the device times each call itself; else enough calls
        for about BATCH_S (the worker's round trip, subtracted, is then a small part), each set at
        most once (every call gets freshly perturbed inputs)."""
        if not getattr(self.device, "batches", False) or not self.call_s:
            return 1
        typical = float(np.median(self.call_s))
        return max(1, min(n_sets, MAX_BATCH, math.ceil(BATCH_S / max(typical, 1e-7))))

    def _timed_loop(
        self,
        calls: list[Any],
        sets: list[tuple[tuple[Buffer, ...], list[Buffer]]],
        canaries: CanarySet,
        fresh: Freshness,
        audit: Audit,
    ) -> tuple[list[float], int]:
        """A short warm-up, then timed batches round the sets until min_calls and min_time are
        met. Before each call its set's inputs are perturbed (no call sees inputs seen before)
        and its canaries armed; after each batch the canaries must be written, and a few calls
        chosen at random are kept to be checked against the reference (``_verify``).
        Returns a sample per batch (seconds per call) and the number of timed calls."""
        cfg, n, warm = self.config, len(calls), self._warmup_count(len(calls))
        last = time.perf_counter()
        for i in range(warm):
            calls[i % n]()
            last = self._tick(last)
        k = self._batch_size(n)
        self.result["batch_calls"] = k
        samples: list[float] = []
        count = 0
        clock, time_calls = time.perf_counter, self.device.time_calls
        begin = clock()
        precise = _Precision(cfg.ci_target)
        while True:
            elapsed = clock() - begin
            enough = count >= cfg.min_calls and elapsed >= cfg.min_time_s
            capped = elapsed >= max(cfg.ci_time_cap_s, cfg.min_time_s)
            if enough and (capped or precise(samples, elapsed)):
                return samples, count
            if samples and elapsed >= cfg.max_time_s:
                return samples, count
            batch = [(warm + count + j) % n for j in range(k)]
            for index in batch:
                fresh.perturb(index)
                canaries.arm(index)
            samples.append(time_calls([calls[i] for i in batch]) / k)
            count += k
            if not canaries.written():
                raise Failed(
                    Status.INCORRECT,
                    f"a timed call (of calls {count - k + 1}-{count}) left its output unwritten: "
                    "the kernel skips work when called again on buffers it has seen",
                )
            for index in audit.choose(count - k, batch):
                ins, outs = sets[index]
                audit.keep(
                    [self.device.to_host(b).copy() for b in ins],
                    [self.device.to_host(b).copy() for b in outs],
                    fresh.expected(index),
                )
            last = self._tick(last)

    def _record_contention(
        self, before: contention.CpuSnapshot | None, after: contention.CpuSnapshot | None
    ) -> None:
        """What other processes and the hypervisor took of the machine while this kernel was
        timed (reported with the evaluation; never a reason to reject it)."""
        if before is not None and after is not None:
            seen = contention.contention(before, after)
            self.result.update(load_others=seen.others, load_steal=seen.steal)

    def _verify(self, audit: Audit, fresh: Freshness) -> None:
        """The timed calls kept by the audit: their inputs as the harness left them, their
        outputs right against the reference on those (perturbed) inputs."""
        in_names = [t.name for t in self.problem.inputs]
        out_names = [t.name for t in self.problem.outputs]
        for n, (inputs, outputs, expected) in enumerate(audit.kept, 1):
            changed = modified_input(in_names, inputs, expected)
            if changed:
                raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} while timed")
            refs = self.problem.reference(*(x.astype(np.float64) for x in expected))
            verdict = check_outputs(out_names, outputs, refs, self.problem.tolerance)
            if verdict.error:
                raise Failed(
                    Status.INCORRECT,
                    f"{verdict.error} (timed call {audit.calls[n - 1]}, checked afterwards: "
                    "every timed call gets inputs no call saw before)",
                )
