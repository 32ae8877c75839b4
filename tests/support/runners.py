"""What a test's fake ``Runner`` that only runs jobs lacks of the protocol
(``profiling.profiler.Runner``): ``RunsOnly``. Importable as ``runners``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from accelopt.backends.kernel import Kernel
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import Job, Measured
from accelopt.profiling.session import Retiming


class RunsOnly:
    """A fake runner's ``race`` and ``retime``: a race is the job run in full by the fake's own
    ``run`` (a runner that cannot stop early), and a re-timing session is not what its tests ask
    for. A fake defines ``run``, ``hardware``, ``threads``, ``capacity`` and ``close``."""

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        raise NotImplementedError("the fake runs jobs itself")

    def race(self, job: Job, race_s: float) -> Evaluation:
        (outcome,) = list(self.run([job]))
        return outcome.evaluation

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        raise AssertionError("no re-timing session in this test")
