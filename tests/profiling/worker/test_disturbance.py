"""Which timed batches another process disturbed, and kernel processes that may run only while
they are called (``worker/disturbance.py``): run delay tells a thread that waited for a CPU, a
stopped process cannot run, and one that keeps running between its calls is caught."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from stoppable import Stoppable

from accelopt.backends.device import HostDevice
from accelopt.profiling.worker import disturbance
from accelopt.profiling.worker.disturbance import Reading, RunDelay, between_calls, task_ns

needs_schedstat = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="no schedstat (CONFIG_SCHED_INFO)"
)
CPU = min(os.sched_getaffinity(0))


@contextmanager
def process(code: str, cpu: int | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A Python process running ``code`` (on ``cpu`` when given), killed after the block."""
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        if cpu is not None:
            os.sched_setaffinity(proc.pid, [cpu])
        time.sleep(0.15)  # started
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_batch_is_disturbed_by_a_time_slice_not_by_wake_ups():
    assert not disturbance.disturbed(30_000, 0.0005)  # a quiet batch's wake-ups
    assert disturbance.disturbed(1_500_000, 0.0005)  # a scheduler slice behind another process
    assert not disturbance.disturbed(1_500_000, 0.5)  # 0.3 % of a long batch
    assert disturbance.disturbed(20_000_000, 0.5)


def test_the_timing_threads_wait_behind_the_kernels_main_thread_is_not_a_disturbance():
    before = Reading(kernel_delay=0, own_delay=0, main_cpu=0)
    # the main thread ran 600 us and the timing thread waited behind it all that time
    assert RunDelay.waited(before, Reading(20_000, 600_000, 600_000)) == 20_000
    # ... and 2 ms more, while another process held the CPU
    assert RunDelay.waited(before, Reading(20_000, 2_600_000, 600_000)) == 2_020_000
    assert not disturbance.disturbed(RunDelay.waited(before, Reading(0, 0, 600_000)), 6e-4)


@needs_schedstat
def test_a_thread_that_waits_for_a_cpu_another_process_holds_shows_run_delay():
    spin = "while True: pass"
    with process(spin, CPU) as kernel:
        delay = RunDelay([kernel.pid], cpus=1)
        assert delay.available
        quiet = delay.read()
        time.sleep(0.3)
        alone = RunDelay.waited(quiet, delay.read())
        with process(spin, CPU):  # another process on its CPU: it waits half the time
            busy = delay.read()
            time.sleep(0.3)
            shared = RunDelay.waited(busy, delay.read())
    # quiet, it waits for nothing (other tests may run beside this one: only more with one more)
    assert shared > max(50_000_000, alone), (alone, shared)  # ~150 ms of 300, quiet


@needs_schedstat
def test_a_kernel_with_more_threads_than_its_cpus_gets_no_disturbance_signal():
    threads = (
        "import threading, time\n"
        "[threading.Thread(target=time.sleep, args=(30,)).start() for _ in range(3)]\n"
        "time.sleep(30)"
    )
    with process(threads) as kernel:
        assert not RunDelay([kernel.pid], cpus=2).available  # 4 threads: they wait for each other
        assert RunDelay([kernel.pid], cpus=4).available
    assert not RunDelay([], cpus=2).available  # a kernel in the worker's own process


def test_a_process_that_keeps_running_between_its_calls_is_rejected():
    with process("while True: pass") as kernel:
        said = between_calls([kernel.pid], threads=1)
    assert said.startswith("the kernel's process kept running between its calls")
    assert "slows whatever is timed beside it" in said


def test_a_process_that_falls_idle_after_its_call_as_a_pool_does_is_not():
    # spins 10 ms of CPU (an OpenMP pool's), then sleeps: as after every call
    pool = (
        "import time\nt = time.perf_counter()\n"
        "while time.perf_counter() - t < 0.01: pass\ntime.sleep(30)"
    )
    with process(pool) as kernel:
        assert between_calls([kernel.pid], threads=1) == ""


def test_a_paused_kernel_process_cannot_run():
    with process("while True: pass") as kernel:
        device = Stoppable(kernel.pid)
        device.pause()
        assert disturbance.all_stopped([kernel.pid])
        before = task_ns([kernel.pid])
        time.sleep(0.2)
        assert task_ns([kernel.pid]) - before < 1_000_000  # it did not run
        device.resume()
        time.sleep(0.2)
        assert task_ns([kernel.pid]) - before > 50_000_000  # it runs again


def test_pause_and_resume_leave_devices_without_a_process_alone():
    device = HostDevice()
    device.pause()
    device.resume()
    assert device.kernel_pids == () and device.isolation is None
