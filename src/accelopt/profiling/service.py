"""The ``Evaluator``: static checks in the parent, everything else in the worker pool.

``evaluate`` never raises for a bad kernel: every outcome is an ``Evaluation`` with a status.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.hardware.roofline import roofline
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling import sandbox
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.pool import Deadlines, WorkerPool
from accelopt.profiling.scoring import verdict

Job = tuple[Kernel, Problem, str]


class Evaluator:
    def __init__(self, hardware: HardwareSpec, config: EvalConfig | None = None) -> None:
        self.hardware = hardware
        self.config = config or EvalConfig()
        backend = get_backend(hardware.backend)
        backend.preflight(timing=not self.config.check_only)  # one clear UserError, now
        self.threads = self.config.threads or hardware.cores
        env = sandbox.worker_env(os.environ, self.threads)
        self.lock_path = devicelock.lock_path(backend.lock_name())
        self.pool = WorkerPool(
            self.config.workers, env, self.config.recycle_after, lock_path=self.lock_path
        )
        self.pool.prestart(self.config.workers)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.close()

    def _seeds(self) -> list[int]:
        base = self.config.seed
        if base is None:
            return [secrets.randbits(31) for _ in range(self.config.seeds)]
        return [base + i for i in range(self.config.seeds)]

    def _deadlines(self, peak_s: float) -> Deadlines:
        call_s = self.config.call_timeout_s(peak_s)
        return Deadlines(
            compile_s=self.config.compile_timeout_s + 30,
            call_s=call_s,
            reference_s=max(120.0, 1000 * peak_s),
        )

    def _request(
        self, kernel: Kernel, problem: Problem, workload: str, seeds: list[int]
    ) -> dict[str, Any]:
        return {
            "type": "evaluate",
            "source": kernel.source,
            "backend": kernel.backend,
            "kernel_name": kernel.name,
            "problem": problem.name,
            "workload": workload,
            "config": self.config.model_dump(),
            "seeds": seeds,
            "threads": self.threads,
            "llc_bytes": self.hardware.llc_bytes,
            "lock_path": str(self.lock_path),
        }

    def evaluate(self, kernel: Kernel, problem: Problem, workload: str) -> Evaluation:
        start = time.perf_counter()
        sizes = problem.workload(workload).sizes
        roof = roofline(problem.cost.evaluate(sizes), self.hardware)
        seeds = self._seeds()
        reason = get_backend(kernel.backend).check(kernel.source)
        if reason:
            raw: dict[str, Any] = {"status": str(Status.REJECTED), "error": reason}
        else:
            request = self._request(kernel, problem, workload, seeds)
            raw = self.pool.run(request, self._deadlines(roof.peak_s), self.config.output_cap_bytes)
        wall_s = time.perf_counter() - start
        return build_evaluation(
            kernel, problem, workload, self.hardware, self.threads, raw, seeds, wall_s
        )

    def evaluate_many(self, jobs: Iterable[Job]) -> Iterator[Evaluation]:
        """Evaluate in parallel across the pool; results come back in the order of ``jobs``."""
        with ThreadPoolExecutor(max_workers=self.config.workers) as executor:
            futures = [executor.submit(self.evaluate, *job) for job in jobs]
            for future in futures:
                yield future.result()


def build_evaluation(
    kernel: Kernel,
    problem: Problem,
    workload: str,
    hardware: HardwareSpec,
    threads: int,
    raw: dict[str, Any],
    seeds: list[int] | None = None,
    wall_s: float | None = None,
) -> Evaluation:
    """The ``Evaluation`` of a worker's raw result (or of a failure the service itself reports,
    e.g. ``{"status": "CRASH", "error": ...}``), scored against the roofline on ``hardware``."""
    roof = roofline(problem.cost.evaluate(problem.workload(workload).sizes), hardware)
    judged = verdict(
        raw.get("status"),
        str(raw.get("error", "")),
        raw.get("latency_s"),
        roof.peak_s,
        raw.get("repeat_s"),
    )
    return Evaluation(
        problem=problem.name,
        workload=workload,
        backend=kernel.backend,
        kernel=kernel.name,
        kernel_hash=kernel.hash,
        hardware=hardware.key(),
        status=judged.status,
        error=judged.error,
        latency_s=raw.get("latency_s"),
        min_s=raw.get("min_s"),
        noise=raw.get("noise"),
        calls=int(raw.get("calls") or 0),
        peak_s=roof.peak_s,
        pct_of_peak=judged.pct_of_peak,
        bound=roof.bound,
        max_rel_err=raw.get("max_rel_err"),
        tolerance=problem.tolerance,
        seeds=seeds or [],
        threads=threads,
        rotation_sets=raw.get("rotation_sets"),
        compile_s=raw.get("compile_s"),
        compile_cached=bool(raw.get("compile_cached")),
        check_s=raw.get("check_s"),
        time_s=raw.get("time_s"),
        wall_s=wall_s,
        network_isolated=raw.get("network_isolated"),
        log=str(raw.get("log", "")),
    )
