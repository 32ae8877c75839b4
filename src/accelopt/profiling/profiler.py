"""What the commands and the search measure kernels with: the ``Profiler`` protocol and the
records its parts pass (``Job``, ``Measured``, ``ClusterLostError``).

One protocol, two runners behind it (``factory.make_profiler``):

- ``local`` (the default): the ``Evaluator``'s isolated worker pool on this machine
  (``parent/local.py``);
- ``ray``: one actor per device of a Ray cluster, each owning an ``Evaluator`` with its own isolated
  pool (``cluster/``).

Both sit behind the same evaluation cache, the store's (``Store.get_evaluation``, seen here as an
``EvaluationCache``), keyed by kernel hash, problem, workload, hardware key and harness version
(docs/architecture.md, Contracts: Kernel identity): a kernel measured once, by either profiler,
in any run of the workspace, is not measured again. The ``CachedProfiler`` (``parent/cache.py``)
is the cache's one owner. An evaluation the service itself failed to produce (an actor lost
too many times) is returned as a ``CRASH`` naming the reason, and never cached.

``retime`` measures several kernels afresh, interleaved in one worker on one device
(``session.py``), to tell a small speed-up from noise; it never reads nor fills the cache.

    with make_profiler("ray", hardware, config, store=store) as profiler:
        for index, evaluation in profiler.evaluate_batch(jobs):
            ...  # in the order they finish; ``index`` is the job's position in ``jobs``
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from accelopt.backends.kernel import Kernel
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.session import Retiming

PROFILERS = ("local", "ray")

Job = tuple[Kernel, Problem, str]
"""One measurement asked for: a kernel, its problem and the workload to run it on."""

__all__ = [
    "PROFILERS",
    "ClusterLostError",
    "EvaluationCache",
    "Job",
    "Measured",
    "Profiler",
    "Retiming",
    "Runner",
    "evaluate_all",
]


class ClusterLostError(UserError):
    """The profiling service went away (a lost Ray cluster, no device left to run on).

    ``results`` holds the (index, evaluation) pairs of the batch that finished before it did: they
    were yielded already and, with a store, saved in its cache. ``unreachable``: the cluster
    itself stopped answering (nothing on it can be asked to stop any more).
    """

    def __init__(
        self,
        message: str,
        results: Sequence[tuple[int, Evaluation]] = (),
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.results = list(results)
        self.unreachable = unreachable


class EvaluationCache(Protocol):
    """Where evaluations are kept between runs: the workspace's ``Store`` has these methods (the
    harness version is part of the key: the store adds the running one)."""

    def get_evaluation(
        self,
        kernel_hash: str,
        problem: str,
        workload: str,
        hardware: str,
        *,
        problem_version: str = "",
        harness_version: str | None = None,
    ) -> Evaluation | None: ...

    def put_evaluation(
        self, evaluation: Evaluation, harness_version: str | None = None
    ) -> None: ...


class Profiler(Protocol):
    """What the commands and the search use to measure kernels. A context manager."""

    kind: str
    hardware: HardwareSpec
    threads: int  # OpenMP threads each kernel runs with
    capacity: int  # evaluations that can run at once (size a caller's thread pool with it)

    def evaluate(
        self, kernel: Kernel, problem: Problem, workload: str, *, fresh: bool = False
    ) -> Evaluation:
        """One kernel. ``fresh``: measure again even when the cache holds an evaluation."""
        ...

    def evaluate_batch(
        self, jobs: Iterable[Job], *, fresh: bool = False
    ) -> Iterator[tuple[int, Evaluation]]:
        """Every job, yielded as ``(index in jobs, evaluation)`` in the order they finish."""
        ...

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """``kernels`` measured afresh, interleaved in one worker on one device; each one's speed
        relative to the first (``session.Retiming``). Never cached."""
        ...

    def race(
        self, kernel: Kernel, problem: Problem, workload: str, race_s: float | None
    ) -> Evaluation:
        """One kernel inside a search: timing stops early once it is clearly slower than
        ``race_s`` (its parent's latency); such an evaluation is ``raced`` and never cached."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Profiler: ...

    def __exit__(self, *exc: object) -> None: ...


@dataclass(frozen=True)
class Measured:
    """What a runner returns for one job: its position in the batch and its evaluation.
    ``measured`` is False when the service, not the kernel,
    failed (the evaluation is then a CRASH naming the reason, and is not cached)."""

    index: int
    evaluation: Evaluation
    measured: bool = True


@runtime_checkable
class Runner(Protocol):
    """Runs the evaluations the cache could not answer (``parent/cache.py``)."""

    threads: int  # OpenMP threads each kernel runs with
    capacity: int  # evaluations that can run at once

    @property
    def hardware(self) -> HardwareSpec:
        """The spec evaluations are scored against now: the one the runner was made with, or
        with a ceiling a kernel beat raised since (the cache keys later evaluations by it)."""
        ...

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        """One outcome per job, in the order they finish (``index``: position in ``jobs``)."""
        ...

    def race(self, job: Job, race_s: float) -> Evaluation:
        """One evaluation whose timing may stop early once the kernel is clearly slower than
        ``race_s`` (it is then ``raced``); a runner that cannot stop early evaluates in full."""
        ...

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """A re-timing session (``session.py``) on one device."""
        ...

    def close(self) -> None:
        """Stop the runner's workers (or its cluster's actors); nothing runs after."""
        ...


def evaluate_all(
    profiler: Profiler, jobs: Sequence[Job], *, fresh: bool = False
) -> list[Evaluation]:
    """Every job's evaluation, in the order of ``jobs`` (what a results table wants)."""
    found = dict(profiler.evaluate_batch(jobs, fresh=fresh))
    return [found[i] for i in range(len(jobs))]
