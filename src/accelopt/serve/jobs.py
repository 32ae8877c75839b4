"""Evaluations submitted over the API: a bounded queue in front of the profilers.

A submission is checked (problem, workload, backend, kernel size) before it is queued; it then
waits for a slot (as many run at once as the profiler has workers) and runs through the
profiler like any other evaluation: the workspace's evaluation cache answers a kernel already
measured, and a new result is written to it. When ``max_queued`` submissions already wait, a
new one is refused with ``QueueFull`` and an estimate of when to try again (``DrainRate``: from
how long evaluations took of late, not a fixed guess). Finished jobs are kept (the newest
``keep``) so that a client can fetch its result.

A Triton kernel is refused (403, ``TRITON_REFUSED``) before anything else is looked at, unless
the operator opted in (``settings.serve_triton``): it is Python, and until its containment has
been proven on a GPU host, running it would run any token holder's code as the server's user.
"""

from __future__ import annotations

import itertools
import math
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from accelopt import settings
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import needs_serve_opt_in
from accelopt.errors import UserError
from accelopt.problems.records import Problem
from accelopt.profiling.profiler import Profiler
from accelopt.views import evaluation_json

State = Literal["queued", "running", "done"]
MAX_SOURCE_BYTES = 1 << 20  # a kernel is a few KiB; the backends refuse more than this anyway
TRITON_REFUSED = (
    "this server does not run Triton kernels: a Triton kernel is Python, and until its "
    "containment has been proven on a GPU host serving it would let any token holder run code "
    "as the server's user; the operator can opt in with ACCELOPT_SERVE_TRITON=1"
)


class DrainRate:
    """How fast the queue drains, for ``Retry-After``: an exponentially weighted mean of how long
    the last evaluations took (a cached answer counts: it drains the queue too). The estimate for
    a client refused at ``position`` (the jobs ahead of it, itself included) is that mean times
    ``position / workers``, in whole seconds from 1 to 300. Before any evaluation has finished the
    mean is unknown, and the longest one running so far stands in for it (a lower bound)."""

    WEIGHT = 0.3  # of the newest duration: about the last five count
    MIN_S, MAX_S = 1, 300

    def __init__(self) -> None:
        self.mean_s: float | None = None

    def observe(self, seconds: float) -> None:
        if self.mean_s is None:
            self.mean_s = seconds
        else:
            self.mean_s += self.WEIGHT * (seconds - self.mean_s)

    def retry_after_s(self, position: int, workers: int, running_for_s: float = 0.0) -> int:
        typical = self.mean_s if self.mean_s is not None else running_for_s
        estimate = math.ceil(typical * position / max(1, workers))
        return max(self.MIN_S, min(self.MAX_S, estimate))


class QueueFull(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"the evaluation queue is full: try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Rejected(Exception):
    """A submission that cannot run (unknown problem or workload, a kernel too big...): one
    sentence, and the HTTP status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Job:
    id: str
    problem: str
    workload: str
    backend: str
    state: State = "queued"
    result: dict[str, Any] | None = None  # the evaluation, as `accelopt eval --json` writes it
    error: str = ""  # why the service could not evaluate it (the kernel's own errors: result)
    submitted_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    started: float | None = None  # time.monotonic() when it began to run

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "problem": self.problem,
            "workload": self.workload,
            "backend": self.backend,
            "result": self.result,
            "error": self.error,
        }


ProblemLoader = Callable[[str], Problem]
ProfilerFor = Callable[[str], Profiler]


class EvaluationJobs:
    """Submitted evaluations: checked, queued (at most ``max_queued`` waiting), run ``capacity``
    at a time through ``profiler_for(backend)``, kept for their clients."""

    def __init__(
        self,
        load: ProblemLoader,
        profiler_for: ProfilerFor,
        capacity: int,
        max_queued: int = 64,
        keep: int = 10_000,
    ) -> None:
        self.load = load
        self.profiler_for = profiler_for
        self.capacity = capacity
        self.max_queued = max_queued
        self.keep = keep
        self._executor = ThreadPoolExecutor(max_workers=capacity, thread_name_prefix="evaluate")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self.drain = DrainRate()  # how long evaluations take of late, for Retry-After
        self._seq = itertools.count(1)

    def submit(self, problem: str, workload: str, backend: str, source: str) -> Job:
        if needs_serve_opt_in(backend) and not settings.serve_triton():  # before anything is made
            raise Rejected(403, TRITON_REFUSED)
        if len(source.encode()) > MAX_SOURCE_BYTES:
            raise Rejected(413, f"the kernel is larger than {MAX_SOURCE_BYTES >> 10} KiB")
        if not source.strip():
            raise Rejected(400, "the kernel source is empty")
        loaded = self._problem(problem, workload)
        try:
            profiler = self.profiler_for(backend)
        except UserError as exc:
            raise Rejected(400, str(exc)) from None
        kernel = Kernel(source, backend, "api")
        with self._lock:
            waiting = sum(1 for j in self._jobs.values() if j.state == "queued")
            if waiting >= self.max_queued:
                raise QueueFull(self._retry_after(waiting))
            job = Job(f"{next(self._seq)}-{secrets.token_hex(6)}", problem, workload, backend)
            self._jobs[job.id] = job
            self._forget_old()
        self._executor.submit(self._run, job, profiler, kernel, loaded)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def counts(self) -> dict[str, int]:
        with self._lock:
            states = [j.state for j in self._jobs.values()]
        return {s: states.count(s) for s in ("queued", "running", "done")}

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _problem(self, name: str, workload: str) -> Problem:
        try:
            problem = self.load(name)
        except UserError as exc:
            raise Rejected(404, str(exc)) from None
        try:
            problem.workload(workload)
        except KeyError as exc:
            raise Rejected(400, str(exc.args[0])) from None
        return problem

    def _run(self, job: Job, profiler: Profiler, kernel: Kernel, problem: Problem) -> None:
        start = time.monotonic()
        with self._lock:
            job.state, job.started = "running", start
        result, error = None, ""
        try:
            evaluation = profiler.evaluate(kernel, problem, job.workload)
            result = evaluation_json(evaluation, profiler.hardware)  # what `accelopt eval` writes
        except UserError as exc:  # the profiling service itself (a lost cluster, say)
            error = str(exc)
        except Exception as exc:  # never leave a client polling a job that will not finish
            error = f"the evaluation failed in the service: {exc!r}"
        with self._lock:
            job.result, job.error = result, error
            job.state, job.finished_at = "done", time.time()
            self.drain.observe(time.monotonic() - start)

    def _retry_after(self, waiting: int) -> int:
        """Seconds until the queue ahead of a refused client has likely drained (the lock
        held)."""
        now = time.monotonic()
        running = [
            now - j.started
            for j in self._jobs.values()
            if j.state == "running" and j.started is not None
        ]
        return self.drain.retry_after_s(waiting + 1, self.capacity, max(running, default=0.0))

    def _forget_old(self) -> None:
        done = [k for k, j in self._jobs.items() if j.state == "done"]
        for key in done[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[key]


def token_from_file(path: Path) -> str:
    """The bearer token in ``path`` (its first line); a UserError when unreadable or empty."""
    try:
        token = path.read_text(encoding="utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the token file {str(path)!r} ({exc})") from None
    if not token or len(token[0]) < 16:
        raise UserError(
            f"the token file {str(path)!r} holds no token of at least 16 characters: write "
            "one there (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token[0].strip()


def new_token_file(path: Path) -> str:
    """A fresh random token written to ``path``, readable by this user only."""
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token
