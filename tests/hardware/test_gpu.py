"""NVIDIA GPUs as nvidia-smi lists them (a fake nvidia-smi on PATH stands in), the one
CUDA_VISIBLE_DEVICES selects, and the spec Triton kernels are scored against there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from specs import make_spec

from accelopt.errors import UserError
from accelopt.hardware import gpu as gpu_mod
from accelopt.hardware import gpu_spec
from accelopt.hardware.datasheet import DATASHEET
from accelopt.hardware.gpu import (
    QUERY,
    GpuInfo,
    current_gpu,
    datasheet_name,
    list_gpus,
    parse_query,
    select,
)
from accelopt.hardware.gpu_spec import INTERPRETER, gpu_spec_path, triton_spec
from accelopt.hardware.spec import HardwareSpec

A100 = GpuInfo(0, "NVIDIA A100-SXM4-80GB", "GPU-aaaa1111-0000", 81920)
H200 = GpuInfo(1, "NVIDIA H200", "GPU-bbbb2222-0000", 143771)
TWO_ROWS = f"{A100.index}, {A100.name}, {A100.uuid}, {A100.memory_mib}\n" \
    f"{H200.index}, {H200.name}, {H200.uuid}, {H200.memory_mib}\n"  # fmt: skip
MEASURED = make_spec(
    name="gpu:NVIDIA A100-SXM4-80GB",
    backend="triton",
    matmul_rate=19e12,
    vector_rate=19e12,
    bandwidth=1.8e12,
    cores=108,
    llc_bytes=None,
    provenance={"matmul_rate": "measured: test"},
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """A private cache, and neither TRITON_INTERPRET nor CUDA_VISIBLE_DEVICES from outside."""
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.fixture
def no_smi(monkeypatch, tmp_path):
    """PATH holds only an empty folder: there is no nvidia-smi."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture
def fake_smi(monkeypatch, tmp_path):
    """Put an ``nvidia-smi`` that prints ``stdout`` and exits ``code`` first on PATH; its
    arguments are written to the returned file."""
    folder = tmp_path / "bin"
    folder.mkdir()
    args_file = tmp_path / "smi-args"

    def install(stdout: str, code: int = 0) -> Path:
        script = folder / "nvidia-smi"
        quoted = stdout.replace("'", "'\"'\"'")
        script.write_text(
            f"#!/bin/sh\necho \"$@\" > '{args_file}'\nprintf '%s' '{quoted}'\nexit {code}\n"
        )
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        return args_file

    return install


@pytest.fixture
def measure_calls(monkeypatch):
    """measure_gpu_and_cache replaced: records the GPUs it is asked for and returns MEASURED."""
    calls: list[GpuInfo] = []

    def measure(gpu: GpuInfo) -> HardwareSpec:
        calls.append(gpu)
        return MEASURED

    monkeypatch.setattr(gpu_spec, "measure_gpu_and_cache", measure)
    return calls


@pytest.fixture
def no_measuring(monkeypatch):
    def measure(gpu: GpuInfo) -> HardwareSpec:
        raise AssertionError(f"measured {gpu}")

    monkeypatch.setattr(gpu_spec, "measure_gpu_and_cache", measure)


# -- parse_query ---------------------------------------------------------------------------------


def test_parse_two_rows():
    assert parse_query(TWO_ROWS) == [A100, H200]


def test_parse_skips_lines_that_do_not_parse():
    text = (
        "index, name, uuid, memory.total [MiB]\n"
        "\n"
        "No devices were found\n"
        "0, NVIDIA H200, GPU-x\n"
        "x, NVIDIA H200, GPU-x, 1\n"
        "-1, NVIDIA H200, GPU-x, 1\n"
        "0, NVIDIA H200, GPU-x, 1, extra\n"
        "  3 ,  NVIDIA H100 80GB HBM3 ,  GPU-ccc ,  81559  \n"
    )
    assert parse_query(text) == [GpuInfo(3, "NVIDIA H100 80GB HBM3", "GPU-ccc", 81559)]


@pytest.mark.parametrize("memory", ["[N/A]", "", "80.5"])
def test_parse_unreadable_memory_is_zero(memory):
    (gpu,) = parse_query(f"0, NVIDIA H200, GPU-x, {memory}")
    assert gpu == GpuInfo(0, "NVIDIA H200", "GPU-x", 0)


def test_parse_windows_line_endings():
    assert parse_query(TWO_ROWS.replace("\n", "\r\n")) == [A100, H200]


def test_parse_empty_is_no_gpu():
    assert parse_query("") == []


# -- select --------------------------------------------------------------------------------------


def test_select_without_cuda_visible_devices_is_the_first():
    assert select([A100, H200], None) is A100


@pytest.mark.parametrize("visible", ["", "  "])
def test_select_empty_visible_devices_means_no_gpu(visible):
    assert select([A100, H200], visible) is None


@pytest.mark.parametrize("visible", [",1", " , "])
def test_select_empty_first_entry_means_no_gpu(visible):
    # CUDA stops at the first invalid entry, so it sees no device here.
    assert select([A100, H200], visible) is None


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("1", H200),
        ("0", A100),
        (" 1 ", H200),
        ("1,0", H200),
        ("0,1", A100),
        ("7", None),
        ("-1", None),
    ],
)
def test_select_by_index(visible, expected):
    assert select([A100, H200], visible) == expected


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("GPU-bbbb2222-0000", H200),
        ("GPU-bbbb", H200),
        ("GPU-aaaa,GPU-bbbb", A100),
        ("GPU-ffff", None),
        ("bbbb2222", None),
    ],
)
def test_select_by_uuid_prefix(visible, expected):
    assert select([A100, H200], visible) == expected


def test_select_from_no_gpus_is_none():
    assert select([], None) is None
    assert select([], "0") is None


# -- datasheet_name ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", "h200"),
        ("nvidia h200 nvl", None),  # another part than the SXM datasheet's
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA A100-SXM4-80GB", None),
        ("NVIDIA GeForce RTX 4090", None),
        ("", None),
    ],
)
def test_datasheet_name(name, expected):
    assert datasheet_name(name) == expected


# -- list_gpus and current_gpu -------------------------------------------------------------------


@pytest.mark.usefixtures("no_smi")
def test_no_nvidia_smi_lists_no_gpu():
    assert list_gpus() == []
    assert current_gpu() is None


def test_list_gpus_queries_nvidia_smi(fake_smi):
    args_file = fake_smi(TWO_ROWS)
    assert list_gpus() == [A100, H200]
    args = args_file.read_text().split()
    assert f"--query-gpu={QUERY}" in args
    assert "--format=csv,noheader,nounits" in args


def test_failing_nvidia_smi_lists_no_gpu(fake_smi):
    fake_smi(TWO_ROWS, code=1)
    assert list_gpus() == []


def test_nvidia_smi_printing_nothing_usable_lists_no_gpu(fake_smi):
    fake_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    assert list_gpus() == []


@pytest.mark.parametrize(
    "error", [OSError("exec format error"), subprocess.TimeoutExpired("nvidia-smi", 30)]
)
def test_nvidia_smi_that_cannot_run_lists_no_gpu(fake_smi, monkeypatch, error):
    fake_smi(TWO_ROWS)

    def run(*args, **kwargs):
        raise error

    monkeypatch.setattr(gpu_mod.subprocess, "run", run)
    assert list_gpus() == []


def test_current_gpu_is_the_first_without_cuda_visible_devices(fake_smi):
    fake_smi(TWO_ROWS)
    assert current_gpu() == A100


@pytest.mark.parametrize("visible", ["1", "GPU-bbbb", "1,0"])
def test_current_gpu_honours_cuda_visible_devices(fake_smi, monkeypatch, visible):
    fake_smi(TWO_ROWS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert current_gpu() == H200


def test_current_gpu_with_empty_cuda_visible_devices_is_none(fake_smi, monkeypatch):
    fake_smi(TWO_ROWS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert current_gpu() is None


# -- triton_spec ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", " ON ", "yes"])
def test_interpreter_spec_without_looking_for_a_gpu(monkeypatch, value):
    monkeypatch.setenv("TRITON_INTERPRET", value)

    def no_lookup():
        raise AssertionError("looked for a GPU")

    monkeypatch.setattr(gpu_spec, "current_gpu", no_lookup)
    spec = triton_spec()
    assert spec == INTERPRETER
    assert spec.backend == "triton"
    assert spec.provenance
    assert all("nominal" in text for text in spec.provenance.values())


@pytest.mark.usefixtures("no_smi")
@pytest.mark.parametrize("value", [None, "0", "", "false"])
def test_no_gpu_and_no_interpreter_is_a_user_error(monkeypatch, value):
    if value is not None:
        monkeypatch.setenv("TRITON_INTERPRET", value)
    with pytest.raises(UserError, match="TRITON_INTERPRET=1"):
        triton_spec()


@pytest.mark.usefixtures("no_measuring")
def test_known_gpu_is_scored_against_its_datasheet(fake_smi):
    fake_smi(f"0, NVIDIA H200, {H200.uuid}, 143771\n")
    assert triton_spec() is DATASHEET["h200"]


@pytest.mark.usefixtures("no_measuring")
def test_datasheet_follows_cuda_visible_devices(fake_smi, monkeypatch):
    fake_smi(TWO_ROWS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert triton_spec() is DATASHEET["h200"]


@pytest.mark.usefixtures("no_measuring")
def test_unknown_gpu_uses_its_cached_measurement(fake_smi):
    fake_smi(TWO_ROWS)
    path = gpu_spec_path(A100)
    assert A100.uuid in path.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MEASURED.model_dump_json())
    assert triton_spec() == MEASURED


def test_cache_is_per_gpu(tmp_path):
    assert gpu_spec_path(A100) != gpu_spec_path(H200)
    assert gpu_spec_path(A100).is_relative_to(tmp_path / "cache")


def test_unknown_gpu_without_a_cached_measurement_is_measured(fake_smi, measure_calls):
    fake_smi(TWO_ROWS)
    assert triton_spec() == MEASURED
    assert measure_calls == [A100]


@pytest.mark.parametrize("content", ["{not json", '{"name": "x"}', "", '{"matmul_rate": -1}'])
def test_corrupt_cached_measurement_is_remeasured(fake_smi, measure_calls, content):
    fake_smi(TWO_ROWS)
    path = gpu_spec_path(A100)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    assert triton_spec() == MEASURED
    assert measure_calls == [A100]


def test_another_gpus_measurement_is_not_used(fake_smi, measure_calls):
    fake_smi(TWO_ROWS)
    other = GpuInfo(0, A100.name, "GPU-ffff9999-0000", 81920)
    path = gpu_spec_path(other)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MEASURED.model_copy(update={"name": "other"}).model_dump_json())
    assert triton_spec() == MEASURED
    assert measure_calls == [A100]


def test_measure_gpu_and_cache_writes_the_cache(monkeypatch):
    from accelopt.hardware import measure_gpu

    raw = {
        "name": A100.name, "cores": 108, "llc_bytes": 40 << 20, "bandwidth": 1.8e12,
        "matmul_rate": 19e12, "copy_bytes": 1 << 30, "matmul_n": 4096, "repeats": 3,
        "torch": "test",
    }  # fmt: skip
    devices = []

    def measure(device="cuda", **kwargs):
        devices.append(device)
        return raw

    monkeypatch.setattr(measure_gpu, "measure_torch_device", measure)
    spec = gpu_spec.measure_gpu_and_cache(A100)
    assert devices == ["cuda"]
    assert spec.name == f"gpu:{A100.name}"
    assert spec.matmul_rate == 19e12 and spec.bandwidth == 1.8e12 and spec.cores == 108
    assert gpu_spec.load_measured(A100) == spec
    assert [p.name for p in gpu_spec_path(A100).parent.iterdir()] == [gpu_spec_path(A100).name]
