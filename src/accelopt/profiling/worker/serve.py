"""A worker process: builds, checks and times untrusted kernels, one request at a time.

Started by the pool as ``python -m accelopt.profiling.worker FD``, which isolates it first (no
network, capped files: ``__main__``). It sends its stdout/stderr to a log file in its scratch
directory, then serves the typed requests of ``protocol.py`` on the socket FD. Before each step
that runs kernel code it tells the parent which phase it enters, so the parent can apply that
phase's deadline and name it when the worker dies.

A request is an evaluation (``harness.EvaluationRun``, answered by an ``EvaluationAnswer``) or a
re-timing session of several kernels (``retime.RetimeRun``, a ``SessionAnswer``: one result per
kernel, each with the session's log, since the kernels ran interleaved in one process).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from accelopt.profiling.worker.protocol import (
    LOG_NAME,
    Channel,
    EvaluationAnswer,
    Hello,
    RetimeRequest,
    SessionAnswer,
    Shutdown,
    parse_request,
    read_log,
)


def _redirect_output(scratch: Path) -> int:
    fd = os.open(scratch / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return 1


def _reset_log() -> None:
    os.ftruncate(1, 0)


def serve(channel: Channel, scratch: Path, network_isolated: bool, lock: Path | None) -> None:
    # After isolation: NumPy starts threads. Importing is ~0.3 s of CPU: done under the device
    # lock (shared), so a worker starting up never runs beside another worker's timing.
    if lock is not None:
        from accelopt.hardware import devicelock

        with devicelock.shared(lock):
            from accelopt.profiling.worker.harness import EvaluationRun
            from accelopt.profiling.worker.retime import RetimeRun
    else:
        from accelopt.profiling.worker.harness import EvaluationRun
        from accelopt.profiling.worker.retime import RetimeRun

    channel.send(Hello(pid=os.getpid(), network_isolated=network_isolated, scratch=str(scratch)))
    count = 0
    while True:
        message = channel.recv(None)
        request = None if message is None else parse_request(message)
        if request is None or isinstance(request, Shutdown):
            return
        count += 1
        work_dir = scratch / f"eval-{count}"
        work_dir.mkdir()
        os.chdir(work_dir)
        _reset_log()
        answer: EvaluationAnswer | SessionAnswer
        if isinstance(request, RetimeRequest):
            answer = RetimeRun(request, channel).execute()
            results = answer.results
        else:
            answer = EvaluationAnswer(result=EvaluationRun(request, channel).execute())
            results = [answer.result]
        sys.stdout.flush()
        log = read_log(scratch, request.config.output_cap_bytes)
        for result in results:  # a session's kernels ran interleaved: their output is one stream
            result.log = log
        os.chdir(scratch)
        shutil.rmtree(work_dir, ignore_errors=True)
        channel.send(answer)


def run(fd: int, lock: Path | None, network_isolated: bool) -> int:
    """A worker, once ``__main__`` has isolated it: its scratch directory and log, then requests
    on the socket ``fd`` until the parent says to stop or goes away."""
    scratch = Path(tempfile.mkdtemp(prefix="accelopt-worker-"))
    os.chdir(scratch)
    _redirect_output(scratch)
    channel = Channel(socket.socket(fileno=fd))
    try:
        serve(channel, scratch, network_isolated, lock)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent went away
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0
