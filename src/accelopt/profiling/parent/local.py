"""The ``local`` runner: this machine's isolated worker pool, behind the evaluation cache."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from accelopt.backends.kernel import Kernel
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.profiler import Job, Measured
from accelopt.profiling.session import Retiming


class LocalRunner:
    """The isolated worker pool of this machine: ``config.workers`` evaluations at once."""

    def __init__(self, hardware: HardwareSpec, config: EvalConfig) -> None:
        self.evaluator = Evaluator(hardware, config)
        self.threads = self.evaluator.threads
        self.workers = self.capacity = config.workers

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        if not jobs:
            return
        executor = ThreadPoolExecutor(max_workers=min(len(jobs), self.workers))
        interrupted = False
        try:
            futures = {
                executor.submit(self.evaluator.evaluate, *job): i for i, job in enumerate(jobs)
            }
            for future in as_completed(futures):
                evaluation = future.result()  # a service failure: retried already, not kept
                yield Measured(futures[future], evaluation, measured=not evaluation.service)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            # A caller that stops early waits for the running evaluations (each is bounded by its
            # phase deadlines), so that no worker is left busy behind a closed pool; on Ctrl-C it
            # does not: closing the pool kills the busy workers (``WorkerPool.close``).
            executor.shutdown(wait=not interrupted, cancel_futures=True)

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        return self.evaluator.retime(kernels, problem, workload)

    def race(self, job: Job, race_s: float) -> Evaluation:
        """One evaluation whose timing stops early once clearly slower than ``race_s``."""
        return self.evaluator.evaluate(*job, race_s=race_s)

    @property
    def hardware(self) -> HardwareSpec:
        """The spec evaluations are scored against now (a ceiling may have been raised)."""
        return self.evaluator.hardware

    def close(self) -> None:
        self.evaluator.close()
