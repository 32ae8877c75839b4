"""The ``Profiler`` in front of a runner: the shared evaluation cache, batches yielded as they
finish, the local runner on the real pool, and the factory's errors. No Ray here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from fakes import fake_evaluation, variant
from runners import RunsOnly

from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.profiler import ClusterLostError, Job, Measured, evaluate_all

SILU = load_problem("silu")
TIMED = EvalConfig(seeds=2, min_calls=5, min_time_s=0.02, call_timeout_floor_s=5.0)


class FakeRunner(RunsOnly):
    """Answers every job at once, in reverse order (as a real runner may: as they finish)."""

    threads = 2
    capacity = 1

    def __init__(self, hardware: HardwareSpec, unmeasured: frozenset[int] = frozenset()) -> None:
        self.hardware = hardware
        self.unmeasured = unmeasured  # positions answered as service failures
        self.ran: list[str] = []
        self.seed = 0
        self.lose_after: int | None = None
        self.closed = False

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for n, i in enumerate(reversed(range(len(jobs)))):
            if self.lose_after is not None and n == self.lose_after:
                raise ClusterLostError("lost the Ray cluster at here")
            self.seed += 1
            self.ran.append(jobs[i][0].name)
            evaluation = fake_evaluation(jobs[i], self.hardware, self.seed)
            yield Measured(i, evaluation, measured=i not in self.unmeasured)

    def close(self) -> None:
        self.closed = True


def profiler(hw, runner, store=None, config=TIMED) -> CachedProfiler:
    return CachedProfiler("fake", hw, config, runner, store)


def test_batch_yields_index_and_evaluation_as_they_finish(hw):
    runner = FakeRunner(hw)
    jobs = [(variant(i), SILU, "small") for i in range(3)]
    pairs = list(profiler(hw, runner).evaluate_batch(jobs))
    assert [i for i, _ in pairs] == [2, 1, 0]
    assert all(e.kernel == jobs[i][0].name for i, e in pairs)
    assert [e.kernel for e in evaluate_all(profiler(hw, FakeRunner(hw)), jobs)] == [
        "v0", "v1", "v2"
    ]  # fmt: skip


def test_a_second_evaluation_comes_from_the_cache(hw, store):
    runner = FakeRunner(hw)
    prof = profiler(hw, runner, store)
    first = prof.evaluate(variant(1), SILU, "small")
    again = prof.evaluate(variant(1, name="renamed"), SILU, "small")
    assert again.seeds == first.seeds and runner.ran == ["v1"]
    assert again.kernel == "renamed"  # the label of the job that asked
    assert (prof.measured, prof.cache_hits) == (1, 1)
    fresh = prof.evaluate(variant(1), SILU, "small", fresh=True)
    assert fresh.seeds != first.seeds and prof.measured == 2
    other = profiler(hw, FakeRunner(hw), store)  # another profiler, same workspace
    assert other.evaluate(variant(1), SILU, "small").seeds == fresh.seeds
    assert other.measured == 0


def test_the_cache_key_holds_workload_and_hardware(hw, store):
    prof = profiler(hw, FakeRunner(hw), store)
    prof.evaluate(variant(1), SILU, "small")
    prof.evaluate(variant(1), SILU, "cpu")
    other_hw = hw.model_copy(update={"bandwidth": hw.bandwidth * 2})
    profiler(other_hw, FakeRunner(other_hw), store).evaluate(variant(1), SILU, "small")
    assert prof.measured == 2 and prof.cache_hits == 0


def test_duplicates_in_a_batch_are_measured_once(hw, store):
    runner = FakeRunner(hw)
    jobs = [(variant(1, "a"), SILU, "small"), (variant(2), SILU, "small"),
            (variant(1, "b"), SILU, "small")]  # fmt: skip
    found = dict(profiler(hw, runner, store).evaluate_batch(jobs))
    assert sorted(runner.ran) == ["a", "v2"]
    assert found[0].seeds == found[2].seeds
    assert (found[0].kernel, found[2].kernel) == ("a", "b")


def test_service_failures_and_check_only_are_not_cached(hw, store):
    runner = FakeRunner(hw, unmeasured=frozenset({0}))
    prof = profiler(hw, runner, store)
    prof.evaluate(variant(1), SILU, "small")
    assert store.get_evaluation(variant(1).hash, "silu", "small", hw.key()) is None
    assert prof.measured == 0
    check_only = profiler(hw, FakeRunner(hw), store, TIMED.model_copy(update={"check_only": True}))
    check_only.evaluate(variant(2), SILU, "small")
    check_only.evaluate(variant(2), SILU, "small")
    assert check_only.measured == 2 and check_only.cache_hits == 0
    assert store.get_evaluation(variant(2).hash, "silu", "small", hw.key()) is None


def test_a_lost_cluster_keeps_what_finished(hw, store):
    runner = FakeRunner(hw)
    runner.lose_after = 2
    prof = profiler(hw, runner, store)
    seen = []
    with pytest.raises(ClusterLostError) as lost:
        for pair in prof.evaluate_batch([(variant(i), SILU, "small") for i in range(5)]):
            seen.append(pair)
    assert isinstance(lost.value, UserError)
    assert lost.value.results == seen and len(seen) == 2
    message = str(lost.value)
    assert "lost the Ray cluster" in message and "2 evaluations" in message
    assert "3 did not run" in message and "saved in the evaluation cache" in message
    assert all(store.get_evaluation(e.kernel_hash, "silu", "small", hw.key()) for _, e in seen)


def test_close_closes_the_runner(hw):
    runner = FakeRunner(hw)
    with profiler(hw, runner):
        pass
    assert runner.closed


def test_factory_rejects_what_it_cannot_make(hw):
    with pytest.raises(UserError, match="unknown profiler 'gpu'"):
        make_profiler("gpu", hw)
    with pytest.raises(UserError, match="--ray-address needs --profiler ray"):
        make_profiler("local", hw, ray_address="127.0.0.1:6379")


@pytest.mark.timeout(120)
def test_local_profiler_on_the_real_pool(accelopt_cache, hw, kernel_file, store):
    jobs = [
        (variant(7), SILU, "small"),
        (kernel_file("compile_error"), SILU, "small"),
        (kernel_file("segfault"), SILU, "small"),
    ]
    with make_profiler("local", hw, TIMED, store=store) as prof:
        assert prof.threads == hw.cores and prof.capacity == TIMED.workers
        found = dict(prof.evaluate_batch(jobs))
        assert [found[i].status for i in range(3)] == [
            Status.PASSED, Status.COMPILE_ERROR, Status.CRASH
        ]  # fmt: skip
        assert found[0].latency_s is not None
        again = prof.evaluate(variant(7), SILU, "small")
    assert again.seeds == found[0].seeds
    assert (prof.measured, prof.cache_hits) == (3, 1)
