"""The ``ray`` profiler's scheduling, without Ray: the ``Dispatcher`` hands jobs to device actors
and collects their answers, written against the small ``Fleet`` protocol so that it is tested
with a fake fleet (``fleet.py`` has Ray's).

**Fault tolerance** lives here:

- a job whose actor dies (killed, its node lost, no answer within ``job_timeout_s``) is queued
  again, for another actor where there is one, up to ``max_attempts`` tries in all; then it is a
  ``CRASH`` evaluation saying why (``service_failure``), which is not cached. A dead actor is
  replaced by the fleet, within a budget;
- every wait on the fleet has a timeout, and the cluster's head is probed every ``probe_every_s``
  while there is work. When it has not answered for ``lost_after_s``, or no device actor is left,
  every unfinished job fails with one ``ClusterLostError``, after the results already received:
  the caller never hangs and loses nothing it was given.

A re-timing session (``RetimeJob``, ``session.py``) is one job like the others: it goes to one
device actor, whose ``Evaluator`` times its kernels interleaved in one worker; a lost actor is
retried like any job and, when retries run out, every kernel gets a ``CRASH`` naming the reason
(``service_retiming_failure``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.faults import could_not
from accelopt.profiling.parent.scoring import build_evaluation
from accelopt.profiling.profiler import ClusterLostError, Job
from accelopt.profiling.session import Retiming
from accelopt.profiling.worker.protocol import KernelResult

JOIN_TIMEOUT_S = 30.0  # the dispatching thread finishing its round on close


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # tries of one job (on different actors where possible)
    job_timeout_s: float = 3600.0  # a job unanswered this long: its actor is retired
    start_timeout_s: float = 120.0  # work waiting and no device actor ready this long: give up
    probe_every_s: float = 5.0  # probe the head this often while there is work
    lost_after_s: float = 20.0  # the head unreachable this long: the cluster is lost
    poll_s: float = 0.2  # longest wait on Ray before looking at new jobs and deadlines


@dataclass(frozen=True)
class RetimeJob:
    """A re-timing session: ``kernels`` timed interleaved on one device (``session.py``)."""

    kernels: tuple[Kernel, ...]
    problem: Problem
    workload: str


@dataclass(frozen=True)
class RaceJob:
    """An evaluation whose timing stops early once the kernel is clearly slower than
    ``race_s`` (a search's candidate racing its parent: ``Evaluation.raced``)."""

    job: Job
    race_s: float


Work = Job | RetimeJob | RaceJob  # what an actor is given: an evaluation (raced or not) or a
# re-timing session
Answer = Evaluation | Retiming  # ... and what it answers


class ActorLost(Exception):
    """The actor holding a job died or stopped answering: the job may run elsewhere."""


class JobFailed(Exception):
    """The job raised inside its actor (a harness fault): running it elsewhere would too."""


class Fleet(Protocol):
    """The device actors as the dispatcher sees them: Ray's, or a fake in the unit tests."""

    last_error: str  # why the last actor was lost or could not start

    def ready(self) -> list[str]:
        """Actors ready for work (advancing those still starting). Raises ClusterLostError."""
        ...

    def starting(self) -> int: ...

    def submit(self, actor: str, job: Work) -> Hashable: ...

    def wait(self, tickets: list[Hashable], timeout: float) -> list[Hashable]:
        """The tickets whose answer is in (waits at most ``timeout`` for the first)."""
        ...

    def result(self, ticket: Hashable) -> Answer:
        """The answer; raises ActorLost, JobFailed or ClusterLostError."""
        ...

    def retire(self, actor: str, reason: str) -> None:
        """Stop using ``actor`` (kill it) and start a replacement if the budget allows."""
        ...

    def alive(self) -> bool:
        """Whether the cluster's head answers."""
        ...

    def describe(self, actor: str) -> str: ...


Failure = Callable[[Work, str], Answer]


@dataclass
class _Task:
    job: Work
    future: Future[tuple[Answer, bool]]
    attempts: int = 0
    tried: set[str] = field(default_factory=set)
    actor: str = ""
    started: float = 0.0


class Dispatcher:
    """Hands jobs to actors (``slots`` at a time each), collects answers, retries lost jobs.

    ``submit`` may be called from any thread; one thread calls ``step`` (``start`` makes it).
    Every submitted future completes: with ``(answer, measured)`` (an ``Evaluation`` for a
    ``Job``, a ``Retiming`` for a ``RetimeJob``), or ``ClusterLostError``.
    """

    def __init__(
        self,
        fleet: Fleet,
        policy: RetryPolicy,
        slots: int,
        failure: Failure,
        where: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet, self.policy, self.slots = fleet, policy, slots
        self.failure, self.where, self.clock = failure, where, clock
        self._inbox: queue.SimpleQueue[_Task] = queue.SimpleQueue()
        self._pending: deque[_Task] = deque()
        self._inflight: dict[Hashable, _Task] = {}
        self._lock = threading.Lock()
        self._broken: ClusterLostError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._no_actor_since: float | None = None
        self._unreachable_since: float | None = None
        self._next_probe = 0.0
        self.retried = 0  # jobs queued again after their actor was lost

    @property
    def broken(self) -> ClusterLostError | None:
        return self._broken

    def submit(self, job: Work) -> Future[tuple[Answer, bool]]:
        future: Future[tuple[Answer, bool]] = Future()
        with self._lock:
            if self._broken is not None:
                future.set_exception(self._broken)
            else:
                self._inbox.put(_Task(job, future))
        return future

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="accelopt-ray", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=JOIN_TIMEOUT_S)
        if self._broken is None:
            self._break(ClusterLostError("the ray profiler was closed"))

    def _loop(self) -> None:
        try:
            while not self._stop.is_set() and self._broken is None:
                self.step()
        except BaseException as exc:  # a fault here must not leave a caller waiting
            self._break(ClusterLostError(f"the ray profiler failed: {exc!r}"))

    # -- one round ----------------------------------------------------------------------------
    def step(self) -> None:
        """Take new jobs, hand them out, collect answers, enforce deadlines: one round."""
        self._take_inbox(block=not (self._pending or self._inflight))
        if not (self._pending or self._inflight):
            return
        try:
            self._probe(self.clock())
            ready = self.fleet.ready()
            self._watch(ready, self.clock())
            self._assign(ready)
            if self._inflight:
                for ticket in self.fleet.wait(list(self._inflight), self.policy.poll_s):
                    self._collect(ticket)
            elif self._pending:
                self._stop.wait(self.policy.poll_s)  # no actor ready yet
            self._expire(self.clock())
        except ClusterLostError as lost:
            self._break(lost)

    def _take_inbox(self, block: bool) -> None:
        try:
            if block:
                self._pending.append(self._inbox.get(timeout=self.policy.poll_s))
            while True:
                self._pending.append(self._inbox.get_nowait())
        except queue.Empty:
            pass

    def _probe(self, now: float) -> None:
        if now < self._next_probe:
            return
        self._next_probe = now + self.policy.probe_every_s
        if self.fleet.alive():
            self._unreachable_since = None
            return
        if self._unreachable_since is None:
            self._unreachable_since = now
        if now - self._unreachable_since >= self.policy.lost_after_s:
            raise ClusterLostError(
                f"lost {self.where}: its head has not answered for "
                f"{now - self._unreachable_since:.0f} s; check it and run the command again",
                unreachable=True,
            )

    def _watch(self, ready: list[str], now: float) -> None:
        """Work waits and no actor is ready: wait for one to start, within ``start_timeout_s``."""
        if ready or not self._pending:
            self._no_actor_since = None
            return
        if self.fleet.starting() == 0 and not self._inflight:
            raise ClusterLostError(
                f"no device actor is left on {self.where} "
                f"({self.fleet.last_error or 'none could start'})"
            )
        if self._no_actor_since is None:
            self._no_actor_since = now
        elif now - self._no_actor_since >= self.policy.start_timeout_s:
            why = self.fleet.last_error or "its devices are all in use, or its workers are gone"
            raise ClusterLostError(
                f"no device actor started on {self.where} within "
                f"{self.policy.start_timeout_s:.0f} s ({why})"
            )

    def _assign(self, ready: list[str]) -> None:
        load = Counter(task.actor for task in self._inflight.values())
        free = {actor: self.slots - load[actor] for actor in ready if load[actor] < self.slots}
        while self._pending and free:
            task = self._pending.popleft()
            # An actor that has not lost this job yet, else the least busy.
            actor = min(free, key=lambda a: (a in task.tried, -free[a]))
            ticket = self.fleet.submit(actor, task.job)
            task.actor, task.started = actor, self.clock()
            task.attempts += 1
            task.tried.add(actor)
            self._inflight[ticket] = task
            free[actor] -= 1
            if free[actor] == 0:
                del free[actor]

    def _collect(self, ticket: Hashable) -> None:
        task = self._inflight.pop(ticket)
        try:
            evaluation = self.fleet.result(ticket)
        except ActorLost as lost:
            reason = f"{self.fleet.describe(task.actor)}: {lost}"
            self.fleet.retire(task.actor, reason)
            self._retry(task, reason)
        except JobFailed as failed:
            self._finish(task, self.failure(task.job, f"the evaluation failed: {failed}"), False)
        else:
            self._finish(task, evaluation, True)

    def _expire(self, now: float) -> None:
        for ticket, task in list(self._inflight.items()):
            if now - task.started < self.policy.job_timeout_s:
                continue
            del self._inflight[ticket]
            reason = (
                f"{self.fleet.describe(task.actor)} gave no answer within "
                f"{self.policy.job_timeout_s:.0f} s"
            )
            self.fleet.retire(task.actor, reason)  # its other jobs come back as ActorLost
            self._retry(task, reason)

    def _retry(self, task: _Task, reason: str) -> None:
        if task.attempts >= self.policy.max_attempts:
            error = f"the job was lost {task.attempts} times; last: {reason}"
            self._finish(task, self.failure(task.job, error), False)
        else:
            self.retried += 1
            self._pending.appendleft(task)

    @staticmethod
    def _finish(task: _Task, answer: Answer, measured: bool) -> None:
        if not task.future.done():
            task.future.set_result((answer, measured))

    def _break(self, lost: ClusterLostError) -> None:
        with self._lock:
            self._broken = lost
        self._take_inbox(block=False)
        tasks = [*self._pending, *self._inflight.values()]
        self._pending.clear()
        self._inflight.clear()
        for task in tasks:
            if not task.future.done():
                task.future.set_exception(lost)


def service_failure(job: Job, reason: str, hardware: HardwareSpec, threads: int) -> Evaluation:
    """The evaluation of a job the service could not run: a CRASH that says why."""
    error = could_not(f"profiling service: {reason}")
    failure = KernelResult(status=Status.CRASH, error=error, service=error)
    return build_evaluation(job, hardware, threads, failure)


def service_retiming_failure(
    job: RetimeJob, reason: str, hardware: HardwareSpec, threads: int
) -> Retiming:
    """The answer to a session the service could not run: every kernel a CRASH that says why."""
    evaluations = tuple(
        service_failure((k, job.problem, job.workload), reason, hardware, threads)
        for k in job.kernels
    )
    nothing = (None,) * len(job.kernels)
    return Retiming(evaluations, nothing, nothing, rounds=0)


def failure_of(work: Work, reason: str, hardware: HardwareSpec, threads: int) -> Answer:
    """The answer to ``work`` the service could not run (the ``Failure`` of a ``Dispatcher``)."""
    if isinstance(work, RetimeJob):
        return service_retiming_failure(work, reason, hardware, threads)
    if isinstance(work, RaceJob):
        return service_failure(work.job, reason, hardware, threads)
    return service_failure(work, reason, hardware, threads)
