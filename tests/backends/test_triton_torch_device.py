"""TorchDevice on the CPU: the buffer, copy, canary and timing code a GPU runs, minus CUDA."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from accelopt.backends.triton.torch_device import TorchDevice  # noqa: E402


def test_upload_into_and_back_keeps_the_bits() -> None:
    device = TorchDevice("cpu")
    host = np.random.default_rng(0).standard_normal((5, 7), dtype=np.float32)
    fresh = device.upload(host)
    assert fresh.dtype == torch.float32 and tuple(fresh.shape) == (5, 7)
    target = device.empty((5, 7), 0.0)
    assert device.upload(host, into=target) is target
    assert np.array_equal(device.to_host(target).view(np.uint32), host.view(np.uint32))
    host[0, 0] = 99.0  # an upload is a copy, not a view of the host array
    assert device.to_host(fresh)[0, 0] != 99.0


def test_empty_and_fill() -> None:
    device = TorchDevice("cpu")
    buffer = device.empty((3, 4), np.nan)
    assert np.isnan(device.to_host(buffer)).all()
    device.fill(buffer, 2.5)
    assert (device.to_host(buffer) == 2.5).all()


def test_canaries_catch_a_call_that_writes_nothing_and_pass_one_that_writes() -> None:
    outputs = [[torch.zeros(10), torch.zeros(2, 3)], [torch.zeros(10), torch.zeros(2, 3)]]
    canaries = TorchDevice("cpu").canaries(outputs, seed=1)
    canaries.arm(1)
    assert not canaries.written()
    assert torch.isnan(outputs[1][0]).sum() >= 2 and torch.isnan(outputs[1][1]).sum() >= 2
    assert not torch.isnan(outputs[0][0]).any()  # only the armed set
    for out in outputs[1]:
        out.fill_(1.0)
    assert canaries.written()


def test_canaries_catch_a_call_that_writes_all_but_the_last_element() -> None:
    outputs = [[torch.zeros(8)]]
    canaries = TorchDevice("cpu").canaries(outputs, seed=2)
    canaries.arm(0)
    outputs[0][0][:-1] = 1.0
    assert not canaries.written()


def test_time_call_on_the_cpu_is_the_wall_clock_of_the_call() -> None:
    device = TorchDevice("cpu")
    calls = []
    seconds = device.time_call(lambda: calls.append(1))
    assert calls == [1] and 0 <= seconds < 1
    assert not device.on_gpu
