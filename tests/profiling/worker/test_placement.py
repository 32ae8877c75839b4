"""Where a kernel's threads run while timed (``profiling.worker.placement``): every kernel a
worker times on the same CPUs, those its control runs on; released afterwards; left to the user's
OpenMP binding where there is one; and a kernel cannot leave them (``kernel_host.c``)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import attacks
import numpy as np
import pytest

from accelopt import settings
from accelopt.backends.cpu.remote import KernelHostDevice
from accelopt.hardware.toolchain import compiler_for
from accelopt.profiling.worker import placement

ALLOWED = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(ALLOWED) < 2, reason="binding shows only with 2 CPUs or more")


def allowed_of(pid: int) -> set[int]:
    return set().union(*(os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")))


def test_the_first_cpus_of_the_worker_are_the_kernels():
    assert placement.cpus_for(1, [5, 3, 9]) == [3]
    assert placement.cpus_for(2, [5, 3, 9]) == [3, 5]
    assert placement.cpus_for(8, [5, 3, 9]) == [3, 5, 9]
    assert placement.cpus_for(None, [5, 3]) == [3, 5]
    assert placement.cpus_for(0, [5, 3]) == [3]


def test_the_users_openmp_binding_is_kept():
    assert placement.user_binds({"OMP_PROC_BIND": "close"})
    assert placement.user_binds({"GOMP_CPU_AFFINITY": "0-3"})
    assert not placement.user_binds({"OMP_NUM_THREADS": "2", "OMP_PLACES": ""})
    with placement.pinned([os.getpid()], 1, {"OMP_PLACES": "cores"}) as where:
        assert where == "as the user's OpenMP binding places them"
        assert os.sched_getaffinity(0) == set(ALLOWED)


@needs_two
def test_a_kernel_process_is_bound_while_timed_and_released_after():
    child = subprocess.Popen(["sleep", "30"])
    try:
        with placement.pinned([child.pid], 1, {}) as where:
            assert where == f"CPU {ALLOWED[0]}"
            assert allowed_of(child.pid) == {ALLOWED[0]}
        assert allowed_of(child.pid) == set(ALLOWED)
    finally:
        child.kill()
        child.wait()


def test_a_process_that_cannot_be_bound_is_named_so():
    if os.geteuid() == 0:
        pytest.skip("root may bind any process")
    assert placement.bind([1], [ALLOWED[0]]).startswith("unpinned:")


@needs_two
def test_a_bound_kernel_cannot_leave_its_cpus(accelopt_cache):
    out = Path(tempfile.mkdtemp(prefix="accelopt-place-"))
    out.chmod(0o755)
    artifact = attacks.build(out, "leaves_its_cpus")
    driver = attacks.driver(out)
    first = str(ALLOWED[0])
    shown = subprocess.run(["taskset", "-c", first, str(driver), str(artifact)],
                           capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    assert f"may run on {len(ALLOWED)} CPUs" in shown  # unsandboxed, a bound process leaves
    device = KernelHostDevice(compiler_for(settings.c_compiler()), dict(os.environ))
    try:
        x = device.upload(np.ones(attacks.N, np.float32), into=device.empty((attacks.N,)))
        y = device.empty((attacks.N,), fill=np.nan)
        kernel = device.load(artifact, 2, threads=1, memory_cap_bytes=1 << 30)
        with placement.pinned(device.kernel_pids, 1, {}) as where:
            assert where == f"CPU {first}"
            kernel([x, y])
            assert allowed_of(device.host.pid) == {ALLOWED[0]}
        assert device.to_host(y)[0] == 1.0  # its own mask as it saw it: still one CPU
    finally:
        device.close()
