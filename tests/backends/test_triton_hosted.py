"""A Triton kernel's own process, seen from the worker (``backends/triton/hosted.py``): buffers in
shared memory that the worker reads and checks itself, a contained process checked thread by
thread, stopped between its calls. Triton's CPU interpreter stands in for the GPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from accelopt.backends.guards import find_overruns
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.triton.hosted import HostedBuffer, HostedDevice
from accelopt.problems.loader import load_problem

KERNELS = Path(__file__).parent / "triton_kernels"
SILU = shipped_kernel(load_problem("silu"), "baseline", "triton").read_text()


@pytest.fixture(scope="module")
def device() -> Iterator[HostedDevice]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        made = HostedDevice(gpu=False, seed=3)
        yield made
        made.close()


def test_buffers_are_the_workers_to_read_and_write(device: HostedDevice) -> None:
    host = np.random.default_rng(0).standard_normal((5, 7), dtype=np.float32)
    buffer = device.upload(host)
    back = device.to_host(buffer)
    assert np.array_equal(back.view(np.uint32), host.view(np.uint32))
    back[0, 0] = 99.0  # a copy: what the kernel's process shares is not handed out
    assert device.to_host(buffer)[0, 0] != 99.0
    device.fill(buffer, 2.5)
    assert (device.to_host(buffer) == 2.5).all()
    device.poke(buffer, np.array([0, 34]), np.array([np.nan, np.nan], dtype=np.float32))
    assert np.isnan(device.to_host(buffer).reshape(-1)[[0, 34]]).all()


def test_a_write_beside_a_buffer_lands_in_its_guard(device: HostedDevice) -> None:
    buffer = device.empty((64,), 0.0)
    guards = device.guards(buffer)
    assert guards is not None and find_overruns(guards) == []
    buffer.mapping[4 * (1024 + 64) : 4 * (1024 + 65)] = b"\0\0\0\0"  # one float past the end
    assert [o.side for o in find_overruns(guards)] == ["after"]


def test_the_kernel_runs_in_a_contained_process_stopped_between_calls(
    device: HostedDevice,
) -> None:
    x = device.upload(np.linspace(-3, 3, 4096, dtype=np.float32))
    y: HostedBuffer = device.empty((4096,), np.nan)
    kernel = device.load(SILU, 1 << 30)
    facts = device.isolation
    assert facts["landlock"] != "0" and facts["seccomp"] == "1"
    assert facts["tasks_nonewprivs"] == "1" and facts["tasks_seccomp"] == "2"
    assert facts["environment"] == "empty"
    kernel([x, y])
    xs = device.to_host(x)
    assert np.allclose(device.to_host(y), xs / (1 + np.exp(-xs)), rtol=1e-6)
    device.pause()
    state = Path(f"/proc/{device.host.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state in ("T", "t")
    kernel([x, y])  # a call resumes it
    assert Path(f"/proc/{device.host.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T"
