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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt.backends.base import MEMORY_FAULTS
from accelopt.backends.status import Status
from accelopt.profiling.protocol import Channel, ProtocolError
from accelopt.profiling.worker import LOG_NAME, read_log

STARTUP_TIMEOUT_S = 60.0

_PHASES = {
    "start": "starting the evaluation",
    "compile": "compilation",
    "load": "loading the kernel",
    "reference": "the reference computation",
    "call": "the kernel call",
    "lock": "waiting for the device",
    "verify": "checking the timed outputs",
}
TIMING = "timing"  # the detail of the timed calls' phase


@dataclass(frozen=True)
class Deadlines:
    """Seconds each phase may take before the worker is killed (None: no limit).

    A timed call's deadline follows the kernel's own slowest correctness call, as the parent saw
    it (``timing_factor`` times it, at least ``timing_floor_s``); before any call has been seen,
    ``call_s`` (scaled from the roofline) applies. In a re-timing session (one request, several
    kernels checked one after another, then timed interleaved) it is the slowest correctness call
    of any of its kernels: the ``CallClock`` spans the request.
    """

    compile_s: float
    call_s: float
    reference_s: float
    start_s: float = 60.0
    lock_s: float = 900.0
    timing_factor: float = 50.0
    timing_floor_s: float = 10.0

    def for_phase(
        self, phase: str, detail: str = "", slowest_call_s: float | None = None
    ) -> float | None:
        if phase == "call" and detail == TIMING and slowest_call_s is not None:
            return max(self.timing_floor_s, self.timing_factor * slowest_call_s)
        return {
            "start": self.start_s,
            "compile": self.compile_s,
            "load": self.call_s,
            "reference": self.reference_s,
            "verify": self.reference_s,
            "call": self.call_s,
            # Others' timings hold it, each under its own deadline; a holder that never lets go
            # (a process that inherited the lock) must not block every evaluation forever.
            "lock": self.lock_s,
        }.get(phase, self.start_s)


class CallClock:
    """The slowest correctness call of an evaluation, timed by the parent from the worker's phase
    messages (a call lasts from its ``call`` message to the next message)."""

    def __init__(self) -> None:
        self.slowest_s: float | None = None
        self._started: float | None = None

    def saw(self, phase: str, detail: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._started is not None:
            took = now - self._started
            self.slowest_s = took if self.slowest_s is None else max(self.slowest_s, took)
        checking = phase == "call" and detail != TIMING
        self._started = now if checking else None


class WorkerStartError(RuntimeError):
    pass


class WorkerFailed(Exception):
    def __init__(self, status: Status, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


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
        self.evaluations = 0
        self.scratch = Path()  # known once the worker says hello
        hello = self._hello()
        self.network_isolated = bool(hello.get("network_isolated"))
        self.scratch = Path(str(hello.get("scratch", "")))

    def _hello(self) -> dict[str, Any]:
        try:
            hello = self.channel.recv(STARTUP_TIMEOUT_S)
        except (EOFError, ProtocolError):
            hello = None
        if hello is None or hello.get("type") != "hello":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self._stderr.seek(0)
            tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-3:]
            self.kill()
            raise WorkerStartError("a worker process failed to start: " + " | ".join(tail))
        return hello

    def evaluate(self, request: dict[str, Any], deadlines: Deadlines) -> dict[str, Any]:
        """Run one request; raises WorkerFailed (and leaves the worker dead) on crash or timeout."""
        self.evaluations += 1
        phase, detail = "start", ""
        calls = CallClock()
        try:
            self.channel.send(request)
            while True:
                limit = deadlines.for_phase(phase, detail, calls.slowest_s)
                message = self.channel.recv(limit)
                if message is None:
                    raise WorkerFailed(Status.TIMEOUT, self._timeout_error(phase, detail, limit))
                if message.get("type") == "result":
                    return message
                phase, detail = str(message.get("phase", phase)), str(message.get("detail", ""))
                calls.saw(phase, detail)
        except (EOFError, ProtocolError, OSError) as exc:
            returncode = self._wait_exit()
            where = _PHASES.get(phase, phase) + (f" ({detail})" if detail else "")
            who = f"the worker {exc}" if returncode is None else describe_death(returncode, phase)
            raise WorkerFailed(Status.CRASH, f"{who} during {where}") from None

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

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.channel.close()
        self._stderr.close()
        if self.scratch.name.startswith("accelopt-worker-"):
            shutil.rmtree(self.scratch, ignore_errors=True)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.channel.send({"type": "shutdown"})
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
        if keep and worker.evaluations < self.recycle_after:
            with self._lock:
                self._idle.append(worker)
        else:
            worker.shutdown()

    def run(self, request: dict[str, Any], deadlines: Deadlines, log_cap: int) -> dict[str, Any]:
        with self._slots:
            try:
                worker = self._checkout()
            except WorkerStartError as exc:
                return {"status": str(Status.CRASH), "error": str(exc)}
            try:
                result = worker.evaluate(request, deadlines)
            except WorkerFailed as failure:
                log = worker.log(log_cap)
                worker.kill()
                with self._lock:
                    self.replaced += 1
                return {"status": str(failure.status), "error": failure.error, "log": log,
                        "network_isolated": worker.network_isolated}  # fmt: skip
            # A kernel that failed may have scribbled over the worker's memory: start afresh.
            tainted = (
                result.get("kernel_ran")
                and result.get("status") is not None
                and result.get("kernel_process") != "separate"
            )
            self._checkin(worker, keep=not tainted)
            return {**result, "network_isolated": worker.network_isolated}

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            starting, self._starting = self._starting, []
        for future in starting:
            with contextlib.suppress(WorkerStartError):
                idle.append(future.result())
        for worker in idle:
            worker.shutdown()
