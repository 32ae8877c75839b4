"""The ``triton`` backend: a kernel is a Python module of ``@triton.jit`` kernels and a launcher
``kernel(*inputs, *outputs)`` on torch tensors (destination-passing, the C contract's order).

Building is importing the module and making its first launch (Triton compiles then), both in the
kernel's own contained process (``host.py``: Landlock, an unprivileged user, a system call filter
on every thread, no environment, no network), never in the worker, which keeps the buffers, the
checks and the clock (``hosted.py``). Every call runs under the torch operator guard
(``guard.py``) there. On a GPU, buffers are CUDA tensors shared by IPC handle and batches of calls
are timed by the worker's clock; in Triton's CPU interpreter the buffers are shared memory, and
nothing is timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import accelopt.backends.registry as registry
from accelopt.backends.base import BuildResult, CheckedBuild, LoadedKernel
from accelopt.backends.device import Device
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.triton import checks
from accelopt.backends.triton.environment import interpreting, require_packages
from accelopt.errors import UserError
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: keeps pydantic out of worker processes
    from accelopt.hardware.spec import HardwareSpec

SOURCE_NAME = "kernel.py"
GUARD_RULE = (
    "at run time, any torch operator the launcher runs other than allocation and views (seen by "
    "a torch dispatch guard, whatever the spelling)"
)


class TritonBackend(CheckedBuild):
    name = "triton"
    compiles_on_first_call = True

    def preflight(self, timing: bool = True) -> None:
        require_packages()
        if interpreting():
            if timing:
                raise UserError(
                    "Triton's CPU interpreter (TRITON_INTERPRET=1) checks kernels but cannot "
                    "time them: add --check-only, or run on a machine with an NVIDIA GPU"
                )
            return
        from accelopt.hardware.gpu import current_gpu

        if current_gpu() is None:
            raise UserError(
                "the triton backend needs an NVIDIA GPU, and nvidia-smi lists none here; on a "
                "CPU-only machine set TRITON_INTERPRET=1 and add --check-only to check kernels"
            )

    def device(self) -> Device:
        """Worker side: the kernel's own process, started and set up (it imports torch and
        Triton; on a GPU it starts CUDA and hands its buffers over by IPC handle)."""
        from accelopt.backends.triton.hosted import HostedDevice

        return HostedDevice(gpu=not interpreting())

    def runs_on_gpu(self) -> bool:
        return not interpreting()  # the interpreter runs kernels on the CPU

    def lock_name(self) -> str:
        if interpreting():
            return "cpu"  # the interpreter runs on the CPU, beside C kernels' timings
        from accelopt.hardware.gpu import current_gpu

        gpu = current_gpu()
        return f"gpu-{gpu.uuid}" if gpu is not None else "gpu"

    def export_recipe(self) -> dict[str, Any]:
        return {}

    def check(self, source: str) -> str | None:
        return checks.check_source(source)

    def build_checked(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        path = Path.cwd() / SOURCE_NAME
        path.write_text(kernel.source)
        return BuildResult(None, artifact=path)

    def load(
        self, artifact: Path, problem: Problem, device: object = None, memory_cap_bytes: int = 0
    ) -> LoadedKernel:
        """Contain the kernel's process, then import the module there (its top level runs
        there, never in the worker)."""
        from accelopt.backends.triton.hosted import HostedDevice

        if not isinstance(device, HostedDevice):
            raise TypeError("a triton kernel loads into the HostedDevice of TritonBackend.device()")
        return device.load(artifact.read_text(), memory_cap_bytes)

    def set_threads(self, threads: int) -> None:
        pass  # a GPU kernel's parallelism is its grid

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        contract = "\n".join(
            [
                "One Python module with @triton.jit kernels and a launcher",
                "  def kernel(in0, ..., out0, ...) -> None",
                "taking torch tensors: the problem's inputs then its outputs, in the problem's "
                "order. The launcher reads sizes from the tensors' shapes (nothing is a "
                "compile-time #define), computes a grid and launches the kernels "
                "(k[grid](...)); all the arithmetic happens in @triton.jit kernels.",
                "Every tensor is float32, contiguous and row-major, on the GPU "
                "(torch.device('cuda')); outputs are preallocated.",
                "Destination-passing: write every element of every output (outputs are NaN "
                "before each call); never modify an input; keep no state across calls (the "
                "kernel is called many times, on several buffer sets).",
                'fp32 semantics: every tl.dot must pass input_precision="ieee" (or '
                '"tf32x3"); TF32 misses the problems\' tolerance. Accumulate in float32.',
                "Build = import + first launch (Triton compiles then, autotuning included), in "
                "an isolated worker. Scratch buffers: torch.empty(..., device=x.device).",
                "Timed as Triton's do_bench times: CUDA events around each call, the L2 cache "
                "cleared before it, inputs rotated across sets; the median is reported.",
            ]
        )
        return BackendFacts(
            backend=self.name,
            language=registry.record(self.name).language,
            toolchain=_toolchain(),
            contract=contract,
            ceilings=describe_ceilings(
                hardware, matmul="fp32 matmul (CUDA cores, no TF32)", cores="SMs"
            ),
            forbidden=(*checks.iter_rules(), GUARD_RULE),
        )

    def remarks(self, source: str, problem: Problem, sizes: Sizes) -> list[str]:
        return []  # Triton compiles in the worker, at the first launch


def _toolchain() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"Triton {version('triton')} on torch {version('torch')}"
    except PackageNotFoundError:
        return "Triton (not installed here)"
