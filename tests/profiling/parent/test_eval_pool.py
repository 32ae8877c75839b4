"""The parent side of isolation: exit descriptions, phase deadlines, the message channel, and the
life of one worker process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.deadlines import Deadlines
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.parent.pool import WorkerProcess, WorkerStartError, describe_exit
from accelopt.profiling.worker.protocol import MAX_MESSAGE_BYTES, Channel, ProtocolError


def test_describe_exit_by_signal():
    assert describe_exit(-signal.SIGSEGV) == "died from SIGSEGV (Segmentation fault)"
    assert describe_exit(-signal.SIGKILL).startswith("died from SIGKILL")


def test_describe_exit_by_status():
    assert describe_exit(0) == "exited with status 0"
    assert describe_exit(3) == "exited with status 3"


def test_describe_exit_unknown_signal_and_no_exit():
    assert describe_exit(-200) == "died from signal 200"
    assert describe_exit(None) == "stopped answering"


def test_deadlines_per_phase():
    deadlines = Deadlines(compile_s=150.0, call_s=3.0, reference_s=120.0, start_s=60.0)
    assert deadlines.for_phase("compile") == 150.0
    assert deadlines.for_phase("call") == deadlines.for_phase("load") == 3.0
    assert deadlines.for_phase("reference") == 120.0
    assert deadlines.for_phase("start") == 60.0
    assert deadlines.for_phase("lock") == 900.0  # waiting for the device: long, not forever
    assert deadlines.for_phase("something new") == 60.0


@pytest.fixture
def channels() -> Iterator[tuple[Channel, socket.socket]]:
    a, b = socket.socketpair()
    channel = Channel(a)
    yield channel, b
    channel.close()
    b.close()


def test_channel_round_trip(channels):
    channel, peer = channels
    Channel(peer).send({"type": "phase", "phase": "call", "detail": "seed 1 of 5"})
    Channel(peer).send({"type": "result", "latency_s": 1e-3})
    assert channel.recv(5) == {"type": "phase", "phase": "call", "detail": "seed 1 of 5"}
    assert channel.recv(5) == {"type": "result", "latency_s": 1e-3}


def test_channel_message_split_across_writes(channels):
    channel, peer = channels
    line = json.dumps({"type": "hello", "pid": 1}).encode() + b"\n"
    peer.sendall(line[:5])
    assert channel.recv(0.05) is None  # half a line is not a message yet
    peer.sendall(line[5:])
    assert channel.recv(5) == {"type": "hello", "pid": 1}


def test_channel_timeout_returns_none(channels):
    channel, _ = channels
    assert channel.recv(0.05) is None


def test_channel_eof_raises(channels):
    channel, peer = channels
    peer.close()
    with pytest.raises(EOFError):
        channel.recv(5)


@pytest.mark.parametrize("line", [b"not json\n", b"[1, 2]\n"])
def test_channel_unreadable_message_is_a_protocol_error(channels, line):
    channel, peer = channels
    peer.sendall(line)
    with pytest.raises(ProtocolError):
        channel.recv(5)


def test_channel_oversized_message_is_a_protocol_error(channels):
    # A line with no end: the parent must give up rather than buffer without limit.
    channel, peer = channels

    def send_forever() -> None:
        with contextlib.suppress(OSError):
            peer.sendall(b"x" * (MAX_MESSAGE_BYTES + (2 << 20)))

    sender = threading.Thread(target=send_forever, daemon=True)
    sender.start()
    with pytest.raises(ProtocolError, match="size limit"):
        channel.recv(30)
    channel.close()  # unblocks the sender
    sender.join(10)


@pytest.mark.timeout(60)
def test_worker_starts_isolated_and_shuts_down_cleanly(accelopt_cache):
    worker = WorkerProcess(dict(os.environ))
    try:
        assert worker.proc.poll() is None
        assert worker.scratch.name.startswith("accelopt-worker-") and worker.scratch.is_dir()
        assert isinstance(worker.network_isolated, bool)
        assert os.getpgid(worker.proc.pid) == worker.proc.pid  # its own process group
    finally:
        worker.shutdown()
    assert worker.proc.returncode == 0
    assert not worker.scratch.exists()


def test_the_worker_isolates_itself_while_it_has_one_thread():
    """What ``python -m accelopt.profiling.worker`` imports before it isolates itself starts no
    thread: the user-namespace fallback of the network isolation (for a user who may not make a
    network namespace alone) fails in a process with more than one. NumPy starts threads."""
    probe = (
        "import sys, threading\n"
        "import accelopt.profiling.worker.__main__\n"
        "print(threading.active_count(), 'numpy' in sys.modules, 'pydantic' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.split() == ["1", "False", "False"], shown.stderr


@pytest.mark.timeout(60)
def test_worker_that_cannot_start_is_reported():
    env = {**os.environ, "PYTHONHOME": "/nonexistent-python-home"}
    with pytest.raises(WorkerStartError, match="failed to start"):
        WorkerProcess(env)


@pytest.mark.timeout(60)
def test_evaluator_reports_workers_that_cannot_start(accelopt_cache, hw, monkeypatch):
    monkeypatch.setenv("PYTHONHOME", "/nonexistent-python-home")  # read by the workers only
    problem = load_problem("silu")
    kernel = Kernel(shipped_kernel(problem, "baseline").read_text())
    evaluator = Evaluator(hw, EvalConfig(workers=1))
    try:
        evaluation = evaluator.evaluate(kernel, problem, "cpu")
    finally:
        with contextlib.suppress(Exception):
            evaluator.close()
    assert evaluation.status is Status.CRASH
    assert "failed to start" in evaluation.error
