"""Kernels and evaluations for the profiler tests that need no worker."""

from __future__ import annotations

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import Job

SILU = load_problem("silu")


def variant(i: int, name: str = "") -> Kernel:
    """The silu baseline with a harmless line, so that each ``i`` hashes differently."""
    source = shipped_kernel(SILU, "baseline").read_text()
    tagged = source.replace("{", f"{{ volatile int tag = {i}; (void)tag;", 1)
    return Kernel(tagged, "cpu", name or f"v{i}")


def fake_evaluation(job: Job, hardware: HardwareSpec, seed: int) -> Evaluation:
    kernel, problem, workload = job
    return Evaluation(
        problem=problem.name, workload=workload, backend=kernel.backend, kernel=kernel.name,
        kernel_hash=kernel.hash, hardware=hardware.key(), status=Status.PASSED, latency_s=1e-3,
        peak_s=1e-4, bound="memory", tolerance=problem.tolerance, seeds=[seed],
    )  # fmt: skip
