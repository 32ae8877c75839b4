"""One evaluation inside a worker: build, check on fresh seeds, time on rotated sets, verify.

Each step returns a status when the kernel fails it; ``execute`` stops at the first. The parent
turns the result into an ``Evaluation`` (it holds the hardware spec and decides PASSED/SUSPICIOUS).
"""

from __future__ import annotations

import ctypes
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
from accelopt.profiling.protocol import Channel
from accelopt.profiling.timing import ci_half_width, rotation_sets, summarize

TICK_S = 0.25  # a timing loop tells the parent it is alive this often
REPEAT_CALLS = 3  # extra timed calls on seen sets, to catch kernels that replay results


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

    def phase(self, name: str, detail: str = "") -> None:
        self.channel.send({"type": "phase", "phase": name, "detail": detail})

    def execute(self) -> dict[str, Any]:
        try:
            # Everything that loads the machine (compiling, references, copying the rotation sets,
            # checking outputs) holds the device lock shared, so it never runs beside a timing.
            self.phase("lock")  # no deadline while another worker times a kernel
            with devicelock.shared(self.lock_path):
                self.phase("start")
                self.device = self.backend.device()  # may import torch, start CUDA
                self.build()
                self.check()
                sets = None if self.config.check_only else self._rotation()
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
            if self.loaded is not None:
                self.loaded.close()
            _flush_c_stdio()
        return self.result

    # -- build -------------------------------------------------------------------------------
    def build(self) -> None:
        self.phase("compile")
        built = self.backend.build(
            self.kernel, self.problem, self.sizes, self.config.compile_timeout_s
        )
        self.result.update(compile_s=built.seconds, compile_cached=built.cached)
        if not built.ok:
            raise Failed(built.status or Status.COMPILE_ERROR, built.error)
        self.phase("load")
        try:
            assert built.artifact is not None
            with sandbox.memory_cap(self.config.memory_cap_bytes):  # constructors run here
                self.loaded = self.backend.load(built.artifact, self.problem)
        except (KernelLoadError, OSError) as exc:
            raise Failed(Status.COMPILE_ERROR, str(exc)) from None
        self.backend.set_threads(self.threads)
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
            with sandbox.memory_cap(self.config.memory_cap_bytes):
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
        with sandbox.memory_cap(self.config.memory_cap_bytes):
            self.loaded(arrays)
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

    def check(self) -> None:
        """Same buffers, fresh contents for every seed: a kernel that caches by address fails."""
        start = time.perf_counter()
        in_names = [t.name for t in self.problem.inputs]
        out_names = [t.name for t in self.problem.outputs]
        device = self.device
        # Fenced: an access beyond a buffer's guard regions faults (buffers.py).
        inputs = [device.empty(t.dims(self.sizes), fenced=True) for t in self.problem.inputs]
        outputs = self._empty_outputs(fenced=True)
        worst = 0.0
        for detail, fresh, refs in self._prepared():
            for buf, x in zip(inputs, fresh, strict=True):
                device.upload(x, into=buf)
            for out in outputs:
                device.fill(out, np.nan)
            self._call([*inputs, *outputs], detail)
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
    def _rotation(self) -> list[tuple[tuple[Buffer, ...], list[Buffer]]]:
        """Copies of the last seed's inputs at distinct addresses, with their own outputs.

        The contents repeat (so the last seed's reference verifies any set), the addresses do not:
        together the sets span twice the last-level cache, so each timed call reads from memory.
        """
        count = rotation_sets(
            self.problem.buffer_bytes(self.sizes), self.llc_bytes, self.config.rotation_budget_bytes
        )
        inputs, _ = self.last_seed
        upload = self.device.upload
        return [(tuple(map(upload, inputs)), self._empty_outputs()) for _ in range(count)]

    def time(self, sets: list[tuple[tuple[Buffer, ...], list[Buffer]]]) -> None:
        self.result["rotation_sets"] = len(sets)
        assert self.loaded is not None
        calls = [self.loaded.bind([*ins, *outs]) for ins, outs in sets]
        self.phase("lock")
        with devicelock.exclusive(self.lock_path):
            start = time.perf_counter()
            self.phase("call", "timing")
            self.result["kernel_ran"] = True
            before = contention.snapshot()
            with sandbox.memory_cap(self.config.memory_cap_bytes):
                canaries = self.device.canaries([o for _, o in sets], self.seeds[0])
                samples = self._timed_loop(calls, canaries)
                self.result["repeat_s"] = self._repeat_calls(calls, canaries)
            self.result["time_s"] = time.perf_counter() - start
            self._record_contention(before, contention.snapshot())
        stats = summarize(samples)
        self.result.update(
            latency_s=stats.latency_s, min_s=stats.min_s, noise=stats.noise, calls=stats.calls,
            ci_low_s=stats.ci_low_s, ci_high_s=stats.ci_high_s,
        )  # fmt: skip
        self.phase("lock")  # the other worker may be timing: waiting is not this kernel's time
        with devicelock.shared(self.lock_path):
            self.phase("verify")
            for ins, outs in sets:  # a few microseconds a buffer: every set, not just the last
                self._check_guards([*ins, *outs], "in the timed calls")
            self._verify(sets[(len(samples) + self._warmup_count(len(sets)) - 1) % len(sets)])

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

    def _timed_loop(self, calls: list[Any], canaries: CanarySet) -> list[float]:
        """A short warm-up, then timed calls round the sets until min_calls and min_time are met;
        each timed call must write its canaries (see canary.py)."""
        cfg, n, warm = self.config, len(calls), self._warmup_count(len(calls))
        last = time.perf_counter()
        for i in range(warm):
            calls[i % n]()
            last = self._tick(last)
        samples: list[float] = []
        clock, time_call = time.perf_counter, self.device.time_call
        begin = clock()
        precise = _Precision(cfg.ci_target)
        while True:
            elapsed = clock() - begin
            enough = len(samples) >= cfg.min_calls and elapsed >= cfg.min_time_s
            capped = elapsed >= max(cfg.ci_time_cap_s, cfg.min_time_s)
            if enough and (capped or precise(samples, elapsed)):
                return samples
            if samples and elapsed >= cfg.max_time_s:
                return samples
            index = (warm + len(samples)) % n
            canaries.arm(index)
            samples.append(time_call(calls[index]))
            if not canaries.written():
                raise Failed(
                    Status.INCORRECT,
                    f"timed call {len(samples)} left its output unwritten: the kernel skips work "
                    "when called again on buffers it has seen",
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

    def _repeat_calls(self, calls: list[Any], canaries: CanarySet) -> float:
        """REPEAT_CALLS more timed calls on sets whose buffers and contents the kernel has seen
        (the first sets of the timed loop): a kernel that replays saved results is fast here
        however many sets there are (the caller judges their median against the roofline), and
        each must write its canaries."""
        times = []
        for k in range(REPEAT_CALLS):
            index = (self._warmup_count(len(calls)) + k) % len(calls)
            canaries.arm(index)
            times.append(self.device.time_call(calls[index]))
            if not canaries.written():
                raise Failed(
                    Status.INCORRECT,
                    "a repeated call left its output unwritten: the kernel skips work when called "
                    "again on buffers it has seen",
                )
        return float(np.median(times))

    def _verify(self, last_set: tuple[tuple[Buffer, ...], list[Buffer]]) -> None:
        """The outputs of the last timed call must still be right: repeated calls did the work."""
        inputs = [self.device.to_host(b) for b in last_set[0]]
        outputs = [self.device.to_host(b) for b in last_set[1]]
        changed = modified_input([t.name for t in self.problem.inputs], inputs, self.last_seed[0])
        if changed:
            raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} while timed")
        refs = self.last_seed[1]
        verdict = check_outputs(
            [t.name for t in self.problem.outputs], outputs, refs, self.problem.tolerance
        )
        if verdict.error:
            raise Failed(Status.INCORRECT, f"{verdict.error} (outputs of the timed calls)")
