"""The ``cpu`` backend: static checks, compilation, and calling the shared object via ctypes."""

from __future__ import annotations

import _ctypes
import ctypes
from collections.abc import Callable, Sequence
from functools import cache, partial
from pathlib import Path

import numpy as np

from accelopt import settings
from accelopt.backends.base import BuildResult, KernelLoadError
from accelopt.backends.cpu.checks import check_source
from accelopt.backends.cpu.compiler import compile_kernel, compiler_for, prototype
from accelopt.backends.cpu.symbols import disallowed_symbols
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.problems.records import Problem, Sizes


@cache
def _libgomp() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libgomp.so.1")
    except OSError:
        return None


class CLibraryKernel:
    """A loaded kernel: calls ``kernel(in0, ..., out0, ...)`` on contiguous float32 arrays."""

    def __init__(self, artifact: Path, n_args: int) -> None:
        self._lib = ctypes.CDLL(str(artifact), mode=ctypes.RTLD_LOCAL)
        try:
            self._fn = self._lib.kernel
        except AttributeError:
            self.close()
            raise KernelLoadError("the kernel defines no function named `kernel`") from None
        self._fn.argtypes = [ctypes.c_void_p] * n_args
        self._fn.restype = None

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        self._fn(*(a.ctypes.data for a in arrays))

    def bind(self, arrays: Sequence[np.ndarray]) -> Callable[[], None]:
        """A call with the pointers resolved ahead, for timing loops."""
        return partial(self._fn, *(a.ctypes.data for a in arrays))

    def close(self) -> None:
        handle = getattr(self._lib, "_handle", None)
        if handle:
            _ctypes.dlclose(handle)
            self._lib._handle = 0


class CpuBackend:
    name = "cpu"

    def preflight(self) -> None:
        compiler_for(settings.c_compiler())

    def check(self, source: str) -> str | None:
        return check_source(source)

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        reason = self.check(kernel.source)
        if reason:
            return BuildResult(Status.REJECTED, reason)
        compiler = compiler_for(settings.c_compiler())
        built = compile_kernel(
            kernel.source,
            {p: int(sizes[p]) for p in problem.params},
            prototype(len(problem.inputs), len(problem.outputs)),
            work_dir=Path.cwd(),
            cache_dir=settings.cache_dir() / "kernels",
            timeout_s=timeout_s,
            cc=compiler,
        )
        banned = disallowed_symbols(built.artifact, compiler) if built.artifact else []
        if banned:
            return BuildResult(
                Status.REJECTED,
                f"the kernel calls {', '.join(banned[:5])}, which a kernel may not use "
                "(allowed: libm, OpenMP, memory and string functions, printf/puts/putchar)",
                seconds=built.seconds,
            )
        return built

    def load(self, artifact: Path, problem: Problem) -> CLibraryKernel:
        return CLibraryKernel(artifact, len(problem.inputs) + len(problem.outputs))

    def set_threads(self, threads: int) -> None:
        gomp = _libgomp()
        if gomp is not None:
            gomp.omp_set_num_threads(ctypes.c_int(threads))
