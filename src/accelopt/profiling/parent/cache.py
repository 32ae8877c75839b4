"""The evaluation cache in front of a runner: the ``CachedProfiler``, the cache's one owner.

Callers on any thread ask it, and two asking for the same kernel at once cause one measurement.
Check-only evaluations neither read nor fill the cache (they carry no timing).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from accelopt.backends.kernel import Kernel
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling import faults
from accelopt.profiling.config import EvalConfig, harness_key
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import ClusterLostError, EvaluationCache, Job, Measured, Runner
from accelopt.profiling.session import Retiming

Key = tuple[str, str, str, str]  # kernel hash, problem, workload, problem's fingerprint


def _cache_key(job: Job) -> Key:
    kernel, problem, workload = job
    return kernel.hash, problem.name, workload, problem.fingerprint


def _labelled(evaluation: Evaluation, kernel: Kernel) -> Evaluation:
    """A cached or shared evaluation carries the label of the job that asked for it."""
    if evaluation.kernel == kernel.name:
        return evaluation
    return evaluation.model_copy(update={"kernel": kernel.name})


def raced_version(problem: Problem, race_s: float) -> str:
    """The harness version a raced evaluation is cached under: never a final one's."""
    return f"{harness_key(problem.fingerprint)}+raced:{race_s:.6e}"


def disturbed_apart(evaluation: Evaluation) -> dict[str, str]:
    """Where a disturbed evaluation is kept: under a harness version of its own, never a final
    one's (a later evaluation measures the kernel again; a run's readers still find it, marked:
    ``search.evaluations``); a final one where the cache keeps it."""
    if not evaluation.disturbed:
        return {}
    return {"harness_version": disturbed_version(evaluation.problem_version)}


def disturbed_version(problem_fingerprint: str = "") -> str:
    return f"{harness_key(problem_fingerprint)}+disturbed"


class _Abandoned(Exception):
    """The caller measuring a job stopped before it was done (a batch closed early)."""


@dataclass(eq=False)
class CachedProfiler(AbstractContextManager["CachedProfiler"]):
    """A ``Profiler``: the evaluation cache (the store's) in front of a runner, its one owner.

    Thread-safe. A job is measured once however many ask for it at the same time: within one
    batch, and across callers on other threads, who wait for the measurement in flight and get its
    evaluation (with their own kernel label); a ``fresh`` request waits only for a fresh one. An
    exception raised by a measurement reaches everyone waiting for it, and nothing is cached. Each
    evaluation a runner measures is saved in the cache before it is yielded, so a command that is
    stopped keeps everything it measured. Counters since the profiler was made: ``measured``
    (evaluations run), ``cache_hits`` (answered from the cache), ``shared`` (answered by another
    caller's measurement in flight).
    """

    kind: str
    hardware: HardwareSpec
    config: EvalConfig
    runner: Runner
    store: EvaluationCache | None = None
    measured: int = field(default=0, init=False)
    cache_hits: int = field(default=0, init=False)
    shared: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.threads = self.runner.threads
        self.capacity = self.runner.capacity
        self._lock = threading.Lock()
        # measurements in flight by (key, fresh), with the thread that runs each
        self._inflight: dict[tuple[Key, bool], tuple[Future[Evaluation], int]] = {}

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.runner.close()

    @property
    def _caching(self) -> bool:
        return self.store is not None and not self.config.check_only

    def _cached(self, key: Key, harness_version: str | None = None) -> Evaluation | None:
        if self.store is None:
            return None
        kernel_hash, problem, workload, version = key
        with self._lock:
            hardware = self.hardware.key()
        raced = {"harness_version": harness_version} if harness_version else {}
        found = self.store.get_evaluation(
            kernel_hash, problem, workload, hardware, problem_version=version, **raced
        )
        return None if found is None or faults.not_earned(found) else found

    def _count(self, measured: int = 0, cache_hits: int = 0, shared: int = 0) -> None:
        with self._lock:
            self.measured += measured
            self.cache_hits += cache_hits
            self.shared += shared

    def _claim(self, key: Key, fresh: bool) -> tuple[Future[Evaluation], bool]:
        """The measurement of ``key`` in flight, or a new one this caller owns (True). A thread
        never waits for itself (a batch's consumer asking again): it measures anew."""
        me = threading.get_ident()
        future: Future[Evaluation] = Future()
        with self._lock:
            for flag in (True,) if fresh else (True, False):
                pending = self._inflight.get((key, flag))
                if pending is not None and pending[1] != me:
                    return pending[0], False
                if pending is not None:
                    return future, True  # owned, not registered: nobody waits for it
            self._inflight[(key, fresh)] = (future, me)
            return future, True

    def _settle(
        self,
        key: Key,
        fresh: bool,
        future: Future[Evaluation],
        answer: Evaluation | BaseException,
    ) -> None:
        """End the measurement in flight (after the cache holds it): waiters get ``answer``."""
        with self._lock:
            if self._inflight.get((key, fresh), (None, 0))[0] is future:
                del self._inflight[(key, fresh)]
        if future.done():
            return
        if isinstance(answer, BaseException):
            future.set_exception(answer)
        else:
            future.set_result(answer)

    def _keep(self, outcome: Measured) -> Evaluation:
        """Count and cache what a runner measured (a service failure is neither)."""
        evaluation = outcome.evaluation
        if outcome.measured:
            with self._lock:
                self.measured += 1
                # a raised ceiling changes the key later evaluations are cached under
                self.hardware = self.runner.hardware
            if self._caching:
                assert self.store is not None
                self.store.put_evaluation(evaluation, **disturbed_apart(evaluation))
        return evaluation

    def _awaited(self, job: Job, fresh: bool, future: Future[Evaluation]) -> Evaluation:
        """Another caller's measurement of ``job``; measured here if that caller gave it up."""
        try:
            evaluation = future.result()
        except _Abandoned:
            return self.evaluate(*job, fresh=fresh)
        self._count(shared=1)
        return _labelled(evaluation, job[0])

    def evaluate(
        self, kernel: Kernel, problem: Problem, workload: str, *, fresh: bool = False
    ) -> Evaluation:
        return dict(self.evaluate_batch([(kernel, problem, workload)], fresh=fresh))[0]

    def race(
        self, kernel: Kernel, problem: Problem, workload: str, race_s: float | None
    ) -> Evaluation:
        """A search's candidate, racing its parent (``race_s``: the latency it must beat): the
        cached evaluation where there is one, else measured with timing stopped early once the
        kernel is clearly slower. A raced evaluation is kept apart from the final ones (under a
        harness version of its own, with the latency it raced: ``raced_version``), so a resumed
        search finds it and nothing else does; one that ran to the end is cached as any."""
        if race_s is None or self.config.check_only:
            return self.evaluate(kernel, problem, workload)
        job: Job = (kernel, problem, workload)
        version = raced_version(problem, race_s)
        cached = self._cached(_cache_key(job)) or self._cached(_cache_key(job), version)
        if cached is not None:
            self._count(cache_hits=1)
            return _labelled(cached, kernel)
        evaluation = self.runner.race(job, race_s)
        if not evaluation.raced or evaluation.service:
            return self._keep(Measured(0, evaluation, measured=not evaluation.service))
        self._count(measured=1)
        if self._caching:
            assert self.store is not None
            self.store.put_evaluation(evaluation, harness_version=version)
        return evaluation

    def evaluate_batch(
        self, jobs: Iterable[Job], *, fresh: bool = False
    ) -> Iterator[tuple[int, Evaluation]]:
        jobs = list(jobs)
        groups: dict[Key, list[int]] = {}
        for i, job in enumerate(jobs):
            groups.setdefault(_cache_key(job), []).append(i)
        owned: dict[Key, Future[Evaluation]] = {}
        joined: dict[Key, Future[Evaluation]] = {}
        for key in groups:
            future, mine = self._claim(key, fresh)
            (owned if mine else joined)[key] = future
        done: list[tuple[int, Evaluation]] = []
        try:
            yield from self._answer_owned(jobs, groups, owned, fresh, done)
            for key, future in joined.items():
                evaluation = self._awaited(jobs[groups[key][0]], fresh, future)
                yield from self._hand_out(jobs, groups[key], evaluation, done)
        except GeneratorExit:
            self._give_up(owned, fresh, _Abandoned())
            raise
        except ClusterLostError as lost:
            self._give_up(owned, fresh, lost)
            kept = "saved in the evaluation cache" if self._caching else "returned"
            raise ClusterLostError(
                f"{lost} ({len(done)} evaluations of this batch finished and were {kept}; "
                f"{len(jobs) - len(done)} did not run)",
                done,
                unreachable=lost.unreachable,
            ) from None
        except BaseException as exc:
            self._give_up(owned, fresh, exc)
            raise

    def _answer_owned(
        self,
        jobs: list[Job],
        groups: dict[Key, list[int]],
        owned: dict[Key, Future[Evaluation]],
        fresh: bool,
        done: list[tuple[int, Evaluation]],
    ) -> Iterator[tuple[int, Evaluation]]:
        """The keys this caller owns: from the cache where it can, else measured by the runner."""
        to_run: list[Key] = []
        for key, future in owned.items():
            cached = self._cached(key) if self._caching and not fresh else None
            if cached is None:
                to_run.append(key)
                continue
            self._count(cache_hits=len(groups[key]))
            self._settle(key, fresh, future, cached)
            yield from self._hand_out(jobs, groups[key], cached, done)
        for outcome in self.runner.run([jobs[groups[key][0]] for key in to_run]):
            key = to_run[outcome.index]
            evaluation = self._keep(outcome)
            self._settle(key, fresh, owned[key], evaluation)
            yield from self._hand_out(jobs, groups[key], evaluation, done)

    @staticmethod
    def _hand_out(
        jobs: list[Job],
        indices: list[int],
        evaluation: Evaluation,
        done: list[tuple[int, Evaluation]],
    ) -> Iterator[tuple[int, Evaluation]]:
        for i in indices:
            done.append((i, _labelled(evaluation, jobs[i][0])))
            yield done[-1]

    def _give_up(
        self, owned: dict[Key, Future[Evaluation]], fresh: bool, why: BaseException
    ) -> None:
        """Every measurement this caller owns and did not finish ends with ``why``."""
        for key, future in owned.items():
            self._settle(key, fresh, future, why)

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """A re-timing session (``session.py``): fresh evaluations, never read from nor saved in
        the cache, and each kernel's speed relative to the first."""
        if self.config.check_only:
            raise UserError("re-timing measures speed: it cannot run with check_only")
        retiming = self.runner.retime(kernels, problem, workload)
        with self._lock:
            self.hardware = self.runner.hardware
        return retiming
