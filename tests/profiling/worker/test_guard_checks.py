"""The worker's guard check on its own: every argument named, and devices with no guards skipped;
and how a worker killed by a memory fault is described."""

from __future__ import annotations

import signal
from typing import Any

import numpy as np
import pytest

from accelopt.backends.device import HostDevice
from accelopt.problems import load_problem
from accelopt.profiling.parent.pool import describe_death
from accelopt.profiling.worker.arguments import Arguments
from accelopt.profiling.worker.steps import Failed


class NoGuards(HostDevice):
    """A device that keeps no guard information (as the torch device)."""

    def guards(self, buffer: Any) -> None:
        return None


def _run(device: HostDevice, problem: str = "rmsnorm_matmul") -> Arguments:
    return Arguments(device, load_problem(problem), {})  # the guard check reads no sizes


def _arguments(run: Arguments) -> list[np.ndarray]:
    problem = run.problem
    count = len(problem.inputs) + len(problem.outputs)
    return [run.device.empty((4, 4), 0.0, fenced=True) for _ in range(count)]


def test_untouched_guards_pass():
    run = _run(HostDevice(seed=0))
    run.check_guards(_arguments(run), "seed 1 of 5")


def test_each_argument_is_named():
    run = _run(HostDevice(seed=0))
    problem = run.problem
    names = [f"input {t.name!r}" for t in problem.inputs]
    names += [f"output {t.name!r}" for t in problem.outputs]
    for index, name in enumerate(names):
        arrays = _arguments(run)
        guards = run.device.guards(arrays[index])
        assert guards is not None
        guards.before[-2] = 0.0
        with pytest.raises(Failed) as failed:
            run.check_guards(arrays, "seed 2 of 5")
        assert failed.value.error == (
            f"the kernel wrote 1 float before the start of {name} "
            "(the furthest 2 floats before it) (seed 2 of 5)"
        )


def test_a_device_without_guards_is_not_checked():
    run = _run(NoGuards(seed=0))
    arrays = _arguments(run)
    damaged = HostDevice.guards(run.device, arrays[0])  # the record a host device would give
    assert damaged is not None
    damaged.after[0] = 0.0
    run.check_guards(arrays, "seed 1 of 5")  # None from the device: nothing to check


def test_a_memory_fault_in_a_call_blames_the_kernel():
    assert describe_death(-signal.SIGSEGV, "call") == (
        "the kernel was killed by SIGSEGV (a memory access outside its buffers?)"
    )
    assert describe_death(-signal.SIGBUS, "call").startswith("the kernel was killed by SIGBUS (")


def test_other_deaths_stay_the_workers():
    assert describe_death(-signal.SIGSEGV, "reference") == (
        "the worker died from SIGSEGV (Segmentation fault)"
    )
    assert describe_death(-signal.SIGKILL, "call").startswith("the worker died from SIGKILL")
    assert describe_death(3, "call") == "the worker exited with status 3"
