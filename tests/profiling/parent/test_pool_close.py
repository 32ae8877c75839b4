"""Closing the worker pool ends the evaluations in flight at once (Ctrl-C on a busy machine must
not wait tens of seconds for them): a busy worker is killed, its evaluation answers a service
failure (never cached, never a verdict), the evaluator does not retry it, and a closed pool starts
no new worker. The workers here are fakes that answer only when killed."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

import pytest

from accelopt.backends.status import Status
from accelopt.profiling.parent import pool as pool_module
from accelopt.profiling.parent.pool import WorkerFailed, WorkerPool
from accelopt.profiling.worker.protocol import EvaluationAnswer

STUCK_S = 60.0


class StuckWorker:
    """Answers nothing until it is killed, then dies as a SIGKILLed worker does."""

    made: ClassVar[list[StuckWorker]] = []

    def __init__(self, env: dict[str, str], lock_path: object = None) -> None:
        self.asked = 0
        self.network_isolated = True
        self.asking = threading.Event()
        self.killed = threading.Event()
        StuckWorker.made.append(self)

    def ask(self, request: object, deadlines: object) -> EvaluationAnswer:
        self.asked += 1
        self.asking.set()
        if not self.killed.wait(STUCK_S):
            raise AssertionError("never killed")
        why = "the worker died from SIGKILL (Killed) during the kernel call (timing)"
        raise WorkerFailed(Status.CRASH, why, service=why)

    def kill_group(self) -> None:
        self.killed.set()

    def kill(self) -> None:
        self.killed.set()

    def shutdown(self) -> None:
        self.killed.set()

    def log(self, cap: int) -> str:
        return ""


@pytest.fixture
def stuck(monkeypatch: pytest.MonkeyPatch) -> type[StuckWorker]:
    StuckWorker.made = []
    monkeypatch.setattr(pool_module, "WorkerProcess", StuckWorker)
    monkeypatch.setattr(pool_module, "failed_answer", lambda request, failure: EvaluationAnswer(
        result=failure))  # fmt: skip
    return StuckWorker


def test_close_kills_a_busy_worker_and_its_evaluation_ends_as_a_service_failure(stuck):
    pool = WorkerPool(1, {})
    answers: list[EvaluationAnswer] = []
    asking = threading.Thread(target=lambda: answers.append(pool.ask(object(), None, 100)))
    asking.start()
    assert stuck.made and stuck.made[0].asking.wait(10)
    start = time.monotonic()
    pool.close()
    asking.join(STUCK_S / 2)
    assert not asking.is_alive(), "close waited for the evaluation in flight"
    assert time.monotonic() - start < STUCK_S / 2
    (answer,) = answers
    assert answer.result.status is Status.CRASH and answer.result.service


def test_a_closed_pool_starts_no_worker(stuck):
    pool = WorkerPool(1, {})
    pool.close()
    answer = pool.ask(object(), None, 100)
    assert not stuck.made
    assert pool.closed
    assert "closed" in answer.result.service
