"""A runner for the loop tests that measures nothing: each of tests/search/variants/ has a fixed
latency (or fails with a fixed status), and a session finds each kernel at its latency's ratio to
the first. Put behind the real evaluation cache (``CachedProfiler``), a run stores, caches and
resumes as with the real pool, in milliseconds and without a compiler."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from agents_pool import VARIANTS

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.profiler import Job, Measured
from accelopt.profiling.session import Retiming

LATENCY_S = {"slow": 8e-3, "fixed": 1e-3, "good": 2e-3, "slower": 6e-3, "fast": 0.8e-3,
             "sized": 3e-3}  # fmt: skip
FAILS = {"broken": Status.COMPILE_ERROR, "wrong": Status.INCORRECT}
PEAK_S = 0.5e-3


def variant_of(source: str) -> str:
    """Which variant ``source`` is (by its first line)."""
    for path in sorted(VARIANTS.glob("matmul_*.c")):
        if path.read_text().splitlines()[0] in source:
            return path.stem.removeprefix("matmul_")
    return "unknown"


class FakeRunner:
    def __init__(self, hardware: HardwareSpec, config: EvalConfig) -> None:
        self.hardware = hardware
        self.threads = 1
        self.capacity = config.workers

    def evaluate(self, kernel: Kernel, problem: Problem, workload: str) -> Evaluation:
        name = variant_of(kernel.source)
        status = FAILS.get(name, Status.PASSED if name in LATENCY_S else Status.CRASH)
        latency = LATENCY_S.get(name) if status is Status.PASSED else None
        return Evaluation(
            problem=problem.name, workload=workload, backend=kernel.backend, kernel=kernel.name,
            kernel_hash=kernel.hash, hardware=self.hardware.key(), status=status,
            latency_s=latency, noise=0.01, ci=0.01, peak_s=PEAK_S, bound="matmul",
            pct_of_peak=PEAK_S / latency if latency else None, tolerance=problem.tolerance,
            error="" if latency else f"variant {name} fails",
        )  # fmt: skip

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            yield Measured(i, self.evaluate(*job))

    def race(self, job: Job, race_s: float) -> Evaluation:
        return self.evaluate(*job)

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        found = tuple(self.evaluate(k, problem, workload) for k in kernels)
        first = found[0].latency_s
        ratios = tuple(e.latency_s / first if e.latency_s and first else None for e in found)
        return Retiming(found, ratios, tuple(0.005 for _ in kernels), rounds=8)

    def close(self) -> None:
        pass


def fake_profiler(kind, hardware, config=None, ray_address=None, store=None, **_):
    """``make_profiler``'s stand-in: the fake runner behind the real evaluation cache."""
    config = config or EvalConfig()
    return CachedProfiler("fake", hardware, config, FakeRunner(hardware, config), store)
