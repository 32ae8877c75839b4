"""A toy third backend, "numpy as a language": a kernel file is a Python module whose
``kernel(*inputs, *outputs)`` writes its outputs with NumPy, run on the host device.

It is here to show what adding a backend takes: this folder (the class) and one registry line
(``RECORD``, registered by the entry point a test writes: ``tests/backends/test_new_backend.py``).
It is a test double, not a contained backend: its kernels run in the worker's own process.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from accelopt.backends.base import BuildResult
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.reference import HostReference
from accelopt.backends.registry import BackendRecord, Language
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem, Sizes

RECORD = BackendRecord("numpylang", "numpylang:NumpyLanguageBackend", Language.PYTHON)


class Loaded:
    def __init__(self, function: Callable[..., None]) -> None:
        self._function = function

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        self._function(*arrays)

    def bind(self, arrays: Sequence[np.ndarray]) -> Callable[[], None]:
        return partial(self, list(arrays))

    def close(self) -> None:
        pass


class NumpyLanguageBackend(HostReference):
    """Runs on the host, with no process of its own: a reference kind's parts, its own check."""

    name = "numpylang"

    def check(self, source: str) -> str | None:
        return None if "def kernel" in source else "the module defines no kernel function"

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        try:
            compile(kernel.source, kernel.name, "exec")
        except SyntaxError as e:
            return BuildResult(Status.COMPILE_ERROR, f"{e.msg} (line {e.lineno})")
        handle, name = tempfile.mkstemp(suffix=".py", prefix="numpylang-")
        with os.fdopen(handle, "w") as f:
            f.write(kernel.source)
        return BuildResult(None, artifact=Path(name))

    def load(
        self, artifact: Path, problem: Problem, device: object = None, memory_cap_bytes: int = 0
    ) -> Loaded:
        spec = importlib.util.spec_from_file_location("numpylang_kernel", artifact)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return Loaded(module.kernel)

    def set_threads(self, threads: int) -> None:
        pass

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        return BackendFacts(
            backend=self.name,
            language=RECORD.language,
            toolchain=f"Python (NumPy {np.__version__})",
            contract="kernel(*inputs, *outputs) writes the outputs in place with NumPy.",
            ceilings=describe_ceilings(hardware),
        )
