"""The torch device measurement behind the Triton ceilings, run small on the CPU: finite figures,
a triton spec with its provenance, and the caller's TF32 settings left as they were."""

from __future__ import annotations

import math

import pytest

from accelopt.hardware.measure_gpu import measure_torch_device, spec_from_measurement

torch = pytest.importorskip("torch")

SMALL = {"copy_bytes": 8 << 20, "matmul_n": 128, "repeats": 3}
RAW_KEYS = {
    "name", "cores", "llc_bytes", "bandwidth", "matmul_rate", "copy_bytes", "matmul_n", "repeats",
    "torch",
}  # fmt: skip


def tf32_state() -> tuple[bool, str]:
    return torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()


@pytest.fixture
def restore_tf32():
    """Whatever a test sets, the flags go back to what they were before it."""
    allow, precision = tf32_state()
    yield
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.set_float32_matmul_precision(precision)


@pytest.fixture(scope="module")
def raw():
    return measure_torch_device("cpu", **SMALL)


def test_raw_keys(raw):
    assert set(raw) == RAW_KEYS


def test_figures_are_positive_and_finite(raw):
    for key in ("bandwidth", "matmul_rate"):
        assert raw[key] > 0 and math.isfinite(raw[key]), key


def test_raw_records_the_sizes_and_the_device(raw):
    assert (raw["copy_bytes"], raw["matmul_n"], raw["repeats"]) == (8 << 20, 128, 3)
    assert raw["name"] == "cpu"
    assert raw["cores"] == torch.get_num_threads()
    assert raw["llc_bytes"] is None
    assert raw["torch"] == torch.__version__


def test_spec_from_measurement(raw):
    spec = spec_from_measurement(raw, "gpu:test")
    assert spec.name == "gpu:test"
    assert spec.backend == "triton"
    assert spec.matmul_rate == spec.vector_rate == raw["matmul_rate"]
    assert spec.bandwidth == raw["bandwidth"]
    assert spec.cores == raw["cores"]
    assert spec.llc_bytes is None and "llc_bytes" not in spec.provenance


def test_provenance_says_how_each_figure_was_measured(raw):
    provenance = spec_from_measurement(raw, "gpu:test").provenance
    for figure in ("matmul_rate", "vector_rate", "bandwidth"):
        assert "measured" in provenance[figure], figure
        assert "median of 3" in provenance[figure], figure
    assert "TF32 off" in provenance["matmul_rate"]
    assert "128x128x128" in provenance["matmul_rate"]
    assert "TF32 off" in provenance["vector_rate"]
    assert "copy" in provenance["bandwidth"]
    assert "cores" in provenance


def test_spec_keeps_a_known_cache_size():
    raw = {
        "name": "NVIDIA H200", "cores": 132, "llc_bytes": 50 << 20, "bandwidth": 4.1e12,
        "matmul_rate": 5.1e13, "copy_bytes": 2 << 30, "matmul_n": 8192, "repeats": 10,
        "torch": "2.x",
    }  # fmt: skip
    spec = spec_from_measurement(raw, "gpu:NVIDIA H200")
    assert spec.llc_bytes == 50 << 20
    assert "L2" in spec.provenance["llc_bytes"]
    assert "2 GiB" in spec.provenance["bandwidth"]


@pytest.mark.usefixtures("restore_tf32")
def test_tf32_flags_are_unchanged_from_the_defaults():
    before = tf32_state()
    measure_torch_device("cpu", copy_bytes=1 << 20, matmul_n=16, repeats=1)
    assert tf32_state() == before


@pytest.mark.usefixtures("restore_tf32")
@pytest.mark.parametrize("precision", ["high", "medium"])
def test_tf32_flags_set_by_the_caller_are_restored(precision):
    # In this order: set the other way round, torch raises when the flags are read.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision(precision)
    before = tf32_state()
    assert before[0] is True and before[1] != "highest"
    measure_torch_device("cpu", copy_bytes=1 << 20, matmul_n=16, repeats=1)
    assert tf32_state() == before


@pytest.mark.usefixtures("restore_tf32")
def test_tf32_flags_are_restored_when_the_matmul_fails(monkeypatch):
    torch.set_float32_matmul_precision("medium")
    before = tf32_state()
    seen = []

    def matmul(*args, **kwargs):
        seen.append(tf32_state())
        raise RuntimeError("matmul failed")

    monkeypatch.setattr(torch, "matmul", matmul)
    with pytest.raises(RuntimeError, match="matmul failed"):
        measure_torch_device("cpu", copy_bytes=1 << 20, matmul_n=16, repeats=1)
    assert seen == [(False, "highest")]  # the matmul itself ran in true fp32
    assert tf32_state() == before
