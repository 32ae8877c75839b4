"""The ``torch``, ``inductor`` and ``max-autotune`` kernel kinds: a problem's PyTorch form, timed
like any kernel.

They are what an ML engineer would pick instead of a custom kernel: the problem written in
PyTorch as engineers write it (``suite/<name>/torch_form.py``: ``forward(*inputs)`` returning
its outputs; an imported KernelBench problem's own ``Model``, ``problems/kernelbench/torch_form``),
run eagerly (``torch``) or compiled by ``torch.compile`` (``inductor``, Inductor's default mode;
``max-autotune``, its mode that also tries its GEMM templates; the C++ code built with the
machine's compiler). Like ``numpy`` it is not user code: nothing to check. A call is
``forward(*inputs)`` on torch views of the input buffers (allocating its results: functional, as
such code is written) then a copy of the results into the output buffers, as every
destination-passing kernel does. A compiled kind compiles at its first call, made in the build
phase under the compile deadline: its compile time is the evaluation's ``compile_s``, never
timed.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import accelopt.backends.registry as registry
from accelopt.backends.base import BuildResult, KernelLoadError
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.reference import HostReference
from accelopt.backends.status import Status
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: keeps pydantic out of worker processes
    from accelopt.hardware.spec import HardwareSpec

FORM_NAME = "torch_form.py"
KERNELBENCH_MODEL = "model.py"
COMPILED = ("inductor", "max-autotune")  # the kinds torch.compile makes
OUTPUTS = "functional (forward allocates its results; copied into the output buffers)"


def form_path(problem: Problem) -> Path | None:
    """The problem's PyTorch form, where it has one: its ``torch_form.py``, or an imported
    KernelBench problem's own ``Model`` (``model.py``)."""
    if problem.directory is None:
        return None
    path = problem.directory / FORM_NAME
    if path.is_file():
        return path
    model = problem.directory / KERNELBENCH_MODEL
    return model if model.is_file() and (problem.directory / "import.json").is_file() else None


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def form_kernel(problem: Problem, kind: str) -> Kernel | None:
    """The ``torch``, ``inductor`` or ``max-autotune`` kernel of a problem: its PyTorch form,
    labelled ``kind``; None where it has none, torch is not installed, or (a compiled kind) the
    form says it is not compiled (``not_compiled``)."""
    path = form_path(problem)
    if path is None or not torch_available():
        return None
    source = path.read_text()
    if kind in COMPILED and not_compiled(source):
        return None
    return Kernel(source, backend=kind, name=kind)


def not_compiled(source: str) -> str:
    """Why a form is not given to torch.compile (its ``NOT_COMPILED = "..."`` line), or ""."""
    found = re.search(r'^NOT_COMPILED = "([^"]*)"', source, re.MULTILINE)
    return found[1] if found else ""


class FormKernel:
    """``forward`` on torch views of the inputs, its results copied into the outputs."""

    def __init__(self, forward: Callable[..., Any], n_inputs: int) -> None:
        import torch

        self._torch = torch
        self._forward = forward
        self._n_inputs = n_inputs

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        torch = self._torch
        with torch.inference_mode():
            inputs = [torch.from_numpy(a) for a in arrays[: self._n_inputs]]
            results = self._forward(*inputs)
            for out, result in zip(arrays[self._n_inputs :], results, strict=True):
                torch.from_numpy(out).copy_(result)

    def bind(self, arrays: Sequence[np.ndarray]) -> Callable[[], None]:
        return partial(self, list(arrays))

    def close(self) -> None:
        pass


def _forward(artifact: Path) -> Callable[..., Any]:
    spec = importlib.util.spec_from_file_location(
        f"accelopt_torch_form_{artifact.parent.name}", artifact
    )
    if spec is None or spec.loader is None:
        raise KernelLoadError(f"cannot import {artifact}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    forward = getattr(module, "forward", None)
    if not callable(forward):
        raise KernelLoadError(f"{artifact} defines no function named `forward`")
    return forward


class TorchBackend(HostReference):
    """``torch``: the PyTorch form run eagerly."""

    name = "torch"
    mode = "eager"

    def comparison_kernel(self, problem: Problem) -> Kernel | None:
        """The problem's PyTorch form in this kind, where it has one (``form_kernel``)."""
        return form_kernel(problem, self.name)

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        path = form_path(problem)
        if path is None:
            return BuildResult(Status.COMPILE_ERROR, f"{problem.name} has no PyTorch form")
        # imported here, under the build's deadline: on a busy machine importing torch can take
        # longer than the load phase's few seconds (not counted as compiling)
        import torch  # noqa: F401

        return BuildResult(None, artifact=path, cached=True)

    def load(
        self, artifact: Path, problem: Problem, device: object = None, memory_cap_bytes: int = 0
    ) -> FormKernel:
        if artifact.name == KERNELBENCH_MODEL:
            from accelopt.problems.kernelbench.torch_form import ModelForm

            return FormKernel(ModelForm(artifact.parent, self.compiled), len(problem.inputs))
        return FormKernel(self.compiled(_forward(artifact)), len(problem.inputs))

    def compiled(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        return forward

    def set_threads(self, threads: int) -> None:
        import torch

        torch.set_num_threads(max(1, threads))

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        """Not a kernel language: the problem's PyTorch form, timed as a comparison point."""
        contract = "\n".join(
            [
                "Not user code: the problem's PyTorch form, timed as a comparison point and never "
                f"edited or optimized ({self.mode}).",
                f"Outputs: {OUTPUTS}.",
            ]
        )
        return BackendFacts(
            backend=self.name,
            language=registry.record(self.name).language,
            toolchain=_toolchain(self.mode),
            contract=contract,
            ceilings=describe_ceilings(hardware),
        )


class InductorBackend(TorchBackend):
    """``inductor``: the PyTorch form compiled by ``torch.compile`` (Inductor, default mode) at
    its first call, in the build phase."""

    name = "inductor"
    compiles_on_first_call = True
    mode = "torch.compile, Inductor's default mode"

    def compiled(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        return torch.compile(forward, dynamic=False)


class MaxAutotuneBackend(InductorBackend):
    """``max-autotune``: the PyTorch form compiled by ``torch.compile(mode="max-autotune")``,
    which on a CPU also benchmarks Inductor's C++ GEMM templates against the BLAS at compile
    time (longer to compile; never timed)."""

    name = "max-autotune"
    mode = "torch.compile, mode max-autotune"

    def compiled(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        return torch.compile(forward, mode="max-autotune", dynamic=False)


def _toolchain(mode: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"torch {version('torch')} ({mode})"
    except PackageNotFoundError:
        return f"torch (not installed here; {mode})"
