"""Export folders made from kernels with a recorded PASSED evaluation (no timing: what is
tested here is the folder and its runtime, not the measurement), and a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.export.bundle import Exported, Source, export_kernel
from accelopt.hardware.roofline import Bound
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation


def evaluation(problem: Problem, workload: str, kernel: Kernel, status: Status = Status.PASSED,
               error: str = "") -> Evaluation:  # fmt: skip
    return Evaluation(
        problem=problem.name, workload=workload, backend=kernel.backend, kernel=kernel.name,
        kernel_hash=kernel.hash, hardware="test-machine", status=status,
        error="" if status == Status.PASSED else error or "failed",
        latency_s=1e-3 if status == Status.PASSED else None, peak_s=5e-4,
        pct_of_peak=0.5 if status == Status.PASSED else None, bound=Bound.MEMORY,
        tolerance=problem.tolerance,
    )  # fmt: skip


@pytest.fixture
def export_with(tmp_path: Path) -> Callable[..., Exported]:
    """Export ``source`` for ``problem`` on ``workloads``, each recorded as PASSED."""

    def make(problem: Problem, source: str, workloads: Sequence[str], backend: str = "cpu",
             name: str = "out") -> Exported:  # fmt: skip
        kernel = Kernel(source, backend, "test kernel")
        found = {w: evaluation(problem, w, kernel) for w in workloads}
        return export_kernel(problem, Source(kernel), found, tmp_path / name)

    return make


def fresh_python(code: str, cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run ``code`` in a new interpreter (nothing of this process is imported there)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
