"""The ``CachedProfiler`` as the evaluation cache's one owner, called from many threads: one
measurement per kernel however many ask at once, a failure reaching every waiter and cached
nowhere, and kernels that differ measured side by side. A fake runner, no worker."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from fakes import fake_evaluation, variant
from runners import RunsOnly

from accelopt.backends.kernel import Kernel
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.profiler import EvaluationCache, Job, Measured
from accelopt.profiling.session import Retiming

SILU = load_problem("silu")
CONFIG = EvalConfig(seeds=2, min_calls=5, min_time_s=0.02)
WAIT_S = 30.0  # no test waits this long unless it is broken


class MemoryCache:
    """An ``EvaluationCache`` in a dict."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str, str, str], Evaluation] = {}
        self.lock = threading.Lock()

    def get_evaluation(
        self, kernel_hash: str, problem: str, workload: str, hardware: str, *,
        problem_version: str = "",
    ) -> Evaluation | None:  # fmt: skip
        with self.lock:
            return self.saved.get((kernel_hash, problem, workload, hardware))

    def put_evaluation(self, evaluation: Evaluation) -> None:
        e = evaluation
        with self.lock:
            self.saved[(e.kernel_hash, e.problem, e.workload, e.hardware)] = e


class GatedRunner(RunsOnly):
    """Counts the jobs it measures; a job of a gated kernel waits until its gate opens, then
    answers, or raises ``error`` when one is set."""

    threads = 1
    capacity = 4

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware
        self.measured: list[str] = []
        self.started: dict[str, threading.Event] = {}
        self.gates: dict[str, threading.Event] = {}
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def gate(self, kernel_hash: str) -> threading.Event:
        self.started[kernel_hash] = threading.Event()
        self.gates[kernel_hash] = threading.Event()
        return self.gates[kernel_hash]

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            digest = job[0].hash
            with self._lock:
                self.measured.append(job[0].name)
                seed = len(self.measured)
            if digest in self.gates:
                self.started[digest].set()
                assert self.gates[digest].wait(WAIT_S)
            if self.error is not None:
                raise self.error
            yield Measured(i, fake_evaluation(job, self.hardware, seed))

    def retime(self, kernels: Sequence[Kernel], problem: object, workload: str) -> Retiming:
        raise AssertionError("not used here")

    def close(self) -> None:
        pass


class WatchedProfiler(CachedProfiler):
    """Says when a caller has joined a measurement already in flight."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.joined = threading.Semaphore(0)

    def _claim(self, key: tuple[str, str, str], fresh: bool) -> tuple[Future[Evaluation], bool]:
        future, mine = super()._claim(key, fresh)
        if not mine:
            self.joined.release()
        return future, mine


def in_threads(*calls: Callable[[], Evaluation]) -> list[Future[Evaluation]]:
    pool = ThreadPoolExecutor(max_workers=len(calls))
    futures = [pool.submit(call) for call in calls]
    pool.shutdown(wait=False)
    return futures


def evaluate(profiler: CachedProfiler, kernel: Kernel) -> Callable[[], Evaluation]:
    return lambda: profiler.evaluate(kernel, SILU, "small")


def test_a_store_is_an_evaluation_cache(tmp_path):
    from accelopt.store.store import Store

    with Store.open(tmp_path / "workspace") as store:
        cache: EvaluationCache = store  # the protocol the profiler asks for
        assert cache.get_evaluation("h", "silu", "small", "hw") is None


@pytest.mark.timeout(60)
def test_two_threads_asking_for_one_kernel_cause_one_measurement(hw):
    runner = GatedRunner(hw)
    cache = MemoryCache()
    profiler = WatchedProfiler("fake", hw, CONFIG, runner, cache)
    gate = runner.gate(variant(1).hash)
    first, second = in_threads(
        evaluate(profiler, variant(1, "first")), evaluate(profiler, variant(1, "second"))
    )
    assert runner.started[variant(1).hash].wait(WAIT_S)
    assert profiler.joined.acquire(timeout=WAIT_S)  # the other caller waits for it
    gate.set()
    a, b = first.result(WAIT_S), second.result(WAIT_S)
    assert len(runner.measured) == 1
    assert a.seeds == b.seeds and (a.kernel, b.kernel) == ("first", "second")
    assert (profiler.measured, profiler.shared, profiler.cache_hits) == (1, 1, 0)
    assert len(cache.saved) == 1
    again = profiler.evaluate(variant(1, "third"), SILU, "small")
    assert again.seeds == a.seeds and again.kernel == "third"
    assert (profiler.measured, profiler.cache_hits) == (1, 1)


@pytest.mark.timeout(60)
def test_a_failed_measurement_reaches_every_waiter_and_is_not_cached(hw):
    runner = GatedRunner(hw)
    cache = MemoryCache()
    profiler = WatchedProfiler("fake", hw, CONFIG, runner, cache)
    gate = runner.gate(variant(2).hash)
    runner.error = RuntimeError("the runner broke")
    futures = in_threads(*(evaluate(profiler, variant(2, f"k{i}")) for i in range(3)))
    assert runner.started[variant(2).hash].wait(WAIT_S)
    for _ in range(2):
        assert profiler.joined.acquire(timeout=WAIT_S)
    gate.set()
    for future in futures:
        with pytest.raises(RuntimeError, match="the runner broke"):
            future.result(WAIT_S)
    assert len(runner.measured) == 1 and cache.saved == {} and profiler.measured == 0
    runner.error = None  # nothing is left in flight: the next caller measures
    assert profiler.evaluate(variant(2), SILU, "small").passed
    assert len(runner.measured) == 2 and len(cache.saved) == 1


@pytest.mark.timeout(60)
def test_different_kernels_are_measured_side_by_side(hw):
    runner = GatedRunner(hw)
    profiler = WatchedProfiler("fake", hw, CONFIG, runner, MemoryCache())
    gate = runner.gate(variant(3).hash)
    (slow,) = in_threads(evaluate(profiler, variant(3)))
    assert runner.started[variant(3).hash].wait(WAIT_S)
    # While the first is held, another kernel is measured and answered.
    assert profiler.evaluate(variant(4), SILU, "small").kernel == "v4"
    assert not slow.done()
    gate.set()
    assert slow.result(WAIT_S).kernel == "v3"
    assert sorted(runner.measured) == ["v3", "v4"]


@pytest.mark.timeout(60)
def test_a_batch_joins_a_measurement_in_flight(hw):
    runner = GatedRunner(hw)
    profiler = WatchedProfiler("fake", hw, CONFIG, runner)
    gate = runner.gate(variant(5).hash)
    (single,) = in_threads(evaluate(profiler, variant(5, "single")))
    assert runner.started[variant(5).hash].wait(WAIT_S)
    jobs = [(variant(5, "batched"), SILU, "small"), (variant(6), SILU, "small")]
    with ThreadPoolExecutor(max_workers=1) as pool:
        batch = pool.submit(lambda: dict(profiler.evaluate_batch(jobs)))
        assert profiler.joined.acquire(timeout=WAIT_S)
        gate.set()
        found = batch.result(WAIT_S)
    assert found[0].kernel == "batched" and found[0].seeds == single.result(WAIT_S).seeds
    assert sorted(runner.measured) == ["single", "v6"]


@pytest.mark.timeout(60)
def test_fresh_measures_again_and_replaces_the_cached(hw):
    runner = GatedRunner(hw)
    cache = MemoryCache()
    profiler = CachedProfiler("fake", hw, CONFIG, runner, cache)
    first = profiler.evaluate(variant(7), SILU, "small")
    fresh = profiler.evaluate(variant(7), SILU, "small", fresh=True)
    assert fresh.seeds != first.seeds and len(runner.measured) == 2
    assert profiler.evaluate(variant(7), SILU, "small").seeds == fresh.seeds


@pytest.mark.timeout(60)
def test_a_batch_consumer_asking_again_does_not_wait_for_itself(hw):
    runner = GatedRunner(hw)
    profiler = CachedProfiler("fake", hw, CONFIG, runner)
    jobs = [(variant(8), SILU, "small"), (variant(9), SILU, "small")]
    for _, _evaluation in profiler.evaluate_batch(jobs):  # variant 9 is still in flight here
        assert profiler.evaluate(variant(9, "again"), SILU, "small").kernel == "again"
        break
    assert sorted(runner.measured) == ["again", "v8"]
