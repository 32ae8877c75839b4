"""One evaluation inside a worker: build, check on fresh seeds, time on rotated sets, verify.

Each step fails with a status when the kernel fails it; ``execute`` stops at the first. Its
``KernelResult`` goes to the parent, which scores it (it holds the hardware spec and decides
PASSED/SUSPICIOUS, ``parent/scoring.py``).

The steps' parts have modules of their own: the kernel's code built, loaded and called
(``kernel_code.py``) on its arguments (``arguments.py``), the correctness check and the
verification of the timed calls (``checking.py``), the rotation sets (``rotation.py``) and the
timed calls (``TimedLoop``, ``timed_loop.py``). A re-timing session of several kernels is a
``RetimeRun`` (``retime.py``), which runs these same steps for each.
"""

from __future__ import annotations

import ctypes
import subprocess
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.backends.base import KernelError, get_backend
from accelopt.backends.device import Buffer, Device, HostDevice
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.problems.records import Problem
from accelopt.problems.shipping import resolve_ref
from accelopt.profiling import stats
from accelopt.profiling.worker import contention, hostmemory, placement, rotation
from accelopt.profiling.worker.arguments import Arguments
from accelopt.profiling.worker.checking import SeedCheck, verify_kept
from accelopt.profiling.worker.control import Control
from accelopt.profiling.worker.hostmemory import Lease
from accelopt.profiling.worker.kernel_code import KernelCode
from accelopt.profiling.worker.pacing import Ticker
from accelopt.profiling.worker.protocol import (
    SEPARATE,
    Channel,
    EvaluateRequest,
    KernelResult,
    Phase,
)
from accelopt.profiling.worker.references import Arrays, prepared_seeds
from accelopt.profiling.worker.rotation import Rotation, RotationSets
from accelopt.profiling.worker.steps import Failed
from accelopt.profiling.worker.timed_loop import LoopSetup, TimedLoop


def _flush_c_stdio() -> None:
    ctypes.CDLL(None).fflush(None)


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
        self.code: KernelCode | None = None  # the kernel on that device, once prepare made it
        self.kernel = Kernel(request.kernel.source, request.backend, request.kernel.name)
        self.seeds = request.seeds
        self.threads = request.threads
        self.llc_bytes = request.llc_bytes
        self.lock_path = Path(request.lock_path)
        self.result = KernelResult()
        self.call_s: list[float] = []  # the correctness calls' wall time, seen by the worker
        self.rng = np.random.default_rng()  # nothing the kernel can know: not the problem's seeds
        self.tick = Ticker(self.phase)
        self.control_spec = request.control
        self.race_s = request.race_s
        self.drift = request.drift
        # arrays the worker keeps for what is read back (hostmemory.py), given back by close
        self.host = Lease(hostmemory.worker_memory(self.config.host_memory_bytes))

    def phase(self, name: str, detail: str = "") -> None:
        self.channel.send(Phase(phase=name, detail=detail))

    def note(self, **found: Any) -> None:
        """Record what a step found in the result."""
        for name, value in found.items():
            setattr(self.result, name, value)

    def execute(self) -> KernelResult:
        try:
            with self.recording():
                rotated = self.prepare()
                if rotated is not None:
                    self.time(rotated)
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
            self.note(status=failure.status, error=failure.error, service=failure.service)
        except KernelError as exc:  # the kernel's own code raised (or broke a run-time rule)
            self.note(status=exc.status, error=str(exc))
        except Exception as exc:  # a harness fault is reported as data, never lost
            tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            error = f"harness error: {tail or exc}"  # the service's failure, not the kernel's
            self.note(status=Status.CRASH, error=error, service=error)

    def prepare(self) -> Rotation | None:
        """Build, load and check the kernel; the rotation sets to time it on (None: check only).

        Everything that loads the machine (compiling, references, copying the rotation sets,
        checking outputs) holds the device lock shared, so it never runs beside a timing."""
        self.phase("lock")
        with devicelock.shared(self.lock_path):
            self.phase("start")
            self.device = self.backend.device()  # may import torch, start CUDA, an kernel host
            args = Arguments(self.device, self.problem, self.sizes)
            code = self.code = KernelCode(self.backend, args, self.config, self.result, self.phase)
            artifact = code.build(self.kernel)
            # Every buffer exists before the kernel is loaded: a separate kernel process
            # (the cpu backend's) is trusted only until then.
            checked = args.inputs(fenced=True), args.outputs(fenced=True)
            sets = None
            if not self.config.check_only:
                budget = self.config.rotation_budget_bytes
                sets = rotation.make_sets(args, self.llc_bytes, budget)
            code.load(artifact, self.threads)
            base = self.check(code, *checked)
            self.device.pause()  # its process runs only while the harness calls it
            if sets is None:
                return None
            self.phase("prepare")
            return rotation.fill(self.device, sets, base, self.rng)

    def check(self, code: KernelCode, inputs: list[Buffer], outputs: list[Buffer]) -> Arrays:
        """The correctness check (``checking.SeedCheck``); the last seed's inputs."""
        check = SeedCheck(code.args, self.host, self.result, self.phase)
        seeds = prepared_seeds(self.problem, self.workload, self.seeds, self.config, self.phase)
        check.run(seeds, inputs, outputs, code.call)
        self.call_s = check.call_s
        return check.last_inputs

    def close(self) -> None:
        isolation = self.device.isolation
        if isolation is not None:  # the kernel ran in its own process, never in this one
            self.note(isolation=isolation, kernel_process=SEPARATE)
        if self.code is not None:
            self.code.close()
        self.device.close()
        self.host.close()
        _flush_c_stdio()

    # -- timing ------------------------------------------------------------------------------
    @property
    def prepared_code(self) -> KernelCode:
        """The kernel's code, once ``prepare`` made it."""
        assert self.code is not None, "prepare makes it"
        return self.code

    def timed_loop(self, rotated: Rotation, control: Control | None = None) -> TimedLoop:
        """The timed calls of this kernel on the sets ``prepare`` filled."""
        self.note(rotation_sets=len(rotated.sets))
        setup = LoopSetup(
            self.config,
            self.device,
            self.host,
            self.rng,
            self.tick,
            canary_seed=self.seeds[0],
            call_s=self.call_s,
            drift=self.drift,
            race_s=self.race_s,
            threads=self.threads,
        )
        return TimedLoop(setup, rotated, self.prepared_code.loaded, control)

    def _control(self, sets: RotationSets) -> Control | None:
        """The control to time with the kernel, where the request asks for one and it builds."""
        if self.control_spec is None:
            return None
        pids = self.device.kernel_pids
        span = len(sets) * self.problem.buffer_bytes(self.sizes)
        try:
            return Control(self.control_spec, self.threads, pids, span, self.device)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            self.note(control_note=f"the control could not run: {exc}")
            return None

    def time(self, rotated: Rotation) -> None:
        loop = self.timed_loop(rotated, self._control(rotated.sets))
        self.phase("lock")
        self.device.pause()  # nothing of it runs while others time theirs
        with devicelock.exclusive(self.lock_path):
            self.device.resume()
            start = time.perf_counter()
            self.phase("call", "timing")
            self.result.kernel_ran = True
            pids = self.device.kernel_pids
            before = contention.snapshot(pids)
            with self.prepared_code.memory_cap(), placement.pinned(pids, self.threads) as where:
                self.note(placement=where)
                self.tick.reset()
                loop.start()
                self.note(batch_calls=loop.batch)
                loop.run_to_end()
                loop.confirm()
            self.result.time_s = time.perf_counter() - start
            self.record_contention(before, contention.snapshot(pids))
            self.device.pause()
        self.note(batch_calls=loop.batch)  # as it ended (halved on a busy machine)
        self.summarize(loop)
        self.phase("lock")  # the other worker may be timing: waiting is not this kernel's time
        with devicelock.shared(self.lock_path):
            self.verify_timed(loop)

    def summarize(self, loop: TimedLoop) -> None:
        timing = stats.summarize(loop.reported)
        known = loop.delay.available
        self.note(
            latency_s=timing.latency_s,
            min_s=timing.min_s,
            noise=timing.noise,
            calls=loop.count,
            ci_low_s=timing.ci_low_s,
            ci_high_s=timing.ci_high_s,
            raced=loop.raced,
            slice_medians=loop.slice_medians,
            disturbed=loop.is_disturbed,
            disturbed_batches=len(loop.disturbed) if known else None,
            floor_s=stats.point(loop.floors) if known and loop.floors else None,
            clean_batches=len(loop.samples) if known else None,
        )
        if loop.control is not None:
            self.note(control_rates=loop.control.rates, control_note=loop.control.note)

    def verify_timed(self, loop: TimedLoop) -> None:
        """After the timing (the device lock held shared): every set's guards, the calls the
        audit kept (``checking.verify_kept``), then whether the kernel was faster on the sparse
        batches than on the full ones, as measured and confirmed (``TimedLoop.confirm``:
        SUSPICIOUS)."""
        self.phase("verify")
        args = self.prepared_code.args
        for ins, outs in loop.sets:  # a few microseconds a set: every set
            args.check_guards([*ins, *outs], "in the timed calls")
        verify_kept(args, self.host, loop.audit, loop.fresh)
        if loop.skipped:
            raise Failed(Status.SUSPICIOUS, loop.skipped)

    def record_contention(
        self, before: contention.CpuSnapshot | None, after: contention.CpuSnapshot | None
    ) -> None:
        """What other processes and the hypervisor took of the machine while this kernel was
        timed (reported with the evaluation; never a reason to reject it)."""
        if before is not None and after is not None:
            seen = contention.contention(before, after)
            self.note(load_others=seen.others, load_steal=seen.steal)
