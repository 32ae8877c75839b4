"""A fault is never a verdict: a build that could not write for want of disk, a worker killed
from outside, a harness fault. Each is the service's failure (``KernelMeasurement.service``):
retried, then "the evaluation could not be done"; never cached, never served from a cache."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from fakes import fake_evaluation, variant
from mounts import fill, small_disk
from runners import RunsOnly

from accelopt.backends.cpu.compiler import compile_kernel
from accelopt.backends.faults import unwritable
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling import faults
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.profiler import Measured

SILU = load_problem("silu")


LEGACY = (
    "ld: final link failed: No space left on device",
    "the worker died from SIGKILL (Killed) during waiting for the device",
    "harness error: OSError: [Errno 30] Read-only file system: '/c/kernel host'",
)


def test_older_caches_service_failures_are_known_by_their_words(hw: HardwareSpec) -> None:
    earned = fake_evaluation((variant(1), SILU, "tiny"), hw, 1)
    for error in LEGACY:
        legacy = earned.model_copy(update={"status": Status.CRASH, "error": error})
        assert faults.not_earned(legacy)
    assert not faults.not_earned(earned.model_copy(update={"status": Status.COMPILE_ERROR,
                                                           "error": "expected ';'"}))  # fmt: skip
    assert faults.not_earned(earned.model_copy(update={"service": "lost"}))


def test_a_build_on_a_full_disk_is_the_machines_failure(tmp_path: Path) -> None:
    from accelopt.backends.cpu.backend import build_inputs
    from accelopt.hardware.toolchain import compiler_for

    inputs = build_inputs(
        shipped_kernel(SILU, "baseline").read_text(), SILU, SILU.workload("tiny").sizes,
        compiler_for("gcc"),
    )  # fmt: skip
    with small_disk(tmp_path / "disk", "2m") as disk:
        (disk / "objects").mkdir()
        fill(disk, leave=8 << 10)
        assert "No space left on device" in unwritable([disk])
        built = compile_kernel(inputs, disk, disk / "objects", timeout_s=60)
    assert built.status is Status.COMPILE_ERROR and not built.ok
    assert "No space left on device" in built.service, built.error
    healthy = compile_kernel(inputs, tmp_path, tmp_path / "objects", timeout_s=60)
    assert healthy.ok and not healthy.service


class FlakyRunner(RunsOnly):
    """Fails each kernel's first measurement as the service (a lost node), then measures."""

    threads, capacity = 1, 2

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware
        self.measured: list[str] = []

    def run(self, jobs):  # type: ignore[no-untyped-def]
        for i, job in enumerate(jobs):
            evaluation = fake_evaluation(job, self.hardware, len(self.measured))
            first = job[0].hash not in self.measured
            self.measured.append(job[0].hash)
            if first:
                reason = faults.could_not("the node was lost")
                lost = evaluation.model_copy(update={"status": Status.CRASH, "error": reason,
                                                     "service": reason})  # fmt: skip
                yield Measured(i, lost, measured=False)
            else:
                yield Measured(i, evaluation)

    def close(self) -> None:
        pass


def test_a_service_failure_is_never_cached(hw: HardwareSpec, tmp_path: Path) -> None:
    from accelopt.store.store import Store

    store = Store(tmp_path / "ws")
    runner = FlakyRunner(hw)
    profiler = CachedProfiler("fake", hw, EvalConfig(seeds=2), runner, store)
    first = profiler.evaluate(variant(7), SILU, "tiny")
    assert first.status is Status.CRASH and "could not be done" in first.error
    again = profiler.evaluate(variant(7), SILU, "tiny")  # measured, not served from the cache
    assert again.status is Status.PASSED and len(runner.measured) == 2
    assert profiler.evaluate(variant(7), SILU, "tiny").status is Status.PASSED
    assert len(runner.measured) == 2  # the earned verdict is cached


def _workers_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"profiling.worker" in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_worker_killed_from_outside_is_retried_and_the_kernel_still_passes(
    hw: HardwareSpec, accelopt_cache: Path
) -> None:
    config = EvalConfig(seeds=2, workers=1, min_calls=5, min_time_s=0.5)
    kernel = Kernel(shipped_kernel(SILU, "baseline").read_text(), "cpu", "baseline")
    killed: list[int] = []

    def kill_the_first_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for pid in _workers_of(os.getpid()):
                time.sleep(1.0)  # into its evaluation
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                break
            time.sleep(0.05)

    with Evaluator(hw, config) as evaluator:
        killer = threading.Thread(target=kill_the_first_worker)
        killer.start()
        result = evaluator.evaluate(kernel, SILU, "small")
        killer.join()
    assert killed, "no worker was seen"
    assert result.status is Status.PASSED, result.error
    assert not result.service
