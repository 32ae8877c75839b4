"""The triton backend on a real NVIDIA GPU: the kernel's own contained process, CUDA buffers
shared by IPC, batches timed by the worker's clock with the L2 cache cleared, canaries, the
guard. Skipped where torch sees no CUDA device (run by benchmarks/gpu_check.sh)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from accelopt.backends import Kernel, Status
from accelopt.backends.base import KernelError
from accelopt.backends.registry import shipped_kernel
from accelopt.problems.loader import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
        reason="needs an NVIDIA GPU (and no TRITON_INTERPRET)",
    ),
]

KERNELS = Path(__file__).parent / "triton_kernels"


@pytest.fixture(scope="module")
def evaluator(accelopt_cache: Path) -> Iterator[Evaluator]:
    from accelopt.hardware.gpu_spec import triton_spec

    config = EvalConfig(seeds=2, workers=1, min_calls=10, min_time_s=0.05)
    with Evaluator(triton_spec(), config) as ev:
        yield ev


def test_cuda_buffers_are_shared_by_ipc_and_the_process_is_contained() -> None:
    """The kernel's own process made the CUDA buffers; the worker reads, writes and arms canaries
    in them through their IPC handles, and times a batch by its own clock."""
    from accelopt.backends.triton.hosted import HostedDevice

    device = HostedDevice(gpu=True, seed=0)
    try:
        host = np.linspace(-3, 3, 4096, dtype=np.float32)
        x, y = device.upload(host), device.empty((4096,), np.nan)
        assert x.array.is_cuda and np.array_equal(device.to_host(x), host)
        silu = shipped_kernel(load_problem("silu"), "baseline", "triton").read_text()
        kernel = device.load(silu, 1 << 30)
        facts = device.isolation
        assert facts["seccomp"] == "1" and facts["tasks_nonewprivs"] == "1", facts
        canaries = device.canaries([[y]], seed=0)
        canaries.arm(0)
        assert not canaries.written()
        seconds = device.time_calls([kernel.bind([x, y])])
        assert canaries.written() and 0 < seconds < 1
        assert np.allclose(device.to_host(y), host / (1 + np.exp(-host)), rtol=1e-5)
    finally:
        device.close()


SOCKET_AT_CALL = """
import socket
import triton


def kernel(x, y):
    socket.socket().connect(("127.0.0.1", 9))
"""


def test_a_kernel_that_opens_a_socket_on_the_gpu_is_rejected() -> None:
    """The same system call filter holds on a GPU, where CUDA's ioctls are allowed."""
    from accelopt.backends.triton.hosted import HostedDevice

    device = HostedDevice(gpu=True, seed=0)
    try:
        x, y = device.upload(np.ones(16, dtype=np.float32)), device.empty((16,), np.nan)
        kernel = device.load(SOCKET_AT_CALL, 1 << 30)
        with pytest.raises(KernelError) as raised:
            kernel([x, y])
        assert raised.value.status is Status.REJECTED
    finally:
        device.close()


def test_a_baseline_is_timed_on_the_gpu(evaluator: Evaluator) -> None:
    silu = load_problem("silu")
    source = shipped_kernel(silu, "baseline", "triton").read_text()
    result = evaluator.evaluate(Kernel(source, "triton", "baseline"), silu, "paper")
    assert result.status is Status.PASSED, result.error
    assert result.latency_s is not None and result.latency_s > 0
    assert result.calls >= 10 and (result.rotation_sets or 0) >= 2
    assert result.pct_of_peak is not None and 0 < result.pct_of_peak <= 1.05


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("torch_op", Status.REJECTED),
        ("remembers", Status.INCORRECT),
        ("raises_later", Status.CRASH),
        ("modifies_input", Status.INCORRECT),
    ],
)
def test_bad_kernels_fail_on_the_gpu_as_in_the_interpreter(
    evaluator: Evaluator, name: str, status: Status
) -> None:
    silu = load_problem("silu")
    source = (KERNELS / f"{name}.py").read_text()
    result = evaluator.evaluate(Kernel(source, "triton", name), silu, "small")
    assert result.status is status, result.error
