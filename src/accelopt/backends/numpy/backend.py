"""The ``numpy`` kernel kind: a problem's NumPy reference in float32, timed like any kernel.

It is the comparison a user would otherwise reach for: the same operator through NumPy (and its
BLAS). Its source is the problem's reference, not user code, so there is nothing to check or
compile. A call is ``reference(*inputs)`` (allocating its result, as NumPy does) followed by a copy
of the result into the output buffers: the kernel contract is destination-passing, so NumPy pays
for putting its result where the caller asked, as every kernel does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import accelopt.backends.registry as registry
from accelopt import settings
from accelopt.backends.base import BuildResult
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.reference import HostReference
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: keeps pydantic out of worker processes
    from accelopt.hardware.spec import HardwareSpec


def reference_kernel(problem: Problem) -> Kernel:
    """The ``numpy`` kernel of a problem: its reference's source, labelled ``numpy``."""
    return Kernel(inspect.getsource(problem.reference), backend="numpy", name="numpy")


def blas_description(threads: int) -> str:
    """How NumPy's BLAS is set up for the numpy column, in one line."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        library = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # show_config's layout is not a stable API
        library = "unknown BLAS"
    coretype = settings.openblas_coretype()
    core = (
        f", OPENBLAS_CORETYPE={coretype} (caps OpenBLAS at that core's kernels)" if coretype else ""
    )
    return f"NumPy {np.__version__} with {library}, {threads} threads{core}"


class ReferenceKernel:
    def __init__(self, reference: Callable[..., tuple[np.ndarray, ...]], n_inputs: int) -> None:
        self._reference = reference
        self._n_inputs = n_inputs

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        results = self._reference(*arrays[: self._n_inputs])
        for out, result in zip(arrays[self._n_inputs :], results, strict=True):
            np.copyto(out, result)

    def bind(self, arrays: Sequence[np.ndarray]) -> Callable[[], None]:
        return partial(self, list(arrays))

    def close(self) -> None:
        pass


class NumpyBackend(HostReference):
    name = "numpy"

    def comparison_kernel(self, problem: Problem) -> Kernel | None:
        """The problem's NumPy reference, a comparison point (``base.reference_kernels``)."""
        return reference_kernel(problem)

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        return BuildResult(None, artifact=problem.directory / "problem.py", cached=True)

    def load(
        self, artifact: Path, problem: Problem, device: object = None, memory_cap_bytes: int = 0
    ) -> ReferenceKernel:
        return ReferenceKernel(problem.reference, len(problem.inputs))

    def set_threads(self, threads: int) -> None:
        pass  # OpenBLAS reads OPENBLAS_NUM_THREADS when the worker starts

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        """Not a kernel language: the problem's NumPy reference, timed as a comparison point."""
        contract = "\n".join(
            [
                "Not user code: the problem's own NumPy reference, timed as a comparison point "
                "and never edited or optimized.",
                "A call is reference(*inputs) on float32 arrays (allocating its result, as NumPy "
                "does), then a copy of the result into the output buffers: destination-passing, "
                "like every kernel.",
                f"Runs on {blas_description(hardware.cores)}.",
            ]
        )
        return BackendFacts(
            backend=self.name,
            language=registry.record(self.name).language,
            toolchain=f"Python (NumPy {np.__version__})",
            contract=contract,
            ceilings=describe_ceilings(hardware),
        )
