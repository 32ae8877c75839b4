"""TorchDevice keeps no guard regions yet: it says so (None), and takes the harness's arguments."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from accelopt.backends.triton.torch_device import TorchDevice


def test_tensors_have_no_guard_information():
    device = TorchDevice("cpu")
    buffer = device.empty((3, 4), 0.0, fenced=True)  # fenced is accepted and ignored
    assert tuple(buffer.shape) == (3, 4)
    assert device.guards(buffer) is None
    assert device.guards(device.upload(device.to_host(buffer))) is None
