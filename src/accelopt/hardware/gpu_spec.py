"""The ceilings Triton kernels are scored against.

- On an NVIDIA GPU accelopt has a datasheet for (H100, H200): the datasheet, the theoretical peak
  the method measures against. ``accelopt hardware --measure --backend triton`` also measures the
  GPU (copy bandwidth, fp32 matmul) and caches it, shown beside the datasheet.
- On another NVIDIA GPU: its measured ceilings, measured once and cached per GPU (by UUID).
- In Triton's CPU interpreter (TRITON_INTERPRET=1): nominal figures that only size the call
  deadlines; the interpreter is never timed (``--check-only``).
"""

from __future__ import annotations

from pathlib import Path

import accelopt.hardware.notices as notices
from accelopt import settings
from accelopt.errors import UserError
from accelopt.hardware import devicelock
from accelopt.hardware.cache import read_spec, write_spec
from accelopt.hardware.datasheet import DATASHEET
from accelopt.hardware.gpu import GpuInfo, current_gpu, datasheet_name
from accelopt.hardware.spec import GPU_BACKEND, HardwareSpec

_NOMINAL = (
    "nominal: Triton's CPU interpreter checks kernels and is never timed; this figure only sizes "
    "the call deadlines"
)
INTERPRETER = HardwareSpec(
    name="triton-interpreter",
    backend=GPU_BACKEND,
    matmul_rate=1e9,
    vector_rate=1e9,
    bandwidth=1e9,
    cores=1,
    provenance={f: _NOMINAL for f in ("matmul_rate", "vector_rate", "bandwidth", "cores")},
)
NO_GPU = (
    "the triton backend needs an NVIDIA GPU, and nvidia-smi lists none here; on a CPU-only "
    "machine set TRITON_INTERPRET=1 and add --check-only to check kernels"
)


def gpu_spec_path(gpu: GpuInfo) -> Path:
    return settings.cache_dir() / "hardware" / f"gpu-{gpu.uuid}.json"


def load_measured(gpu: GpuInfo) -> HardwareSpec | None:
    return read_spec(gpu_spec_path(gpu))


def measure_gpu_and_cache(gpu: GpuInfo) -> HardwareSpec:
    """Measure the GPU (holding its device lock: no evaluation of ours beside it) and cache it."""
    from accelopt.hardware.measure_gpu import measure_torch_device, spec_from_measurement

    notices.progress(f"measuring the ceilings of {gpu.name} (a device copy, an fp32 matmul)")
    with devicelock.exclusive(devicelock.lock_path(f"gpu-{gpu.uuid}")):
        raw = measure_torch_device("cuda")
    spec = spec_from_measurement(raw, f"gpu:{gpu.name}")
    write_spec(gpu_spec_path(gpu), spec)
    notices.progress(f"measured and cached: {notices.figures(spec)}")
    return spec


def triton_spec(gpu: GpuInfo | None = None) -> HardwareSpec:
    """The spec Triton kernels are scored against here (see the module's docstring); ``gpu``:
    the GPU when the caller has looked it up already."""
    if settings.triton_interpreter():
        return INTERPRETER
    gpu = gpu or current_gpu()
    if gpu is None:
        raise UserError(NO_GPU)
    known = datasheet_name(gpu.name)
    if known is not None:
        return DATASHEET[known]
    measured = load_measured(gpu)
    if measured is None:
        measured = measure_gpu_and_cache(gpu)
    return measured
