"""Measured ceilings of a torch device: device-to-device copy bandwidth and an fp32 matmul.

``accelopt hardware --measure --backend triton`` runs this on the GPU kernels run on. The matmul
runs in true fp32 (TF32 off, as the kernels must), so its rate is what the CUDA cores reach through
cuBLAS; it stands for the vector rate too, as the fp32 non-tensor rate does on the datasheet. The
copy counts the bytes read and written. Each figure is the median of ``repeats`` timed runs after
a warm-up, timed with CUDA events on a GPU (the wall clock elsewhere, e.g. in tests on the CPU).
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Callable
from typing import Any

from accelopt.hardware.spec import GPU_BACKEND, HardwareSpec

COPY_BYTES = 2 << 30  # per buffer: far past any L2
MATMUL_N = 8192
REPEATS = 10


def _timer(torch: Any, device: Any) -> Callable[[Callable[[], Any]], float]:
    if device.type == "cuda":

        def cuda_time(call: Callable[[], Any]) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3

        return cuda_time

    def wall_time(call: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0

    return wall_time


def _median_time(
    timer: Callable[[Callable[[], Any]], float], call: Callable[[], Any], n: int
) -> float:
    for _ in range(2):
        timer(call)  # warm-up: clocks, cuBLAS heuristics, allocator
    return statistics.median(timer(call) for _ in range(n))


def _copy_time(
    torch: Any, dev: Any, timer: Callable[[Callable[[], Any]], float], nbytes: int, repeats: int
) -> float:
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    return _median_time(timer, lambda: dst.copy_(src), repeats)


def measure_torch_device(
    device: str = "cuda",
    *,
    copy_bytes: int = COPY_BYTES,
    matmul_n: int = MATMUL_N,
    repeats: int = REPEATS,
) -> dict[str, Any]:
    """The raw figures: ``bandwidth`` (B/s), ``matmul_rate`` (FLOP/s) and the device's facts."""
    import torch

    dev = torch.device(device)
    timer = _timer(torch, dev)
    copy_s = _copy_time(torch, dev, timer, copy_bytes, repeats)
    a = torch.randn(matmul_n, matmul_n, dtype=torch.float32, device=dev)
    b = torch.randn(matmul_n, matmul_n, dtype=torch.float32, device=dev)
    c = torch.empty_like(a)
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # true fp32: TF32 off, as kernels must be
    try:
        matmul_s = _median_time(timer, lambda: torch.matmul(a, b, out=c), repeats)
    finally:
        torch.set_float32_matmul_precision(precision)
    facts: dict[str, Any] = {"name": str(dev), "cores": torch.get_num_threads(), "llc_bytes": None}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        facts = {
            "name": props.name,
            "cores": props.multi_processor_count,
            "llc_bytes": getattr(props, "L2_cache_size", None) or None,
        }
    return {
        **facts,
        "bandwidth": 2 * copy_bytes / copy_s,
        "matmul_rate": 2 * matmul_n**3 / matmul_s,
        "copy_bytes": copy_bytes,
        "matmul_n": matmul_n,
        "repeats": repeats,
        "torch": torch.__version__,
    }


def spec_from_measurement(raw: dict[str, Any], label: str) -> HardwareSpec:
    """A ``HardwareSpec`` (backend triton) of ``measure_torch_device``'s figures."""
    when = datetime.date.today().isoformat()
    n, size = raw["matmul_n"], raw["copy_bytes"] / 2**30
    timed = f"median of {raw['repeats']}, torch {raw['torch']}, {when}"
    matmul = (
        f"measured: torch.matmul fp32 {n}x{n}x{n}, TF32 off (cuBLAS on the CUDA cores), {timed}"
    )
    provenance = {
        "matmul_rate": matmul,
        "vector_rate": f"{matmul} (stands for the fp32 vector rate, as on the datasheet)",
        "bandwidth": f"measured: device-to-device copy of {size:g} GiB through torch, bytes read "
        f"+ written, {timed}",
        "cores": "torch.cuda.get_device_properties: multiprocessors (SMs)",
    }
    if raw.get("llc_bytes"):
        provenance["llc_bytes"] = "torch.cuda.get_device_properties: L2 cache size"
    return HardwareSpec(
        name=label,
        backend=GPU_BACKEND,
        matmul_rate=raw["matmul_rate"],
        vector_rate=raw["matmul_rate"],
        bandwidth=raw["bandwidth"],
        cores=int(raw["cores"]),
        llc_bytes=raw.get("llc_bytes"),
        provenance=provenance,
    )
