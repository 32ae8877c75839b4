"""The typed messages between the parent and a worker (profiling/worker/protocol.py), and what the
parent does with an answer it cannot believe."""

from __future__ import annotations

import math
import socket
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from accelopt.backends.status import Status
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.deadlines import Deadlines
from accelopt.profiling.parent.pool import WorkerFailed, WorkerProcess, failed_answer
from accelopt.profiling.worker.protocol import (
    SEPARATE,
    Channel,
    EvaluateRequest,
    EvaluationAnswer,
    KernelResult,
    KernelSource,
    MalformedAnswerError,
    RetimeRequest,
    SessionAnswer,
    Shutdown,
    parse_answer,
    parse_request,
)

FIELDS: dict[str, Any] = {
    "backend": "cpu",
    "problem": {"name": "silu"},
    "workload": "small",
    "config": EvalConfig(seeds=2),
    "seeds": [1, 2],
    "threads": 2,
    "llc_bytes": 32 << 20,
    "lock_path": "/tmp/device.lock",
}
ONE = EvaluateRequest(**FIELDS, kernel=KernelSource(source="void kernel() {}", name="a"))
KERNELS = [KernelSource(source=f"/* {n} */", name=n) for n in ("a", "b")]
SESSION = RetimeRequest(**FIELDS, kernels=KERNELS, min_rounds=8)


def test_requests_cross_as_json_and_come_back_equal():
    for request in (ONE, SESSION, Shutdown()):
        assert parse_request(request.model_dump(mode="json")) == request


def test_a_session_request_makes_each_kernels_evaluation():
    one = SESSION.one(KERNELS[1])
    assert isinstance(one, EvaluateRequest) and one.kernel == KERNELS[1]
    assert one.config == SESSION.config and one.seeds == SESSION.seeds


def test_an_evaluation_answer_is_read_back():
    answer = EvaluationAnswer(result=KernelResult(latency_s=1e-3, calls=10))
    read = parse_answer(ONE, answer.model_dump(mode="json"))
    assert read == answer


def test_an_infinite_error_crosses_the_channel():
    """A kernel whose output is off by inf is reported as inf, not as a missing figure."""
    a, b = socket.socketpair()
    result = KernelResult(status=Status.INCORRECT, max_rel_err=math.inf, kernel_ran=True)
    Channel(a).send(EvaluationAnswer(result=result))
    message = Channel(b).recv(5)
    assert message is not None
    assert parse_answer(ONE, message).result.max_rel_err == math.inf  # type: ignore[union-attr]
    a.close()
    b.close()


@pytest.mark.parametrize(
    "message",
    [
        {"type": "result", "result": {"status": "PASSED", "calls": "many"}},
        {"type": "result", "result": {"latency_s": 1e-3}, "forged": True},
        {"type": "result", "latency_s": 1e-3},  # the old flat shape
        {"type": "result", "result": {"status": "FASTEST"}},  # no such status
    ],
)
def test_an_answer_of_the_wrong_shape_is_malformed(message):
    with pytest.raises(MalformedAnswerError, match="malformed result"):
        parse_answer(ONE, message)


def test_a_session_answer_must_hold_every_kernel():
    answer = SessionAnswer(results=[KernelResult()], rounds=3, round_s=[[1.0]], worker_pid=1)
    with pytest.raises(MalformedAnswerError, match="malformed session"):
        parse_answer(SESSION, answer.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("ran", "status", "process", "taints"),
    [
        (False, Status.COMPILE_ERROR, "", False),  # no kernel code ran
        (True, None, "", False),  # it ran and passed
        (True, Status.CRASH, "", True),  # it failed inside the worker
        (True, Status.CRASH, SEPARATE, False),  # it failed in a process of its own
    ],
)
def test_a_worker_is_replaced_only_when_kernel_code_failed_inside_it(ran, status, process, taints):
    result = KernelResult(kernel_ran=ran, status=status, kernel_process=process)
    assert result.taints is taints


def test_a_failure_answers_for_every_kernel_of_the_request():
    failure = KernelResult(status=Status.TIMEOUT, error="the kernel call ran past its deadline")
    one = failed_answer(ONE, failure)
    assert isinstance(one, EvaluationAnswer) and one.result == failure
    session = failed_answer(SESSION, failure)
    assert isinstance(session, SessionAnswer) and session.worker_pid is None
    assert session.results == [failure, failure] and session.round_s == [[], []]
    session.results[0].log = "one kernel's log"
    assert session.results[1].log == ""  # each kernel its own record


@pytest.fixture
def forging_worker() -> Iterator[tuple[WorkerProcess, socket.socket]]:
    """A WorkerProcess whose other end is this test (a worker whose kernel took the socket)."""
    ours, theirs = socket.socketpair()
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.channel, worker.asked = Channel(ours), 0
    worker.proc = subprocess.Popen(["sleep", "30"])
    yield worker, theirs
    worker.proc.kill()
    worker.proc.wait()
    ours.close()
    theirs.close()


def test_a_forged_answer_is_a_crash_not_a_result(forging_worker):
    worker, theirs = forging_worker
    forged = {"type": "result", "result": {"latency_s": 1e-9}, "status": "PASSED"}

    def answer() -> None:
        Channel(theirs).recv(5)  # the request
        Channel(theirs).send(forged)

    peer = threading.Thread(target=answer)
    peer.start()
    with pytest.raises(WorkerFailed) as failed:
        worker.ask(ONE, Deadlines(compile_s=5, call_s=5, reference_s=5, start_s=5))
    peer.join()
    assert failed.value.status is Status.CRASH
    assert "the worker answered a malformed result" in failed.value.error
