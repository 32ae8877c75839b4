"""What every backend provides to the profiling service."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import accelopt.backends.registry as registry
from accelopt.backends.device import Buffer, Device
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: a worker process loads no pydantic model for these
    from accelopt.backends.facts import BackendFacts
    from accelopt.hardware.spec import HardwareSpec


# Signals that kill a process touching memory it may not: in a kernel call, most likely an access
# outside its buffers (the correctness calls' buffers are fenced by inaccessible pages).
MEMORY_FAULTS = {
    signal.SIGSEGV: "a memory access outside its buffers?",
    signal.SIGBUS: "a memory access outside its buffers, or a misaligned one?",
}


class KernelLoadError(Exception):
    """A built kernel cannot be loaded as the contract says (e.g. no `kernel` function)."""


class KernelError(Exception):
    """Kernel code failed while it ran: a Python exception raised by a launcher, a device fault,
    or (``REJECTED``) work done outside the kernel that the backend's run-time guard saw."""

    def __init__(self, message: str, status: Status = Status.CRASH, fault: bool = False) -> None:
        super().__init__(message)
        self.status = status
        # The device faulted (a bad address...): a crash even at the first launch.
        self.fault = fault


@dataclass(frozen=True)
class BuildResult:
    """The outcome of building a kernel: an artifact to load, or a status with the reason."""

    status: Status | None  # None when the build succeeded
    error: str = ""
    artifact: Path | None = None
    seconds: float = 0.0
    cached: bool = False
    service: str = ""  # the build failed for want of disk or permission, not for the kernel

    @property
    def ok(self) -> bool:
        return self.status is None and self.artifact is not None


class LoadedKernel(Protocol):
    """A kernel ready to call on buffers of its backend's device (inputs, then outputs)."""

    def __call__(self, arrays: Sequence[Buffer]) -> None:
        """One call, finished when this returns (errors raise ``KernelError``)."""
        ...

    def bind(self, arrays: Sequence[Buffer]) -> Callable[[], None]:
        """A call with its arguments resolved ahead, for timing loops (on a GPU it may return
        before the device is done: the device's ``time_call`` waits)."""
        ...

    def close(self) -> None: ...


class CheckedBuild:
    """The build of a backend whose sources have static checks: a source ``check`` rejects is
    REJECTED with its reason before any work; the rest is built by ``build_checked``."""

    def check(self, source: str) -> str | None:
        raise NotImplementedError

    def build_checked(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        raise NotImplementedError

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        reason = self.check(kernel.source)
        if reason:
            return BuildResult(Status.REJECTED, reason)
        return self.build_checked(kernel, problem, sizes, timeout_s)


class Backend(Protocol):
    name: str
    # True when a kernel is compiled at its first launch (JIT): the harness then makes that first
    # launch in the build phase, under the compile deadline, on buffers of the workload's sizes.
    compiles_on_first_call: bool

    def preflight(self, timing: bool = True) -> None:
        """Raise a UserError when this backend cannot work on this machine (e.g. no compiler),
        or cannot time kernels here and ``timing`` is asked for."""
        ...

    def device(self) -> Device:
        """Where buffers live and how calls are timed (inside a worker process)."""
        ...

    def lock_name(self) -> str:
        """The name of the device lock: one per physical device (``cpu``, ``gpu-<uuid>``)."""
        ...

    def runs_on_gpu(self) -> bool:
        """Whether kernels run on a GPU here (a scheduler gives each evaluator one of its own)."""
        ...

    def check(self, source: str) -> str | None:
        """Static checks before building: the reason to reject, or None."""
        ...

    def export_recipe(self) -> dict[str, Any]:
        """How an exported kernel is built again where it is used (``accelopt export``): the
        compiler's name, its flags without the target flag, and the libraries; {} where the
        kernel needs no build (a Triton module compiles at its first launch)."""
        ...

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        """Build the kernel for these sizes (runs inside a worker process)."""
        ...

    def load(
        self, artifact: Path, problem: Problem, device: Device, memory_cap_bytes: int
    ) -> LoadedKernel:
        """Load a built kernel as a callable on inputs then outputs of ``device``'s buffers
        (inside a worker process), with ``memory_cap_bytes`` of memory beyond its buffers."""
        ...

    def set_threads(self, threads: int) -> None:
        """Use this many threads for the next calls (called before ``load``)."""
        ...

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        """The kernel contract and the ceilings of ``hardware``, for the agents' prompts."""
        ...

    def remarks(self, source: str, problem: Problem, sizes: Sizes) -> list[str]:
        """What the compiler says about the kernel (e.g. loops it did or did not vectorize),
        a few lines for the planner; [] when there is nothing to say or the kernel does not
        build (runs in the calling process, never executes the kernel)."""
        ...


def reference_kernels(problem: Problem, backend: str) -> list[Kernel]:
    """The reference kernels a ``backend`` kernel of ``problem`` is compared with: NumPy and the
    PyTorch kinds the problem has (torch installed), for a ``compared`` backend (cpu); none for
    another (they would be scored against another device's roofline)."""
    if not registry.record(backend).compared:
        return []
    makers = [cast(_Comparison, get_backend(kind)) for kind in registry.reference_kinds()]
    found = [maker.comparison_kernel(problem) for maker in makers]
    return [kernel for kernel in found if kernel is not None]


class _Comparison(Protocol):
    """A backend of a reference kind: it makes the problem's comparison kernel."""

    def comparison_kernel(self, problem: Problem) -> Kernel | None: ...


def backend_class(name: str) -> Callable[[], Backend]:
    """The class of the backend called ``name`` (``registry.py``), its module imported now; a
    UserError for a name the registry does not hold."""
    return cast(Callable[[], Backend], registry.load_class(name))


def get_backend(name: str) -> Backend:
    """A new instance of the backend called ``name`` (a UserError for an unknown one)."""
    return backend_class(name)()
