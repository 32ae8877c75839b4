"""One evaluation inside a worker: build, check on fresh seeds, time on rotated sets, verify.

Each step returns a status when the kernel fails it; ``execute`` stops at the first. The parent
turns the result into an ``Evaluation`` (it holds the hardware spec and decides PASSED/SUSPICIOUS).

A re-timing session (``RetimeRun``, ``session.py``) runs the same steps for several kernels: each is
built, loaded and checked by its own ``EvaluationRun``, then their ``TimedLoop``s are run in slices,
interleaved, under one exclusive device lock, and each is verified as an evaluation is.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
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
from accelopt.problems.shipping import resolve_ref
from accelopt.profiling import contention, references, sandbox, session
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


RotationSets = list[tuple[tuple[Buffer, ...], list[Buffer]]]  # (inputs, outputs) per set


class _Ticker:
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
    def __init__(self, request: dict[str, Any], channel: Channel) -> None:
        self.channel = channel
        self.config = EvalConfig(**request["config"])
        self.problem = resolve_ref(request["problem"])
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
        self.tick = _Ticker(self.phase)

    def phase(self, name: str, detail: str = "") -> None:
        self.channel.send({"type": "phase", "phase": name, "detail": detail})

    def execute(self) -> dict[str, Any]:
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
        return self.result["status"] is not None

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Runs a step: its failure becomes the result's status and error, never an exception."""
        try:
            yield
        except Failed as failure:
            self.result.update(status=str(failure.status), error=failure.error)
        except KernelError as exc:  # the kernel's own code raised (or broke a run-time rule)
            self.result.update(status=str(exc.status), error=str(exc))
        except Exception as exc:  # a harness fault is reported as data, never lost
            tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            self.result.update(status=str(Status.CRASH), error=f"harness error: {tail or exc}")

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
    def _rotation_buffers(self) -> RotationSets:
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

    def _fill_rotation(self, sets: RotationSets) -> None:
        inputs, _ = self.last_seed
        for ins, _ in sets:
            for buf, x in zip(ins, inputs, strict=True):
                self.device.upload(x, into=buf)

    def time(self, sets: RotationSets) -> None:
        loop = TimedLoop(self, sets)
        self.phase("lock")
        with devicelock.exclusive(self.lock_path):
            start = time.perf_counter()
            self.phase("call", "timing")
            self.result["kernel_ran"] = True
            pids = getattr(self.device, "kernel_pids", ())
            before = contention.snapshot(pids)
            with self._kernel_memory():
                self.tick.reset()
                loop.start()
                loop.run_to_end()
            self.result["time_s"] = time.perf_counter() - start
            self._record_contention(before, contention.snapshot(pids))
        self.summarize(loop)
        self.phase("lock")  # the other worker may be timing: waiting is not this kernel's time
        with devicelock.shared(self.lock_path):
            self.verify_timed(loop)

    def summarize(self, loop: TimedLoop) -> None:
        stats = summarize(loop.samples)
        self.result.update(
            latency_s=stats.latency_s, min_s=stats.min_s, noise=stats.noise, calls=loop.count,
            ci_low_s=stats.ci_low_s, ci_high_s=stats.ci_high_s,
        )  # fmt: skip

    def verify_timed(self, loop: TimedLoop) -> None:
        """After the timing (the device lock held shared): every set's guards, then the calls
        the audit kept (``_verify``)."""
        self.phase("verify")
        for ins, outs in loop.sets:  # a few microseconds a set: every set
            self._check_guards([*ins, *outs], "in the timed calls")
        self._verify(loop.audit, loop.fresh)

    def _warmup_count(self, n_sets: int) -> int:
        """Warm-up calls: the code, the threads and the branch predictors, not the data (every
        set's pages are already faulted in: inputs are copies, outputs are filled with NaN)."""
        return max(1, self.config.warmup_calls)

    def _batch_size(self, n_sets: int) -> int:
        """Calls per round trip: 1 where the device times each call itself; else enough calls
        for about BATCH_S (the worker's round trip, subtracted, is then a small part), each set at
        most once (every call gets freshly perturbed inputs)."""
        if not getattr(self.device, "batches", False) or not self.call_s:
            return 1
        typical = float(np.median(self.call_s))
        return max(1, min(n_sets, MAX_BATCH, math.ceil(BATCH_S / max(typical, 1e-7))))

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


class TimedLoop:
    """One kernel's timed calls: a short warm-up (``start``), then timed batches round the
    rotation sets, run to the end at once (``run_to_end``: until min_calls and min_time are met and
    the median is known to ci_target, or ci_time_cap_s passed) or in slices resumed later
    (``run_slice``: a re-timing session interleaves several kernels' slices).

    Before each call its set's inputs are perturbed (no call sees inputs seen before) and its
    canaries armed; after each batch the canaries must be written, and a few calls chosen at
    random are kept to be checked against the reference (``EvaluationRun.verify_timed``).
    ``samples`` holds a sample per batch (seconds per call), ``count`` the timed calls.
    """

    def __init__(self, run: EvaluationRun, sets: RotationSets) -> None:
        run.result["rotation_sets"] = len(sets)
        assert run.loaded is not None
        self.run, self.sets = run, sets
        self.calls = [run.loaded.bind([*ins, *outs]) for ins, outs in sets]
        rng = np.random.default_rng()  # nothing the kernel can know: not the problem's seeds
        self.fresh = Freshness(run.device, [ins for ins, _ in sets], run.last_seed[0], rng)
        self.audit = Audit(run.config.verify_calls, rng)
        self.canaries: CanarySet | None = None
        self.samples: list[float] = []
        self.count = 0
        self.elapsed_s = 0.0  # seconds of timed batches so far
        self.spent_s = 0.0  # ... and of the warm-up and untimed calls
        self.warm = 0
        self.batch = 1
        self._precise = _Precision(run.config.ci_target)

    def start(self) -> None:
        """Arm the canaries and warm up: with the device lock held exclusive (and the kernel's
        memory capped where it runs in this process)."""
        run, n = self.run, len(self.calls)
        began = time.perf_counter()
        self.canaries = run.device.canaries([o for _, o in self.sets], run.seeds[0])
        self.warm = run._warmup_count(n)
        for i in range(self.warm):
            self.calls[i % n]()
            run.tick()
        self.batch = run._batch_size(n)
        run.result["batch_calls"] = self.batch
        self.spent_s += time.perf_counter() - began

    def run_to_end(self) -> None:
        clock = time.perf_counter
        begin = clock()
        while not self._finished(self.elapsed_s + clock() - begin):
            self._run_batch()
        self.elapsed_s += clock() - begin
        self.spent_s += clock() - begin

    def run_slice(self, seconds: float) -> list[float]:
        """An untimed call (the kernel's code and threads were idle while others ran), then timed
        batches for ``seconds`` (one at least); this slice's samples."""
        clock = time.perf_counter
        began = clock()
        self.calls[(self.warm + self.count) % len(self.calls)]()
        first = len(self.samples)
        begin = clock()
        while True:
            self._run_batch()
            if clock() - begin >= seconds:
                break
        end = clock()
        self.elapsed_s += end - begin
        self.spent_s += end - began
        return self.samples[first:]

    def _finished(self, elapsed_s: float) -> bool:
        cfg = self.run.config
        enough = self.count >= cfg.min_calls and elapsed_s >= cfg.min_time_s
        capped = elapsed_s >= max(cfg.ci_time_cap_s, cfg.min_time_s)
        if enough and (capped or self._precise(self.samples, elapsed_s)):
            return True
        return bool(self.samples) and elapsed_s >= cfg.max_time_s

    def _run_batch(self) -> None:
        run, k, n = self.run, self.batch, len(self.calls)
        assert self.canaries is not None
        batch = [(self.warm + self.count + j) % n for j in range(k)]
        for index in batch:
            self.fresh.perturb(index)
            self.canaries.arm(index)
        self.samples.append(run.device.time_calls([self.calls[i] for i in batch]) / k)
        self.count += k
        if not self.canaries.written():
            raise Failed(
                Status.INCORRECT,
                f"a timed call (of calls {self.count - k + 1}-{self.count}) left its output "
                "unwritten: the kernel skips work when called again on buffers it has seen",
            )
        for index in self.audit.choose(self.count - k, batch):
            ins, outs = self.sets[index]
            self.audit.keep(
                [run.device.to_host(b).copy() for b in ins],
                [run.device.to_host(b).copy() for b in outs],
                self.fresh.expected(index),
            )
        run.tick()


class RetimeRun:
    """A re-timing session in the worker (``session.py``).

    Every kernel is built, loaded and checked by its own ``EvaluationRun``, on its own device
    (the cpu backend: its own executor process) and its own rotation sets (each spanning the cold
    span: a session holds a set per kernel). Then, under one exclusive device lock, their
    ``TimedLoop``s run in rounds of slices, in ``session.round_order``, until every kernel has
    min_calls and min_time_s and each ratio to the first kernel is known to ci_target (or each
    kernel has been timed ci_time_cap_s), after ``min_rounds`` rounds at least; max_time_s of any
    kernel ends it. Each kernel is then summarized and verified as an evaluation is. A kernel that
    fails a step gets its failing result and drops out; the others go on.
    """

    def __init__(self, request: dict[str, Any], channel: Channel) -> None:
        self.runs = [
            EvaluationRun(
                {**request, "source": k["source"], "kernel_name": k["kernel_name"]}, channel
            )
            for k in request["kernels"]
        ]
        self.config = self.runs[0].config
        self.lock_path = self.runs[0].lock_path
        self.min_rounds = int(request.get("min_rounds") or session.MIN_ROUNDS)
        self.slice_s = session.slice_seconds(self.config.min_time_s, self.min_rounds)
        self.tick = _Ticker(self.runs[0].phase)
        for run in self.runs:
            run.tick = self.tick  # the parent hears of the timing as one phase
        self.loops: dict[int, TimedLoop] = {}  # the kernels still in the session, by position
        self.series: list[list[float | None]] = [[] for _ in self.runs]  # round medians
        self.rounds = 0

    def execute(self) -> dict[str, Any]:
        with ExitStack() as closing:
            for run in self.runs:
                closing.callback(run.close)
            try:
                self._prepare()
                if self.loops:
                    self._time()
                self._verify()
            except Exception as exc:  # a harness fault: every kernel not yet judged shares it
                tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
                for run in self.runs:
                    if not run.failed:
                        run.result.update(
                            status=str(Status.CRASH), error=f"harness error: {tail or exc}"
                        )
        return self._result()

    def _prepare(self) -> None:
        for i, run in enumerate(self.runs):
            with run.recording():
                sets = run.prepare()
                if sets is None:
                    raise ValueError("a re-timing session times kernels: check_only is set")
                self.loops[i] = TimedLoop(run, sets)

    def _kernel_memory(self) -> AbstractContextManager[object]:
        """One address-space cap while kernels that run in this process are timed; none where
        each has a process of its own."""
        if all(getattr(self.runs[i].device, "kernel_pids", ()) for i in self.loops):
            return nullcontext()
        return sandbox.memory_cap(self.config.memory_cap_bytes)

    def _time(self) -> None:
        first = self.runs[0]
        first.phase("lock")
        with devicelock.exclusive(self.lock_path):
            first.phase("call", "timing")
            devices = [self.runs[i].device for i in self.loops]
            pids = tuple(pid for d in devices for pid in getattr(d, "kernel_pids", ()))
            before = contention.snapshot(pids)
            with self._kernel_memory():
                self.tick.reset()
                self._start_loops()
                while self.loops and not self._done():
                    self._round()
            after = contention.snapshot(pids)
        for i, loop in self.loops.items():
            self.runs[i].result["time_s"] = loop.spent_s
            self.runs[i]._record_contention(before, after)

    def _start_loops(self) -> None:
        """Warm every kernel up; then one batch size for all (the smallest any would take: a
        batch of the slowest kernel lasts about BATCH_S, well within the timing deadline): what is
        left of the round trip once the overhead is subtracted then weighs the same on each."""
        for i in list(self.loops):
            run = self.runs[i]
            run.result["kernel_ran"] = True
            with run.recording():
                self.loops[i].start()
            if run.failed:
                del self.loops[i]
        batch = min((loop.batch for loop in self.loops.values()), default=1)
        for loop in self.loops.values():
            loop.batch = loop.run.result["batch_calls"] = batch
        self._share_overhead()

    def _share_overhead(self) -> None:
        """One round trip subtracted from every kernel's batches: the least any of their kernel
        processes measured (each measures its own before its kernel is loaded, and the figures
        differ by tens of microseconds, a tiny kernel's whole batch)."""
        executors = [getattr(self.runs[i].device, "executor", None) for i in self.loops]
        overheads = [getattr(e, "overhead_s", None) for e in executors]
        known = [s for s in overheads if isinstance(s, float)]
        if len(known) != len(executors) or not known:
            return
        for executor in executors:
            executor.overhead_s = min(known)

    def _round(self) -> None:
        medians: dict[int, float] = {}
        for i in session.round_order(self.rounds, len(self.runs)):
            loop = self.loops.get(i)
            if loop is None:
                continue
            run = self.runs[i]
            with run.recording():
                medians[i] = float(np.min(loop.run_slice(self.slice_s)))  # session.py
            if run.failed:
                del self.loops[i]
                medians.pop(i, None)
        for i, series in enumerate(self.series):
            series.append(medians.get(i))
        self.rounds += 1

    def _done(self) -> bool:
        cfg, loops = self.config, list(self.loops.values())
        if max(loop.elapsed_s for loop in loops) >= cfg.max_time_s:
            return True
        if self.rounds < self.min_rounds:
            return False
        if any(loop.count < cfg.min_calls or loop.elapsed_s < cfg.min_time_s for loop in loops):
            return False
        if min(loop.elapsed_s for loop in loops) >= max(cfg.ci_time_cap_s, cfg.min_time_s):
            return True
        return all(ci <= cfg.ci_target for ci in self._intervals())

    def _intervals(self) -> list[float]:
        """What must be known to ci_target: each kernel's ratio to the first (with the first
        gone, each kernel's own median)."""
        if 0 not in self.loops:
            return [ci_half_width(loop.samples) for loop in self.loops.values()]
        first = self.series[0]
        return [ci_half_width(session.round_ratios(first, self.series[i])) for i in self.loops if i]

    def _verify(self) -> None:
        for i, loop in self.loops.items():
            run = self.runs[i]
            with run.recording():
                run.summarize(loop)
                run.phase("lock")
                with devicelock.shared(self.lock_path):
                    run.verify_timed(loop)

    def _result(self) -> dict[str, Any]:
        """Each kernel's result, the round medians, and what the pool decides on: whether a
        kernel that failed ran in this process (the worker is then replaced)."""
        results = [run.result for run in self.runs]
        ran = [r for r in results if r.get("kernel_ran")]
        separate = all(r.get("kernel_process") == "separate" for r in ran)
        return {
            "results": results,
            "rounds": self.rounds,
            "round_s": self.series,
            "worker_pid": os.getpid(),
            "kernel_ran": bool(ran),
            "status": next((r["status"] for r in ran if r["status"] is not None), None),
            "kernel_process": "separate" if separate else "",
        }
