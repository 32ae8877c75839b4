"""The ray profiler's dispatcher without Ray: a fake fleet and a fake clock drive the retries, the
deadlines and the lost-cluster path one round at a time."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable

import pytest
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.problems import load_problem
from accelopt.profiling.cluster.dispatcher import (
    ActorLost,
    Dispatcher,
    JobFailed,
    RetryPolicy,
    service_failure,
)
from accelopt.profiling.cluster.fleet import _brief
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import ClusterLostError, Job

SILU = load_problem("silu")
HW = make_spec()
POLICY = RetryPolicy(
    max_attempts=3, job_timeout_s=100.0, start_timeout_s=30.0, probe_every_s=5.0,
    lost_after_s=20.0, poll_s=0.0,
)  # fmt: skip

# What the fake actor does with a job: an Evaluation, an exception to raise, or None (no answer).
Behaviour = Callable[[str, Job], "Evaluation | Exception | None"]


def job(i: int) -> Job:
    return (Kernel(f"void kernel(){{ /* {i} */ int x{i}; }}", "cpu", f"k{i}"), SILU, "small")


def passed(job: Job, actor: str = "") -> Evaluation:
    kernel, problem, workload = job
    return Evaluation(
        problem=problem.name, workload=workload, backend="cpu", kernel=kernel.name,
        kernel_hash=kernel.hash, hardware="hw", status=Status.PASSED, peak_s=1e-6,
        bound="memory", tolerance=problem.tolerance, log=actor,
    )  # fmt: skip


class FakeFleet:
    def __init__(self, actors: list[str], behaviour: Behaviour) -> None:
        self.live = list(actors)
        self.behaviour = behaviour
        self.starting_count = 0
        self.replacements: list[str] = []  # actors to start when one is retired
        self.tickets: dict[Hashable, tuple[str, Job]] = {}
        self.retired: list[tuple[str, str]] = []
        self.submitted: list[tuple[str, str]] = []  # (actor, kernel name)
        self.is_alive = True
        self.last_error = ""
        self._ids = itertools.count()

    def ready(self) -> list[str]:
        return list(self.live)

    def starting(self) -> int:
        return self.starting_count

    def submit(self, actor: str, job: Job) -> Hashable:
        ticket = next(self._ids)
        self.tickets[ticket] = (actor, job)
        self.submitted.append((actor, job[0].name))
        return ticket

    def _answer(self, ticket: Hashable) -> Evaluation | Exception | None:
        actor, job = self.tickets[ticket]
        if actor in dict(self.retired):
            return ActorLost("The actor is dead because it was killed by `ray.kill`.")
        return self.behaviour(actor, job)

    def wait(self, tickets: list[Hashable], timeout: float) -> list[Hashable]:
        return [t for t in tickets if self._answer(t) is not None]

    def result(self, ticket: Hashable) -> Evaluation:
        answer = self._answer(ticket)
        if isinstance(answer, Exception):
            raise answer
        assert answer is not None
        return answer

    def retire(self, actor: str, reason: str) -> None:
        if actor in self.live:
            self.live.remove(actor)
            self.retired.append((actor, reason))
            self.last_error = reason
            if self.replacements:
                self.live.append(self.replacements.pop(0))

    def alive(self) -> bool:
        return self.is_alive

    def describe(self, actor: str) -> str:
        return f"actor {actor}"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(fleet: FakeFleet, clock: Clock | None = None, slots: int = 2) -> Dispatcher:
    def failure(j: Job, reason: str) -> Evaluation:
        return service_failure(j, reason, HW, threads=2)

    return Dispatcher(fleet, POLICY, slots, failure, "test-cluster", clock or Clock())


def run(dispatcher: Dispatcher, rounds: int = 20) -> None:
    for _ in range(rounds):
        dispatcher.step()


def answers(futures) -> list[tuple[Evaluation, bool]]:
    return [f.result(timeout=0) for f in futures]


def test_jobs_spread_over_actors_within_their_slots():
    fleet = FakeFleet(["a", "b"], lambda actor, j: passed(j, actor))
    dispatcher = make(fleet, slots=2)
    futures = [dispatcher.submit(job(i)) for i in range(6)]
    dispatcher.step()
    assert sorted(a for a, _ in fleet.submitted) == ["a", "a", "b", "b"]  # 2 slots each
    run(dispatcher)
    done = answers(futures)
    assert [e.kernel for e, _ in done] == [f"k{i}" for i in range(6)]
    assert all(measured for _, measured in done)


def test_a_job_on_a_lost_actor_runs_on_another():
    def behaviour(actor: str, j: Job) -> Evaluation | Exception:
        return ActorLost("its node died") if actor == "a" else passed(j, actor)

    fleet = FakeFleet(["a", "b"], behaviour)
    dispatcher = make(fleet, slots=1)
    futures = [dispatcher.submit(job(i)) for i in range(3)]
    run(dispatcher)
    done = answers(futures)
    assert all(e.status is Status.PASSED and e.log == "b" for e, _ in done)
    assert fleet.retired == [("a", "actor a: its node died")]
    assert dispatcher.retried == 1


def test_a_job_lost_too_often_is_a_crash_with_the_reason():
    fleet = FakeFleet(["a"], lambda actor, j: ActorLost(f"{actor} died"))
    fleet.replacements = ["b", "c", "d"]
    dispatcher = make(fleet)
    future = dispatcher.submit(job(0))
    run(dispatcher)
    evaluation, measured = future.result(timeout=0)
    assert not measured and evaluation.status is Status.CRASH
    assert evaluation.error.startswith(
        "the evaluation could not be done: profiling service: the job was lost 3 times"
    )
    assert evaluation.service == evaluation.error  # never cached, never ranked
    assert "last: actor c: c died" in evaluation.error
    assert evaluation.kernel == "k0" and evaluation.peak_s > 0
    assert [a for a, _ in fleet.retired] == ["a", "b", "c"]


def test_a_job_that_raises_in_its_actor_is_not_retried():
    fleet = FakeFleet(["a", "b"], lambda actor, j: JobFailed("KeyError: 'small'"))
    dispatcher = make(fleet)
    future = dispatcher.submit(job(0))
    run(dispatcher)
    evaluation, measured = future.result(timeout=0)
    assert not measured and evaluation.status is Status.CRASH
    assert "the evaluation failed: KeyError" in evaluation.error
    assert len(fleet.submitted) == 1 and not fleet.retired


def test_an_actor_silent_past_the_deadline_is_retired_and_its_job_moves():
    clock = Clock()
    fleet = FakeFleet(["a", "b"], lambda actor, j: None if actor == "a" else passed(j, actor))
    dispatcher = make(fleet, clock, slots=1)
    future = dispatcher.submit(job(0))
    dispatcher.step()
    assert fleet.submitted == [("a", "k0")] and not future.done()
    clock.now = POLICY.job_timeout_s + 1
    run(dispatcher, 3)
    evaluation, _ = future.result(timeout=0)
    assert evaluation.log == "b"
    assert fleet.retired == [("a", "actor a gave no answer within 100 s")]


def test_an_unreachable_head_fails_the_rest_after_the_grace_period():
    clock = Clock()
    fleet = FakeFleet(["a"], lambda actor, j: passed(j) if j[0].name == "k0" else None)
    dispatcher = make(fleet, clock, slots=2)
    first, second = dispatcher.submit(job(0)), dispatcher.submit(job(1))
    dispatcher.step()
    assert first.result(timeout=0)[0].status is Status.PASSED
    fleet.is_alive = False
    for t in (5.0, 10.0, 15.0, 20.0):
        clock.now = t
        dispatcher.step()
        assert not second.done()
    clock.now = 25.0
    dispatcher.step()
    with pytest.raises(ClusterLostError, match="its head has not answered for 20 s"):
        second.result(timeout=0)
    late = dispatcher.submit(job(2))
    with pytest.raises(ClusterLostError):
        late.result(timeout=0)


def test_a_head_that_comes_back_in_time_is_not_lost():
    clock = Clock()
    fleet = FakeFleet(["a"], lambda actor, j: None)
    dispatcher = make(fleet, clock)
    future = dispatcher.submit(job(0))
    fleet.is_alive = False
    dispatcher.step()
    clock.now = 15.0
    fleet.is_alive = True
    dispatcher.step()
    clock.now = 40.0
    dispatcher.step()
    assert not future.done() and dispatcher.broken is None


def test_no_actor_left_ends_the_batch_with_the_reason():
    fleet = FakeFleet([], lambda actor, j: None)
    fleet.last_error = "a device actor failed to start: no C compiler"
    dispatcher = make(fleet)
    future = dispatcher.submit(job(0))
    dispatcher.step()
    with pytest.raises(ClusterLostError, match=r"no device actor is left.*no C compiler"):
        future.result(timeout=0)


def test_no_actor_starting_in_time_ends_the_batch():
    clock = Clock()
    fleet = FakeFleet([], lambda actor, j: None)
    fleet.starting_count = 1
    dispatcher = make(fleet, clock)
    future = dispatcher.submit(job(0))
    dispatcher.step()
    clock.now = POLICY.start_timeout_s - 1
    dispatcher.step()
    assert not future.done()
    clock.now = POLICY.start_timeout_s + 1
    dispatcher.step()
    with pytest.raises(ClusterLostError, match=r"no device actor started .* within 30 s"):
        future.result(timeout=0)


def test_the_thread_answers_every_caller_and_close_fails_the_rest():
    fleet = FakeFleet(["a"], lambda actor, j: passed(j) if j[0].name != "k9" else None)
    dispatcher = Dispatcher(fleet, RetryPolicy(poll_s=0.01), 2, lambda j, r: passed(j), "here")
    dispatcher.start()
    futures = [dispatcher.submit(job(i)) for i in range(4)]
    assert [f.result(timeout=10)[0].kernel for f in futures] == ["k0", "k1", "k2", "k3"]
    stuck = dispatcher.submit(job(9))
    dispatcher.close()
    with pytest.raises(ClusterLostError, match="closed"):
        stuck.result(timeout=10)


def test_service_failure_is_a_crash_scored_against_the_roofline(hw):
    evaluation = service_failure(job(3), "the job was lost 3 times", hw, threads=2)
    assert evaluation.status is Status.CRASH and evaluation.latency_s is None
    error = "the evaluation could not be done: profiling service: the job was lost 3 times"
    assert evaluation.error == error and evaluation.service == error
    assert evaluation.hardware == hw.key() and evaluation.kernel_hash == job(3)[0].hash
    assert evaluation.bound in {"matmul", "vector", "memory"} and evaluation.threads == 2


def test_a_ray_error_is_told_by_its_telling_line():
    creation = (
        "The actor died because of an error raised in its creation task, \x1b[36mray::DeviceActor"
        '.__init__()\x1b[39m (pid=1, ip=10.0.0.2)\n  File "x.py", line 47, in find_compiler\n'
        "    raise no_compiler(...)\naccelopt.errors.CompilerNotFoundError: no working C compiler"
    )
    assert _brief(RuntimeError(creation)) == "CompilerNotFoundError: no working C compiler"
    killed = (
        "The actor died unexpectedly before finishing this task.\n\tclass_name: DeviceActor\n"
        "The actor is dead because it was killed by `ray.kill`."
    )
    assert _brief(RuntimeError(killed)) == "The actor is dead because it was killed by `ray.kill`."
    assert _brief(RuntimeError("")) == "RuntimeError"
