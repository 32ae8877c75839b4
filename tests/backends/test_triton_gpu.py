"""The triton backend on a real NVIDIA GPU: CUDA buffers, event timing with the L2 cache cleared,
canaries, the guard. Skipped where torch sees no CUDA device (run by benchmarks/gpu_check.sh)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from accelopt.backends import Kernel, Status
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


def test_cuda_device_round_trip_canaries_and_timing() -> None:
    from accelopt.backends.triton.torch_device import TorchDevice

    device = TorchDevice("cuda")
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    buffer = device.upload(host)
    assert buffer.is_cuda and np.array_equal(device.to_host(buffer), host)
    canaries = device.canaries([[buffer]], seed=0)
    canaries.arm(0)
    assert not canaries.written()
    seconds = device.time_call(lambda: buffer.fill_(1.0))
    assert canaries.written() and 0 < seconds < 1


def test_a_baseline_is_timed_on_the_gpu(evaluator: Evaluator) -> None:
    silu = load_problem("silu")
    source = silu.kernel_path("baseline", "triton").read_text()
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
