"""What every backend provides to the profiling service."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: a worker process loads no pydantic model for these
    from accelopt.backends.facts import BackendFacts
    from accelopt.hardware.spec import HardwareSpec


# Every buffer the harness hands a kernel starts on a 64-byte boundary (a cache line, one
# AVX-512 vector): part of the kernel contract, so aligned vector loads are legal.
BUFFER_ALIGNMENT = 64


class KernelLoadError(Exception):
    """A built kernel cannot be loaded as the contract says (e.g. no `kernel` function)."""


@dataclass(frozen=True)
class BuildResult:
    """The outcome of building a kernel: an artifact to load, or a status with the reason."""

    status: Status | None  # None when the build succeeded
    error: str = ""
    artifact: Path | None = None
    seconds: float = 0.0
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status is None and self.artifact is not None


class LoadedKernel(Protocol):
    def __call__(self, arrays: Sequence[np.ndarray]) -> None: ...

    def bind(self, arrays: Sequence[np.ndarray]) -> Callable[[], None]: ...

    def close(self) -> None: ...


class Backend(Protocol):
    name: str

    def preflight(self) -> None:
        """Raise a UserError when this backend cannot work on this machine (e.g. no compiler)."""
        ...

    def check(self, source: str) -> str | None:
        """Static checks before building: the reason to reject, or None."""
        ...

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        """Build the kernel for these sizes (runs inside a worker process)."""
        ...

    def load(self, artifact: Path, problem: Problem) -> LoadedKernel:
        """Load a built kernel as a callable on inputs then outputs (inside a worker process)."""
        ...

    def set_threads(self, threads: int) -> None:
        """Use this many threads for the next calls."""
        ...

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        """The kernel contract and the ceilings of ``hardware``, for the agents' prompts."""
        ...

    def remarks(self, source: str, problem: Problem, sizes: Sizes) -> list[str]:
        """What the compiler says about the kernel (e.g. loops it did or did not vectorize),
        a few lines for the planner; [] when there is nothing to say or the kernel does not
        build (runs in the calling process, never executes the kernel)."""
        ...


def get_backend(name: str) -> Backend:
    if name == "cpu":
        from accelopt.backends.cpu.backend import CpuBackend

        return CpuBackend()
    if name == "numpy":
        from accelopt.backends.numpy.backend import NumpyBackend

        return NumpyBackend()
    raise UserError(f"unknown backend {name!r}; the available backends are: cpu, numpy")
