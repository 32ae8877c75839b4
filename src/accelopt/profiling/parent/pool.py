"""The parent side of isolation: a persistent pool of worker processes.

A worker that dies or runs past a phase's deadline is killed (its whole process group) and
replaced; its outcome becomes a CRASH or TIMEOUT result. The parent itself never runs kernel code.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from accelopt.backends.base import MEMORY_FAULTS
from accelopt.backends.status import Status
from accelopt.profiling.parent.deadlines import WAIT, CallClock, Deadlines
from accelopt.profiling.worker.protocol import (
    LOG_NAME,
    Answer,
    Channel,
    EvaluateRequest,
    EvaluationAnswer,
    Hello,
    KernelResult,
    MalformedAnswerError,
    Phase,
    ProtocolError,
    RetimeRequest,
    SessionAnswer,
    Shutdown,
    parse_answer,
    read_log,
)

Request = EvaluateRequest | RetimeRequest

STARTUP_TIMEOUT_S = 60.0

_PHASES = {
    "start": "starting the evaluation",
    "compile": "compilation",
    "load": "loading the kernel",
    "reference": "the reference computation",
    "call": "the kernel call",
    "check": "checking the kernel's outputs",
    "prepare": "filling the timed calls' buffers",
    "lock": "waiting for the device",
    "verify": "checking the timed outputs",
}


class WorkerStartError(RuntimeError):
    pass


class WorkerFailed(Exception):
    def __init__(self, status: Status, error: str, service: str = "") -> None:
        super().__init__(error)
        self.status, self.error, self.service = status, error, service


# Signals that end a worker only from outside it: no kernel can send one (kernels run in their
# own processes, which may signal nothing else), and the pool kills only on a deadline (TIMEOUT).
# SIGKILL is also the kernel OOM killer's.
OUTSIDE_SIGNALS = frozenset(
    {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}
)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
            return f"died from {sig.name} ({signal.strsignal(sig) or 'signal'})"
        except ValueError:
            return f"died from signal {-returncode}"
    return f"exited with status {returncode}"


def describe_death(returncode: int, phase: str) -> str:
    """Who died and how: the kernel when a memory fault killed it during a call, else the worker."""
    if phase == "call" and returncode < 0 and -returncode in MEMORY_FAULTS:
        sig = signal.Signals(-returncode)
        return f"the kernel was killed by {sig.name} ({MEMORY_FAULTS[sig]})"
    return f"the worker {describe_exit(returncode)}"


WAITING_EVERY_S = 5.0  # a timing that waits for the machine says so this often, at most
_said_waiting = [0.0]


def _say_waiting(detail: str) -> None:
    """Tell the user, on stderr, that a timing waits for clean batches, and why."""
    now = time.monotonic()
    if now - _said_waiting[0] >= WAITING_EVERY_S:
        _said_waiting[0] = now
        print(f"accelopt: {detail}", file=sys.stderr, flush=True)


class WorkerProcess:
    def __init__(self, env: dict[str, str], lock_path: Path | None = None) -> None:
        parent_sock, child_sock = socket.socketpair()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "accelopt.profiling.worker", str(child_sock.fileno())]
            + ([str(lock_path)] if lock_path is not None else []),
            pass_fds=(child_sock.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        child_sock.close()
        self.channel = Channel(parent_sock)
        self.asked = 0
        self.scratch = Path()  # known once the worker says hello
        hello = self._hello()
        self.network_isolated = hello.network_isolated
        self.scratch = Path(hello.scratch)

    def _hello(self) -> Hello:
        try:
            message = self.channel.recv(STARTUP_TIMEOUT_S)
            hello = None if message is None else Hello.model_validate(message)
        except (EOFError, ProtocolError, ValueError):  # pydantic's ValidationError is a ValueError
            hello = None
        if hello is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self._stderr.seek(0)
            tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-3:]
            self.kill()
            raise WorkerStartError("a worker process failed to start: " + " | ".join(tail))
        return hello

    def ask(self, request: Request, deadlines: Deadlines) -> Answer:
        """The answer to one request; raises WorkerFailed (and leaves the worker dead) on a
        crash, a timeout or an answer that is not one to ``request``."""
        self.asked += 1
        phase, detail = "start", ""
        calls = CallClock()
        try:
            self.channel.send(request)
            while True:
                limit = deadlines.for_phase(phase, detail, calls.slowest_s)
                message = self.channel.recv(limit)
                if message is None:
                    raise WorkerFailed(Status.TIMEOUT, self._timeout_error(phase, detail, limit))
                if message.get("type") != "phase":  # the answer
                    return parse_answer(request, message)
                step = Phase.model_validate(message)
                phase, detail = step.phase, step.detail
                if phase == WAIT:
                    _say_waiting(detail)
                calls.saw(phase, detail)
        except MalformedAnswerError as exc:  # it is alive, and not to be believed
            raise WorkerFailed(Status.CRASH, str(exc)) from None
        except (EOFError, ProtocolError, OSError, ValueError) as exc:
            raise self._died(exc, phase, detail) from None

    def _died(self, exc: Exception, phase: str, detail: str) -> WorkerFailed:
        returncode = self._wait_exit()
        where = _PHASES.get(phase, phase) + (f" ({detail})" if detail else "")
        who = f"the worker {exc}" if returncode is None else describe_death(returncode, phase)
        error = f"{who} during {where}"
        outside = returncode is not None and -returncode in OUTSIDE_SIGNALS
        return WorkerFailed(Status.CRASH, error, service=error if outside else "")

    def _timeout_error(self, phase: str, detail: str, limit: float | None) -> str:
        where = _PHASES.get(phase, phase) + (f" ({detail})" if detail else "")
        return f"{where} ran past its {limit:.3g} s deadline; the worker was killed"

    def _wait_exit(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def log(self, cap: int) -> str:
        return read_log(self.scratch, cap) if (self.scratch / LOG_NAME).exists() else ""

    def kill_group(self) -> None:
        """SIGKILL the worker and everything it started; the thread asking it sees it die."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def kill(self) -> None:
        self.kill_group()
        self.proc.wait()
        self.channel.close()
        self._stderr.close()
        if self.scratch.name.startswith("accelopt-worker-"):
            shutil.rmtree(self.scratch, ignore_errors=True)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.channel.send(Shutdown())
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.kill()


class WorkerPool:
    """At most ``size`` workers at once; each request gets an idle worker or a new one."""

    def __init__(
        self,
        size: int,
        env: dict[str, str],
        recycle_after: int = 50,
        lock_path: Path | None = None,
    ) -> None:
        self.size = size
        self.lock_path = lock_path  # held shared while a worker starts up
        self.env = env
        self.recycle_after = recycle_after
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._busy: set[WorkerProcess] = set()  # answering a request now
        self._closed = False
        self._starting: list[Future[WorkerProcess]] = []
        self.replaced = 0  # workers killed after a crash or timeout

    def prestart(self, count: int) -> None:
        """Start up to ``count`` workers in the background (start-up is ~0.3 s of imports)."""
        executor = ThreadPoolExecutor(max_workers=max(1, count))
        with self._lock:
            for _ in range(min(count, self.size) - len(self._idle) - len(self._starting)):
                self._starting.append(executor.submit(WorkerProcess, self.env, self.lock_path))
        executor.shutdown(wait=False)

    def _checkout(self) -> WorkerProcess:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            pending = self._starting.pop() if self._starting else None
        return pending.result() if pending is not None else WorkerProcess(self.env, self.lock_path)

    def _checkin(self, worker: WorkerProcess, keep: bool) -> None:
        with self._lock:
            self._busy.discard(worker)
            keep = keep and worker.asked < self.recycle_after and not self._closed
            if keep:
                self._idle.append(worker)
        if not keep:
            worker.shutdown()

    def ask(self, request: Request, deadlines: Deadlines, log_cap: int) -> Answer:
        """The worker's answer to ``request``, each result stamped with whether the worker had
        no network; a worker that failed (could not start, crashed, ran past a deadline, answered
        nonsense, was killed by ``close``) answers the failure for every kernel of the request."""
        with self._slots:
            if self._closed:
                return failed_answer(request, _closed_failure())
            try:
                worker = self._checkout()
            except WorkerStartError as exc:
                failure = KernelResult(status=Status.CRASH, error=str(exc), service=str(exc))
                return failed_answer(request, failure)
            with self._lock:
                self._busy.add(worker)
                if self._closed:  # closed while this one started: answer nothing
                    worker.kill_group()
            try:
                answer = worker.ask(request, deadlines)
            except WorkerFailed as failure:
                log = worker.log(log_cap)
                worker.kill()
                with self._lock:
                    self._busy.discard(worker)
                    self.replaced += 1
                result = KernelResult(
                    status=failure.status, error=failure.error, log=log, service=failure.service
                )
                answer = failed_answer(request, result)
            else:
                results = answer_results(answer)
                # A kernel that failed may have scribbled over the worker's memory: start afresh.
                self._checkin(worker, keep=not any(r.taints for r in results))
            for result in answer_results(answer):
                result.network_isolated = worker.network_isolated
            return answer

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop every worker: the idle ones politely, the busy ones at once (SIGKILL), so that an
        interrupted run does not wait for the evaluations in flight. A killed worker answers a
        service failure (killed from outside), which is never cached as the kernel's verdict."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            starting, self._starting = self._starting, []
            busy = list(self._busy)
        for worker in busy:
            worker.kill_group()
        for future in starting:
            with contextlib.suppress(WorkerStartError):
                idle.append(future.result())
        for worker in idle:
            worker.shutdown()


def _closed_failure() -> KernelResult:
    why = "the evaluator was closed (the run was stopped) before this evaluation ran"
    return KernelResult(status=Status.CRASH, error=why, service=why)


def answer_results(answer: Answer) -> list[KernelResult]:
    """Every kernel's result in an answer (one for an evaluation)."""
    return [answer.result] if isinstance(answer, EvaluationAnswer) else answer.results


def failed_answer(request: Request, failure: KernelResult) -> Answer:
    """The answer to ``request`` when no worker gave one: ``failure`` for each of its kernels."""
    if isinstance(request, EvaluateRequest):
        return EvaluationAnswer(result=failure)
    count = len(request.kernels)
    results = [failure.model_copy() for _ in range(count)]
    return SessionAnswer(results=results, rounds=0, round_s=[[] for _ in range(count)])
