"""The ``triton`` backend: a kernel is a Python module of ``@triton.jit`` kernels and a launcher
``kernel(*inputs, *outputs)`` on torch tensors (destination-passing, the C contract's order).

Building is importing the module and making its first launch (Triton compiles then), both in the
isolated worker. Every call runs under the torch operator guard (``guard.py``). On a GPU, buffers
are CUDA tensors and calls are timed with CUDA events; in Triton's CPU interpreter the buffers are
CPU tensors, and nothing is timed (both: ``torch_device.py``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelopt import settings
from accelopt.backends.base import BuildResult, CheckedBuild, KernelError, KernelLoadError
from accelopt.backends.device import Device
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.backends.triton import checks
from accelopt.backends.triton.environment import interpreting, require_packages
from accelopt.errors import UserError
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: keeps pydantic out of worker processes
    from accelopt.hardware.spec import HardwareSpec

SOURCE_NAME = "kernel.py"
ERROR_CHARS = 2000  # of a Python or Triton error message kept in the evaluation
_modules = count()
GUARD_RULE = (
    "at run time, any torch operator the launcher runs other than allocation and views (seen by "
    "a torch dispatch guard, whatever the spelling)"
)


def _kernel_error(exc: BaseException, source_file: str) -> str:
    """The exception in one message: its type and text, and the kernel's own lines where the
    traceback passes through them (Triton's compile errors carry the source line already)."""
    frames = [
        f"{SOURCE_NAME} line {f.lineno}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename == source_file
    ]
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS] + " [...]"
    return text + (f" (at {frames[-1]})" if frames else "")


class TritonKernel:
    """A loaded launcher, called on the torch tensors of a ``TorchDevice``."""

    def __init__(self, launcher: Callable[..., Any], source_file: str, on_gpu: bool) -> None:
        import torch

        from accelopt.backends.triton import guard  # imports torch: worker side only

        self._torch = torch
        self._guard = guard
        self._launcher = launcher
        self._source_file = source_file
        self._on_gpu = on_gpu

    def _run(self, tensors: Sequence[Any]) -> None:
        guard = self._guard.TorchOpGuard()
        try:
            with guard:
                self._launcher(*tensors)
        except Exception as exc:
            if not guard.refused:
                raise KernelError(_kernel_error(exc, self._source_file)) from None
        if guard.refused:  # also when the launcher caught the guard's exception and went on
            raise KernelError(self._guard.refused_message(guard.refused), Status.REJECTED)

    def __call__(self, arrays: Sequence[Any]) -> None:
        self._run(arrays)
        if self._on_gpu:
            try:
                self._torch.cuda.synchronize()  # a device fault surfaces here
            except Exception as exc:
                raise KernelError(f"the kernel faulted on the GPU: {exc}", fault=True) from None

    def bind(self, arrays: Sequence[Any]) -> Callable[[], None]:
        tensors = list(arrays)
        return lambda: self._run(tensors)

    def close(self) -> None:
        sys.modules.pop(getattr(self._launcher, "__module__", ""), None)


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
        """Worker side: imports torch and triton (before any memory cap applies), and starts
        CUDA when kernels run on a GPU."""
        _configure_triton()

        from accelopt.backends.triton.torch_device import TorchDevice

        return TorchDevice("cpu" if interpreting() else "cuda")

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
    ) -> TritonKernel:
        """Import the module (its top level runs here) and find its launcher."""
        name = f"accelopt_triton_kernel_{os.getpid()}_{next(_modules)}"
        spec = importlib.util.spec_from_file_location(name, artifact)
        if spec is None or spec.loader is None:
            raise KernelLoadError(f"cannot import {SOURCE_NAME}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # Triton finds a kernel's globals through its module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise KernelLoadError(_kernel_error(exc, str(artifact))) from None
        launcher = getattr(module, "kernel", None)
        if not callable(launcher):
            sys.modules.pop(name, None)
            raise KernelLoadError(
                "the module defines no function named `kernel` (the launcher "
                "kernel(*inputs, *outputs))"
            )
        return TritonKernel(launcher, str(artifact), on_gpu=not interpreting())

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
            language="python",
            toolchain=_toolchain(),
            contract=contract,
            ceilings=describe_ceilings(
                hardware, matmul="fp32 matmul (CUDA cores, no TF32)", cores="SMs"
            ),
            forbidden=(*checks.iter_rules(), GUARD_RULE),
        )

    def remarks(self, source: str, problem: Problem, sizes: Sizes) -> list[str]:
        return []  # Triton compiles in the worker, at the first launch


def _configure_triton() -> None:
    """Worker side: Triton's knobs for this process, set in Triton (``triton.knobs``), not in the
    environment: its compile cache (``settings.triton_cache_dir()``), and fp32 as the precision of
    a ``tl.dot`` that names none (the static checks refuse one anyway; this keeps fp32 if one slips
    through). A knob's setter also writes its variable into ``os.environ`` unless
    ``knobs.propagate_env`` is off: it is, while they are set."""
    try:
        from triton import knobs
    except ImportError:  # Triton before 3.4: no knobs, and only the environment sets these
        raise UserError("the triton backend needs Triton 3.4 or later (triton.knobs)") from None

    propagate = knobs.propagate_env
    knobs.propagate_env = False
    try:
        knobs.cache.dir = settings.triton_cache_dir()
        knobs.language.fp32_default = "ieee"
    finally:
        knobs.propagate_env = propagate


def _toolchain() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"Triton {version('triton')} on torch {version('torch')}"
    except PackageNotFoundError:
        return "Triton (not installed here)"
