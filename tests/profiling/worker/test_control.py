"""The control timed with a kernel (``worker/control.py``): it measures, and a kernel's process
that keeps running cannot slow it down unnoticed (which would inflate its calibrated figure)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from stoppable import Stoppable

from accelopt.profiling.parent.controls import mix, spec_for
from accelopt.profiling.worker import control
from accelopt.profiling.worker.control import Control
from accelopt.profiling.worker.disturbance import task_ns

pytestmark = pytest.mark.usefixtures("accelopt_cache")


@pytest.mark.parametrize("bound", ["matmul", "vector", "memory"])
def test_each_control_measures_a_rate(bound):
    c = Control(spec_for(bound, 3 << 20, 1 << 20), threads=2, pids=[], span_bytes=64 << 20)
    rates = [c.measure() for _ in range(3)]
    assert all(r is not None and r > 1e8 for r in rates), rates
    assert c.spent_s < 1.0 and c.note == ""


def test_the_memory_control_follows_the_problems_read_write_mix():
    assert mix(3 << 20, 1 << 20) == (3, 1)
    assert mix(1 << 20, 1 << 20) == (1, 1)
    assert mix(1 << 20, 4 << 20) == (1, 4)
    assert mix(100 << 20, 1 << 20) == (4, 1)
    assert spec_for("matmul", 1, 1).kind == "fma"
    assert spec_for("memory", 8, 4).describe().startswith("memory stream control (2 read")


def test_a_kernel_process_left_running_gets_no_control_figure():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # it is running
        c = Control(spec_for("matmul", 1, 1), threads=1, pids=[spinner.pid], span_bytes=0)
        # on a loaded machine the spinner may be off its CPU for a whole control: it then
        # disturbed nothing, and that control counts; so controls are taken until three were
        # disturbed (a quiet machine: the first three), up to a bound a starved spinner meets
        rates: list[float | None] = []
        while sum(r is None for r in rates) < 3 and len(rates) < 60:
            rates.append(c.measure())
        assert sum(r is None for r in rates) >= 3, rates
        assert "ran while" in c.note
    finally:
        spinner.kill()
        spinner.wait()


def test_a_kernel_process_left_running_is_stopped_while_the_control_runs():
    """Its process stopped (SIGSTOP, which it cannot catch), a thread it left busy cannot slow
    the control: every control counts (left running, above, none would)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        c = Control(spec_for("matmul", 1, 1), threads=1, pids=[spinner.pid], span_bytes=0,
                    device=Stoppable(spinner.pid))  # fmt: skip
        rates = [c.measure() for _ in range(5)]
        assert all(r is not None for r in rates), (rates, c.note)
        before = task_ns([spinner.pid])
        time.sleep(0.2)  # and it runs again afterwards
        assert task_ns([spinner.pid]) - before > 10_000_000
    finally:
        spinner.kill()
        spinner.wait()


def test_an_idle_kernel_process_does_not_disturb_the_control():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        c = Control(spec_for("matmul", 1, 1), threads=1, pids=[sleeper.pid], span_bytes=0)
        assert c.measure() is not None, c.note
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_kernel_process_that_runs_during_the_control_is_caught(monkeypatch):
    # idle when looked at before the control, busy while it runs (a thread woken by it)
    clock = {"ns": 0, "calls": 0}

    def task_ns(pids):
        clock["calls"] += 1
        if clock["calls"] > 1:  # the control's own reads: before it, after it
            clock["ns"] += 10**9
        return clock["ns"]

    monkeypatch.setattr(control, "task_ns", task_ns)
    c = Control(spec_for("matmul", 1, 1), threads=1, pids=[1], span_bytes=0)
    assert c.measure() is None and "ran while the control did" in c.note
