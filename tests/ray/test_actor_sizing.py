"""What a device actor asks Ray for (no Ray started here): one unit of its device's resource, and
a GPU only where its backend's kernels run on one, as the backend itself says."""

from __future__ import annotations

import pytest

from accelopt.profiling.cluster.fleet import device_resource, gpus_per_actor


def test_a_device_is_a_resource_named_after_its_backend():
    assert device_resource("cpu") == "accelopt_cpu"
    assert device_resource("triton") == "accelopt_triton"


def test_kernels_run_on_the_cpu_ask_for_no_gpu(monkeypatch: pytest.MonkeyPatch):
    assert gpus_per_actor("cpu") == 0
    assert gpus_per_actor("numpy") == 0
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton's CPU interpreter
    assert gpus_per_actor("triton") == 0


def test_triton_on_a_gpu_asks_for_one(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert gpus_per_actor("triton") == 1  # wherever the driver runs, with a GPU or without
