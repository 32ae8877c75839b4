"""The kernel's code in the worker: built by its backend, loaded onto the evaluation's device and
called on its arguments, under the address-space cap wherever it runs in this process.

What fails here is the kernel's failure: a build or a load that fails (a constructor that raised,
a library that does not open) is a COMPILE_ERROR; a JIT backend compiles at its first launch,
made at load time on zeros under the compile deadline, so what fails there is the build's fault
too; a checked call's error names the call, and a call that wrote outside its arguments fails
their guard check (``arguments.py``).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from accelopt.backends.base import Backend, KernelError, KernelLoadError, LoadedKernel
from accelopt.backends.device import Buffer
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.worker import sandbox
from accelopt.profiling.worker.arguments import Arguments
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.profiling.worker.steps import Failed, Report


class KernelCode:
    """One kernel's code in this worker, for one evaluation (``close`` unloads it). What it finds
    goes into ``result`` as it goes: the build's seconds and whether it was cached, and that
    kernel code ran (``kernel_ran``: a failure after that may have hurt the worker)."""

    def __init__(
        self,
        backend: Backend,
        args: Arguments,
        config: EvalConfig,
        result: KernelResult,
        report: Report,
    ) -> None:
        self.backend, self.args, self.config = backend, args, config
        self.result, self.report = result, report
        self._loaded: LoadedKernel | None = None

    @property
    def loaded(self) -> LoadedKernel:
        """The kernel, once ``load`` loaded it."""
        assert self._loaded is not None, "load first"
        return self._loaded

    def memory_cap(self) -> AbstractContextManager[object]:
        """The address-space cap while kernel code runs in this process; none where the kernel
        has a process of its own (capped there, for its whole life: kernel_host.c)."""
        if self.args.device.kernel_pids:
            return nullcontext()
        return sandbox.memory_cap(self.config.memory_cap_bytes)

    def build(self, kernel: Kernel) -> Path:
        self.report("compile")
        problem, sizes = self.args.problem, self.args.sizes
        built = self.backend.build(kernel, problem, sizes, self.config.compile_timeout_s)
        self.result.compile_s, self.result.compile_cached = built.seconds, built.cached
        if not built.ok:
            raise Failed(built.status or Status.COMPILE_ERROR, built.error, built.service)
        assert built.artifact is not None
        return built.artifact

    def load(self, artifact: Path, threads: int) -> None:
        self.report("load")
        self.backend.set_threads(threads)
        # made before the load, as every buffer is: a kernel's own process is trusted until then
        jit = self.backend.compiles_on_first_call
        first = self.args.inputs(0.0) + self.args.outputs() if jit else []
        try:
            with self.memory_cap():  # constructors run here
                self._loaded = self.backend.load(
                    artifact, self.args.problem, self.args.device, self.config.memory_cap_bytes
                )
        except (KernelLoadError, OSError) as exc:
            raise Failed(Status.COMPILE_ERROR, str(exc)) from None
        if jit:
            self._first_call(first)

    def _first_call(self, arrays: list[Buffer]) -> None:
        """JIT backends compile at the first launch: made here, on zeros of the workload's
        sizes, under the compile deadline; what fails is the build's fault."""
        self.report("compile", "first launch")
        self.result.kernel_ran = True
        start = time.perf_counter()
        try:
            with self.memory_cap():
                self.loaded(arrays)
        except KernelError as exc:  # Triton's or the launcher's error: the build failed
            build_error = exc.status is Status.CRASH and not exc.fault
            raise Failed(Status.COMPILE_ERROR if build_error else exc.status, str(exc)) from None
        self.result.compile_s = (self.result.compile_s or 0.0) + time.perf_counter() - start

    def call(self, arrays: list[Buffer], detail: str) -> None:
        """One checked call (``detail`` says which), its arguments' guard regions checked after."""
        self.report("call", detail)
        self.result.kernel_ran = True
        try:
            with self.memory_cap():
                self.loaded(arrays)
        except KernelError as exc:
            message = f"{exc} during the kernel call ({detail})"
            raise KernelError(message, exc.status, exc.fault) from None
        self.args.check_guards(arrays, detail)

    def close(self) -> None:
        if self._loaded is not None:
            self._loaded.close()
