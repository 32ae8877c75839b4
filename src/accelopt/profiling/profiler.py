"""Profilers: evaluate a batch of kernels and yield each evaluation as it finishes.

One small protocol, two runners behind it:

- ``local`` (the default): the ``Evaluator``'s isolated worker pool on this machine;
- ``ray``: one actor per device of a Ray cluster, each owning an ``Evaluator`` with its own isolated
  pool (``accelopt.profiling.ray_profiler``).

Both sit behind the same evaluation cache, the store's (``Store.get_evaluation``), keyed by kernel
hash, problem, workload, hardware key and harness version (DESIGN.md): a kernel measured once, by
either profiler, in any run of the workspace, is not measured again. Check-only evaluations neither
read nor fill the cache (they carry no timing). An evaluation the service itself failed to produce
(an actor lost too many times) is returned as a ``CRASH`` naming the reason, and never cached.

    with make_profiler("ray", hardware, config, store=store) as profiler:
        for index, evaluation in profiler.evaluate_batch(jobs):
            ...  # in the order they finish; ``index`` is the job's position in ``jobs``
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from accelopt.backends.kernel import Kernel
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.service import Evaluator, Job

if TYPE_CHECKING:
    from accelopt.store.store import Store

PROFILERS = ("local", "ray")

__all__ = [
    "PROFILERS",
    "CachedProfiler",
    "ClusterLostError",
    "Job",
    "LocalRunner",
    "Outcome",
    "Profiler",
    "Runner",
    "evaluate_all",
    "make_profiler",
]


class ClusterLostError(UserError):
    """The profiling service went away (a lost Ray cluster, no device left to run on).

    ``results`` holds the (index, evaluation) pairs of the batch that finished before it did: they
    were yielded already and, with a store, saved in its cache.
    """

    def __init__(self, message: str, results: Sequence[tuple[int, Evaluation]] = ()) -> None:
        super().__init__(message)
        self.results = list(results)


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

    def close(self) -> None: ...

    def __enter__(self) -> Profiler: ...

    def __exit__(self, *exc: object) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """What a runner returns for one job. ``measured`` is False when the service, not the kernel,
    failed (the evaluation is then a CRASH naming the reason, and is not cached)."""

    index: int
    evaluation: Evaluation
    measured: bool = True


class Runner(Protocol):
    """Runs the evaluations the cache could not answer."""

    threads: int
    capacity: int

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        """One outcome per job, in the order they finish (``index``: position in ``jobs``)."""
        ...

    def close(self) -> None: ...


class LocalRunner:
    """The isolated worker pool of this machine: ``config.workers`` evaluations at once."""

    def __init__(self, hardware: HardwareSpec, config: EvalConfig) -> None:
        self.evaluator = Evaluator(hardware, config)
        self.threads = self.evaluator.threads
        self.workers = self.capacity = config.workers

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        if not jobs:
            return
        executor = ThreadPoolExecutor(max_workers=min(len(jobs), self.workers))
        try:
            futures = {
                executor.submit(self.evaluator.evaluate, *job): i for i, job in enumerate(jobs)
            }
            for future in as_completed(futures):
                yield Outcome(futures[future], future.result())
        finally:
            # A caller that stops early waits for the running evaluations (each is bounded by its
            # phase deadlines), so that no worker is left busy behind a closed pool.
            executor.shutdown(wait=True, cancel_futures=True)

    @property
    def hardware(self) -> HardwareSpec:
        """The spec evaluations are scored against now (a ceiling may have been raised)."""
        return self.evaluator.hardware

    def close(self) -> None:
        self.evaluator.close()


def _cache_key(job: Job) -> tuple[str, str, str]:
    kernel, problem, workload = job
    return kernel.hash, problem.name, workload


def _labelled(evaluation: Evaluation, kernel: Kernel) -> Evaluation:
    """A cached or shared evaluation carries the label of the job that asked for it."""
    if evaluation.kernel == kernel.name:
        return evaluation
    return evaluation.model_copy(update={"kernel": kernel.name})


class CachedProfiler:
    """A ``Profiler``: the store's evaluation cache in front of a runner.

    Within one batch, jobs with the same kernel, problem and workload are measured once. Each
    evaluation a runner measures is saved in the cache before it is yielded, so a command that is
    stopped keeps everything it measured. ``measured`` and ``cache_hits`` count evaluations run and
    answered from the cache since the profiler was made.
    """

    def __init__(
        self,
        kind: str,
        hardware: HardwareSpec,
        config: EvalConfig,
        runner: Runner,
        store: Store | None = None,
    ) -> None:
        self.kind = kind
        self.hardware = hardware
        self.config = config
        self.runner = runner
        self.store = store
        self.threads = runner.threads
        self.capacity = runner.capacity
        self.measured = 0
        self.cache_hits = 0

    def __enter__(self) -> CachedProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.runner.close()

    @property
    def _caching(self) -> bool:
        return self.store is not None and not self.config.check_only

    def _cached(self, job: Job) -> Evaluation | None:
        if self.store is None:
            return None
        kernel_hash, problem, workload = _cache_key(job)
        return self.store.get_evaluation(kernel_hash, problem, workload, self.hardware.key())

    def evaluate(
        self, kernel: Kernel, problem: Problem, workload: str, *, fresh: bool = False
    ) -> Evaluation:
        return dict(self.evaluate_batch([(kernel, problem, workload)], fresh=fresh))[0]

    def evaluate_batch(
        self, jobs: Iterable[Job], *, fresh: bool = False
    ) -> Iterator[tuple[int, Evaluation]]:
        jobs = list(jobs)
        groups: dict[tuple[str, str, str], list[int]] = {}
        for i, job in enumerate(jobs):
            cached = self._cached(job) if self._caching and not fresh else None
            if cached is not None:
                self.cache_hits += 1
                yield i, _labelled(cached, job[0])
            else:
                groups.setdefault(_cache_key(job), []).append(i)
        firsts = [indices[0] for indices in groups.values()]
        done: list[tuple[int, Evaluation]] = []
        try:
            for outcome in self.runner.run([jobs[i] for i in firsts]):
                evaluation = outcome.evaluation
                if outcome.measured:
                    self.measured += 1
                    # a raised ceiling changes the key later evaluations are cached under
                    self.hardware = getattr(self.runner, "hardware", self.hardware)
                    if self._caching:
                        assert self.store is not None
                        self.store.put_evaluation(evaluation)
                for i in groups[_cache_key(jobs[firsts[outcome.index]])]:
                    done.append((i, _labelled(evaluation, jobs[i][0])))
                    yield done[-1]
        except ClusterLostError as lost:
            kept = "saved in the evaluation cache" if self._caching else "returned"
            missing = sum(len(g) for g in groups.values()) - len(done)
            raise ClusterLostError(
                f"{lost} ({len(done)} evaluations of this batch finished and were {kept}; "
                f"{missing} did not run)",
                done,
            ) from None


def evaluate_all(
    profiler: Profiler, jobs: Sequence[Job], *, fresh: bool = False
) -> list[Evaluation]:
    """Every job's evaluation, in the order of ``jobs`` (what a results table wants)."""
    found = dict(profiler.evaluate_batch(jobs, fresh=fresh))
    return [found[i] for i in range(len(jobs))]


def make_profiler(
    kind: str,
    hardware: HardwareSpec,
    config: EvalConfig | None = None,
    ray_address: str | None = None,
    store: Store | None = None,
    *,
    actors: int | None = None,
) -> CachedProfiler:
    """The profiler ``--profiler`` names: ``local`` (this machine's pool) or ``ray``.

    ``ray_address`` (``ray`` only): a running cluster, ``HOST:PORT`` of its head (or ``auto``:
    the cluster this machine belongs to); without one a local Ray instance is started and stopped
    on close. The command must run on a machine of the cluster (Ray's client mode is untested).
    ``actors`` (``ray`` only): how many device actors (default: one per device the cluster
    declares; one for a local instance). ``store``: the workspace whose evaluation cache to use.
    """
    config = config or EvalConfig()
    runner: Runner
    if kind == "local":
        if ray_address is not None:
            raise UserError(
                "--ray-address needs --profiler ray (the local profiler uses no cluster)"
            )
        if actors is not None:
            raise UserError("actors are for --profiler ray; the local pool size is --workers")
        runner = LocalRunner(hardware, config)
    elif kind == "ray":
        from accelopt.profiling.ray_profiler import RayOptions, RayRunner

        runner = RayRunner(hardware, config, RayOptions(address=ray_address, actors=actors))
    else:
        raise UserError(f"unknown profiler {kind!r}; choose one of: {', '.join(PROFILERS)}")
    return CachedProfiler(kind, hardware, config, runner, store)
