"""The ``ray`` profiler: one actor per device of a Ray cluster, each owning an ``Evaluator``.

**Devices are Ray resources.** A node started with ``accelopt worker --devices cpu:N`` declares
``N`` units of the resource ``accelopt_cpu``; every device actor asks for one unit, so a device has
exactly one actor. Inside its actor the device's ``Evaluator`` builds and checks kernels
concurrently in its isolated worker pool (``workers`` processes, the device lock held shared) and
times one kernel at a time (the device lock held exclusive, shared by every process of the
machine, so two actors declared on one machine never time at once either). The actor itself never
runs kernel code: its workers do, as on a single machine.

**Fault tolerance** lives in the ``Dispatcher``, written against the small ``Fleet`` protocol so
that it is tested without Ray:

- a job whose actor dies (killed, its node lost, no answer within ``job_timeout_s``) is queued
  again, for another actor where there is one, up to ``max_attempts`` tries in all; then it is a
  ``CRASH`` evaluation saying why, which is not cached. A dead actor is replaced, within a budget;
- every Ray wait has a timeout, and the cluster's head is probed (a TCP connection to its GCS port)
  every ``probe_every_s`` while there is work. When it has not answered for ``lost_after_s``, or no
  device actor is left, every unfinished job fails with one ``ClusterLostError``, after the
  results already received: the caller never hangs and loses nothing it was given.

A re-timing session (``RayRunner.retime``, ``session.py``) is one job like the others: it goes to
one device actor, whose ``Evaluator`` times its kernels interleaved in one worker; a lost actor is
retried like any job and, when retries run out, every kernel gets a ``CRASH`` naming the reason.

Without an address a local Ray instance is started (devices: ``actors``, default 1) and shut down
on close; if this process is already connected to Ray (a test, a notebook), that connection is
used and left open. Ray is imported only when a ``RayRunner`` is made: the rest of this module is
plain Python.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from typing import Any, Protocol

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.problems.shipping import ProblemRef, problem_ref, resolve_ref
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import ClusterLostError, Job, Outcome
from accelopt.profiling.service import build_evaluation
from accelopt.profiling.session import Retiming

GET_TIMEOUT_S = 30.0  # fetching a result Ray already reported ready
PROBE_TIMEOUT_S = 3.0  # one TCP connection to the head
CLOSE_TIMEOUT_S = 10.0  # actors shutting their worker pools down


def gpus_per_actor(backend: str) -> int:
    """GPUs a device actor asks Ray for: one per triton actor on a GPU (Ray then gives each actor
    its own ``CUDA_VISIBLE_DEVICES``), none for CPU devices or Triton's CPU interpreter."""
    from accelopt.backends.triton.environment import interpreting

    return 1 if backend == "triton" and not interpreting() else 0


def device_resource(backend: str) -> str:
    """The Ray resource a node declares per device of ``backend`` (``accelopt_cpu``)."""
    return f"accelopt_{backend}"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # tries of one job (on different actors where possible)
    job_timeout_s: float = 3600.0  # a job unanswered this long: its actor is retired
    start_timeout_s: float = 120.0  # work waiting and no device actor ready this long: give up
    probe_every_s: float = 5.0  # probe the head this often while there is work
    lost_after_s: float = 20.0  # the head unreachable this long: the cluster is lost
    poll_s: float = 0.2  # longest wait on Ray before looking at new jobs and deadlines


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # HOST:PORT of a head, or "auto"; None: a local instance
    actors: int | None = None  # device actors; None: one per declared device (local: 1)
    temp_dir: str | None = None  # Ray's session files, for a local instance
    restarts: int | None = None  # replacements of dead actors in all; None: 2 per actor + 2
    policy: RetryPolicy = field(default_factory=RetryPolicy)


# -- the dispatcher (no Ray) -------------------------------------------------------------------


@dataclass(frozen=True)
class RetimeJob:
    """A re-timing session: ``kernels`` timed interleaved on one device (``session.py``)."""

    kernels: tuple[Kernel, ...]
    problem: Problem
    workload: str


Work = Job | RetimeJob  # what an actor is given: an evaluation or a re-timing session
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
            self._thread.join(timeout=GET_TIMEOUT_S)
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
    kernel, problem, workload = job
    failure = {"status": Status.CRASH.value, "error": f"profiling service: {reason}"}
    return build_evaluation(kernel, problem, workload, hardware, threads, failure)


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
    if isinstance(work, RetimeJob):
        return service_retiming_failure(work, reason, hardware, threads)
    return service_failure(work, reason, hardware, threads)


# -- the actor ---------------------------------------------------------------------------------


class DeviceActor:
    """One device: an ``Evaluator`` (and its isolated worker pool) on the node that holds it.

    Made a Ray actor by ``RayFleet`` (threaded: ``workers`` evaluations at once, plus one thread
    for ``describe``/``close``). Its arguments and answers are accelopt's own records.
    """

    def __init__(self, hardware_json: str, config_json: str) -> None:
        from accelopt.profiling.service import Evaluator

        self.hardware = HardwareSpec.model_validate_json(hardware_json)
        self.evaluator = Evaluator(self.hardware, EvalConfig.model_validate_json(config_json))

    def describe(self) -> dict[str, Any]:
        from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name

        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": f"{self.hardware.backend}:{cpu_model_name()}",
            "cores": available_cpus(),
        }

    def evaluate(
        self, source: str, backend: str, name: str, problem: ProblemRef, workload: str
    ) -> Evaluation:
        kernel = Kernel(source, backend, name)
        return self.evaluator.evaluate(kernel, resolve_ref(problem), workload)

    def retime(
        self, sources: list[tuple[str, str]], backend: str, problem: ProblemRef, workload: str
    ) -> Retiming:
        """``sources``: (source, name) per kernel, the reference first."""
        kernels = [Kernel(source, backend, name) for source, name in sources]
        return self.evaluator.retime(kernels, resolve_ref(problem), workload)

    def close(self) -> None:
        self.evaluator.close()


# -- Ray ---------------------------------------------------------------------------------------


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(
            "the ray profiler needs Ray: pip install 'accelopt[ray]' (or use --profiler local)"
        ) from None
    return ray


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(\w*(?:Error|Exception)\w*): (.+)")


def _brief(exc: BaseException) -> str:
    """The telling line of a Ray error (they run to a screenful): the exception the actor
    raised (the last ``Name: message`` of its traceback), else why Ray says it died."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    for line in reversed(lines):
        raised = _RAISED.match(line)
        if raised:
            return f"{raised.group(1)}: {raised.group(2)}"
        if line.startswith("The actor is dead because"):
            return line
    return lines[0] if lines else type(exc).__name__


def _tcp_target(address: str) -> tuple[str, int] | None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def _reachable(target: tuple[str, int] | None) -> bool:
    if target is None:
        return True
    try:
        with socket.create_connection(target, timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


@dataclass
class _Actor:
    handle: Any
    ready_ref: Any
    info: dict[str, Any] | None = None
    dead: bool = False


class RayFleet:
    """The device actors on a Ray cluster (the ``Fleet`` the dispatcher drives)."""

    def __init__(
        self,
        ray: Any,
        hardware: HardwareSpec,
        config: EvalConfig,
        count: int,
        restarts: int,
        probe_target: tuple[str, int] | None,
    ) -> None:
        self.ray = ray
        self.actor_class = ray.remote(DeviceActor).options(
            num_cpus=0,
            num_gpus=gpus_per_actor(hardware.backend),  # Ray then sets CUDA_VISIBLE_DEVICES
            resources={device_resource(hardware.backend): 1},
            max_concurrency=config.workers + 1,
            max_restarts=0,
            max_task_retries=0,
        )
        self.args = (hardware.model_dump_json(), config.model_dump_json())
        self.actors: dict[str, _Actor] = {}
        self.restarts_left = restarts
        self.probe_target = probe_target
        self.last_error = ""
        self.retired = 0  # actors lost or killed since the start
        self.device: tuple[str, int] | None = None  # (device, cores) of the first ready actor
        self._serial = 0
        for _ in range(count):
            self._start()

    def _start(self) -> None:
        self._serial += 1
        handle = self.actor_class.remote(*self.args)
        self.actors[f"actor-{self._serial}"] = _Actor(handle, handle.describe.remote())

    def handles(self) -> dict[str, Any]:
        """Ready, live actors by id (for tests and tools)."""
        return {i: a.handle for i, a in self.actors.items() if a.info is not None and not a.dead}

    def ready(self) -> list[str]:
        starting = {a.ready_ref: i for i, a in self.actors.items() if a.info is None and not a.dead}
        if starting:
            done, _ = self._guard(
                lambda: self.ray.wait(list(starting), num_returns=len(starting), timeout=0)
            )
            for ref in done:
                self._started(starting[ref], ref)
        return list(self.handles())

    def _started(self, actor: str, ref: Any) -> None:
        try:
            info = self.ray.get(ref, timeout=GET_TIMEOUT_S)
        except self.ray.exceptions.RayError as exc:
            self.retire(actor, f"a device actor failed to start: {_brief(exc)}")
            return
        device = (str(info["device"]), int(info["cores"]))
        if self.device is None:
            self.device = device
        elif device != self.device:
            raise ClusterLostError(
                f"the cluster's devices differ ({info['host']}: {device[0]} with {device[1]} "
                f"cores; others: {self.device[0]} with {self.device[1]}): a search compares "
                "timings, so give it devices of one kind"
            )
        self.actors[actor].info = info

    def starting(self) -> int:
        return sum(1 for a in self.actors.values() if a.info is None and not a.dead)

    def submit(self, actor: str, job: Work) -> Hashable:
        handle = self.actors[actor].handle
        if isinstance(job, RetimeJob):
            sources = [(k.source, k.name) for k in job.kernels]
            backend = job.kernels[0].backend
            ref = problem_ref(job.problem)
            return self._guard(lambda: handle.retime.remote(sources, backend, ref, job.workload))
        kernel, problem, workload = job
        return self._guard(
            lambda: handle.evaluate.remote(
                kernel.source, kernel.backend, kernel.name, problem_ref(problem), workload
            )
        )

    def wait(self, tickets: list[Hashable], timeout: float) -> list[Hashable]:
        def both() -> list[Hashable]:
            done, rest = self.ray.wait(tickets, num_returns=1, timeout=timeout)
            if done and rest:
                done += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            return done

        return self._guard(both)

    def result(self, ticket: Hashable) -> Answer:
        errors = self.ray.exceptions
        try:
            value = self.ray.get(ticket, timeout=GET_TIMEOUT_S)
        except (errors.RaySystemError, errors.LocalRayletDiedError) as exc:
            raise ClusterLostError(
                f"lost the Ray cluster: {_brief(exc)}", unreachable=True
            ) from None
        except errors.RayTaskError as exc:
            raise JobFailed(_brief(exc)) from None
        except errors.RayError as exc:  # the actor or its node died, or the answer was lost
            raise ActorLost(_brief(exc)) from None
        if not isinstance(value, Evaluation | Retiming):
            raise JobFailed(f"the actor answered a {type(value).__name__}")
        return value

    def retire(self, actor: str, reason: str) -> None:
        entry = self.actors.get(actor)
        if entry is None or entry.dead:
            return
        entry.dead = True
        self.retired += 1
        self.last_error = reason
        with contextlib.suppress(Exception):
            self.ray.kill(entry.handle, no_restart=True)
        if self.restarts_left > 0:
            self.restarts_left -= 1
            self._start()

    def alive(self) -> bool:
        return _reachable(self.probe_target)

    def describe(self, actor: str) -> str:
        info = self.actors[actor].info if actor in self.actors else None
        return f"the device actor on {info['host']} (pid {info['pid']})" if info else actor

    def _guard(self, call: Callable[[], Any]) -> Any:
        """A Ray call outside a task's own failure: any error means the cluster is gone."""
        try:
            return call()
        except (ConnectionError, OSError, self.ray.exceptions.RayError) as exc:
            raise ClusterLostError(
                f"lost the Ray cluster: {_brief(exc)}", unreachable=True
            ) from None

    def close(self, graceful: bool, lost: bool = False) -> None:
        """Ask the live actors to close (``graceful``), then kill them. Not on a ``lost``
        cluster: its actors went with its control store, and ``ray.kill`` would wait for that
        store until Ray aborts this process (60 s), losing the one-sentence error."""
        live = [a.handle for a in self.actors.values() if not a.dead]
        if lost:
            return
        if graceful and live:
            with contextlib.suppress(Exception):
                refs = [h.close.remote() for h in live]
                self.ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
        for handle in live:
            with contextlib.suppress(Exception):
                self.ray.kill(handle, no_restart=True)


@dataclass
class _Session:
    """This process's connection to Ray: made here (and closed here) or found already open."""

    ray: Any
    owned: bool
    where: str
    probe_target: tuple[str, int] | None

    @classmethod
    def open(cls, ray: Any, options: RayOptions, resource: str) -> _Session:
        if options.address is None:
            if ray.is_initialized():
                return cls._here(ray, owned=False, where="this process's Ray instance")
            # Ray's usage statistics report to its servers unless turned off; accelopt does not
            # opt anyone in (an explicit RAY_USAGE_STATS_ENABLED still wins).
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            ray.init(
                address="local",  # a new instance, even where RAY_ADDRESS names a cluster
                include_dashboard=False,
                num_cpus=0,  # device actors ask for devices, not Ray CPUs
                resources={resource: options.actors or 1},
                _temp_dir=options.temp_dir,
                _node_ip_address="127.0.0.1",
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
            return cls._here(ray, owned=True, where="the local Ray instance")
        if ray.is_initialized():
            return cls._here(ray, owned=False, where=f"the Ray cluster at {options.address}")
        target = _tcp_target(options.address)
        if not _reachable(target):
            raise UserError(
                f"no Ray head answers at {options.address}: start one there with "
                "`accelopt worker --head`, or check the address and port"
            )
        try:
            ray.init(address=options.address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:
            raise UserError(
                f"cannot join the Ray cluster at {options.address}: {_brief(exc)}"
            ) from None
        return cls(ray, True, f"the Ray cluster at {options.address}", target or cls._gcs(ray))

    @classmethod
    def _here(cls, ray: Any, owned: bool, where: str) -> _Session:
        return cls(ray, owned, where, cls._gcs(ray))

    @staticmethod
    def _gcs(ray: Any) -> tuple[str, int] | None:
        address = getattr(ray.get_runtime_context(), "gcs_address", None)
        return _tcp_target(address) if address else None

    def devices(self, resource: str) -> int:
        return int(self.ray.cluster_resources().get(resource, 0))

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


class RayRunner:
    """The ``Runner`` behind ``make_profiler("ray", ...)``."""

    def __init__(self, hardware: HardwareSpec, config: EvalConfig, options: RayOptions) -> None:
        ray = _import_ray()
        self.options = options
        self.threads = config.threads or hardware.cores
        resource = device_resource(hardware.backend)
        self.session = _Session.open(ray, options, resource)
        self.fleet: RayFleet | None = None
        try:
            declared = self.session.devices(resource)
            count = options.actors or declared
            if declared < 1 or count < 1:
                raise UserError(
                    f"{self.session.where} declares no {hardware.backend} "
                    f"device: start its workers with `accelopt worker --devices "
                    f"{hardware.backend}:1`"
                )
            restarts = options.restarts if options.restarts is not None else 2 * count + 2
            self.fleet = RayFleet(ray, hardware, config, count, restarts, self.session.probe_target)

            def failure(job: Work, reason: str) -> Answer:
                return failure_of(job, reason, hardware, self.threads)

            self.dispatcher = Dispatcher(
                self.fleet, options.policy, config.workers, failure, self.session.where
            )
            self.capacity = count * config.workers
            self.wait_ready(count, options.policy.start_timeout_s)
            self._check_device(hardware)
            self.dispatcher.start()
        except BaseException:
            if self.fleet is not None:
                self.fleet.close(graceful=False)
            self.session.close()
            raise

    def wait_ready(self, count: int, timeout: float) -> int:
        """Wait until ``count`` actors are ready (or, after 10 s, at least one); how many are.
        Only before the dispatcher starts: then it alone drives the fleet."""
        assert self.fleet is not None
        start = time.monotonic()
        while True:
            ready = len(self.fleet.ready())
            waited = time.monotonic() - start
            if ready >= count or (ready and waited >= 10.0):
                return ready
            if not self.fleet.starting():
                raise UserError(
                    f"no device actor could start on {self.session.where} ({self.fleet.last_error})"
                )
            if waited >= timeout:
                raise UserError(
                    f"no device actor started on {self.session.where} within "
                    f"{waited:.0f} s ({self.fleet.last_error or 'its devices are all in use'})"
                )
            time.sleep(0.05)

    def _check_device(self, hardware: HardwareSpec) -> None:
        """Ceilings measured on this machine score kernels timed on the cluster's devices: they
        must be the same kind of device (a spec from elsewhere, e.g. a datasheet, is trusted)."""
        from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name

        assert self.fleet is not None
        here = (f"{hardware.backend}:{cpu_model_name()}", available_cpus())
        device = self.fleet.device
        if hardware.name == here[0] and device is not None and device != here:
            raise UserError(
                f"the cluster's devices ({device[0]}, {device[1]} cores) are not this machine's "
                f"({here[0]}, {here[1]} cores), whose ceilings would score them: run the "
                "command on a machine of the cluster's kind, e.g. its head"
            )

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        futures = {self.dispatcher.submit(job): i for i, job in enumerate(jobs)}
        lost: ClusterLostError | None = None
        for future in as_completed(futures):
            try:
                evaluation, measured = future.result()
            except ClusterLostError as exc:
                lost = lost or exc
                continue
            assert isinstance(evaluation, Evaluation)
            yield Outcome(futures[future], evaluation, measured)
        if lost is not None:
            raise lost

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """One session on one device actor; raises ClusterLostError when the cluster is lost."""
        if not kernels:
            raise ValueError("a re-timing session needs at least one kernel")
        answer, _ = self.dispatcher.submit(RetimeJob(tuple(kernels), problem, workload)).result()
        assert isinstance(answer, Retiming)
        return answer

    def close(self) -> None:
        lost = self.dispatcher.broken  # a lost cluster: no point asking its actors to close
        self.dispatcher.close()
        if self.fleet is not None:
            self.fleet.close(graceful=lost is None, lost=lost is not None and lost.unreachable)
        self.session.close()
