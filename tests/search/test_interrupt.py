"""Ctrl-C during a run: "stopping…" is said at once, the search is cancelled, the evaluation in
flight is dropped (its profiler is closed, which ends it), the run is recorded ``interrupted``
and ``RunInterrupted`` names it, so the command can say how to resume.

The evaluation here blocks until its profiler is closed (as the worker pool's ``close`` kills a
busy worker); before this, asyncio cancelled the search but the process waited for every
evaluation in flight, on a busy machine for tens of seconds, and printed nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from agents_pool import write_config
from runners import RunsOnly
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import load_config
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.scoring import build_evaluation
from accelopt.profiling.profiler import EvaluationCache, Job, Measured
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.search import interrupt
from accelopt.search import run as run_module
from accelopt.search.config import SearchConfig
from accelopt.search.interrupt import STOPPING, RunInterrupted
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.store.records import RunStatus
from accelopt.store.store import Store

SPEC = make_spec(name="cpu:test", matmul_rate=1e12, vector_rate=1e12, bandwidth=50e9)
BLOCKED_S = 60.0  # how long an evaluation would go on if nothing stopped it


class BlockingRunner(RunsOnly):
    """Each evaluation waits until ``close`` (or ``BLOCKED_S``), then answers a service failure,
    as a worker killed by the pool's ``close`` does; ``started`` is set when one begins."""

    threads = 1
    capacity = 1

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware
        self.started = threading.Event()
        self.closed = threading.Event()

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            self.started.set()
            self.closed.wait(BLOCKED_S)
            why = "the worker died from SIGKILL"
            result = KernelResult(status=Status.CRASH, error=why, service=why)
            yield Measured(i, build_evaluation(job, self.hardware, 2, result))

    def retime(self, kernels: Sequence[Kernel], problem: object, workload: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.closed.set()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> BlockingRunner:
    made = BlockingRunner(SPEC)

    def make_profiler(kind: str, hardware: HardwareSpec, config: EvalConfig | None = None,
                      ray_address: str | None = None,
                      store: EvaluationCache | None = None) -> CachedProfiler:  # fmt: skip
        return CachedProfiler(kind, hardware, config or EvalConfig(), made, store)

    monkeypatch.setattr(run_module, "make_profiler", make_profiler)
    return made


def interrupt_when(started: threading.Event) -> threading.Thread:
    """SIGINT this process (as Ctrl-C does) once ``started`` is set."""

    def send() -> None:
        if started.wait(30):
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_stops_a_run_at_once_and_leaves_it_resumable(runner, tmp_path: Path, capfd):
    llm = load_config(write_config(tmp_path / "accelopt.yaml", "http://127.0.0.1:9"))
    inputs = RunInputs(llm, SPEC, EvalConfig(), check_llm=False)
    search = SearchConfig(strategy="autotune", iterations=2)
    with Store.open(tmp_path / "ws") as store:
        run = new_run(store, RunTarget("silu", "cpu", "cpu", SPEC), search, llm)
        interrupt_when(runner.started)
        start = time.monotonic()
        with pytest.raises(RunInterrupted) as caught:
            execute_run(store, run, inputs, resume=False)
        took = time.monotonic() - start
        assert caught.value.run_id == run.id
        assert took < BLOCKED_S / 2  # it did not wait for the evaluation in flight
        assert store.get_run(run.id).status is RunStatus.INTERRUPTED
        assert store.kernels(run.id)  # the starting kernel was recorded: a resume goes on
    assert STOPPING in capfd.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C works after


def test_a_second_ctrl_c_is_not_swallowed():
    """After the first SIGINT the loop's handler is gone: the next one raises at once."""
    said: list[str] = []

    async def stubborn() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:  # a search slow to unwind
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)

    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interrupt.run_interruptible(stubborn, said.append, "r1")
    assert time.monotonic() - start < 15
    assert said == [STOPPING]


def test_without_a_signal_the_work_runs_as_it_is():
    async def answer() -> int:
        return 42

    assert interrupt.run_interruptible(answer, print, "r1") == 42
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
