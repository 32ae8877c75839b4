"""A worker process: builds, checks and times untrusted kernels, one request at a time.

Started by the pool as ``python -m accelopt.profiling.worker FD``. It isolates itself first (no
network, capped files), sends its stdout/stderr to a log file in its scratch directory, then serves
JSON requests on the socket FD. Before each step that runs kernel code it tells the parent which
phase it enters, so the parent can apply that phase's deadline and name it when the worker dies.

A request is an evaluation (``run.EvaluationRun``) or, of type ``retime``, a re-timing session of
several kernels (``run.RetimeRun``): its result holds one result per kernel under ``results``, each
with the session's log (the kernels ran in one worker, interleaved: their output is one stream).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from accelopt.profiling import sandbox
from accelopt.profiling.protocol import Channel

LOG_NAME = "output.log"


def _redirect_output(scratch: Path) -> int:
    fd = os.open(scratch / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return 1


def read_log(scratch: Path, cap: int) -> str:
    """The first ``cap`` bytes of what kernels printed, with a note of how much more there was."""
    path = scratch / LOG_NAME
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(cap)
    except OSError:
        return ""
    text = head.decode("utf-8", errors="replace")
    return text + (f"\n[... {size - cap} more bytes not kept]" if size > cap else "")


def _reset_log() -> None:
    os.ftruncate(1, 0)


def serve(channel: Channel, scratch: Path, network_isolated: bool, lock: Path | None) -> None:
    # After isolation: NumPy starts threads. Importing is ~0.3 s of CPU: done under the device
    # lock (shared), so a worker starting up never runs beside another worker's timing.
    if lock is not None:
        from accelopt.hardware import devicelock

        with devicelock.shared(lock):
            from accelopt.profiling.run import EvaluationRun, RetimeRun
    else:
        from accelopt.profiling.run import EvaluationRun, RetimeRun

    channel.send(
        {
            "type": "hello",
            "pid": os.getpid(),
            "network_isolated": network_isolated,
            "scratch": str(scratch),
        }
    )
    count = 0
    while True:
        request = channel.recv(None)
        if request is None or request.get("type") == "shutdown":
            return
        count += 1
        work_dir = scratch / f"eval-{count}"
        work_dir.mkdir()
        os.chdir(work_dir)
        _reset_log()
        session = request.get("type") == "retime"
        run = RetimeRun(request, channel) if session else EvaluationRun(request, channel)
        result: dict[str, Any] = run.execute()
        sys.stdout.flush()
        log = read_log(scratch, int(request["config"]["output_cap_bytes"]))
        for each in result["results"] if session else [result]:
            each["log"] = log
        os.chdir(scratch)
        shutil.rmtree(work_dir, ignore_errors=True)
        channel.send({"type": "result", **result})


def main(argv: list[str]) -> int:
    fd = int(argv[1])
    lock = Path(argv[2]) if len(argv) > 2 else None
    network_isolated = sandbox.isolate_network()  # before any thread: unshare needs one
    sandbox.limit_process()
    sandbox.watch_parent()
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


if __name__ == "__main__":
    sys.exit(main(sys.argv))
