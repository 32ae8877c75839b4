"""NVIDIA GPUs on this machine, as ``nvidia-smi`` lists them (no CUDA context is created).

``CUDA_VISIBLE_DEVICES`` is honoured: the GPU a kernel runs on is the first one it names (by
index or UUID). Indices are nvidia-smi's (PCI bus order); workers get ``CUDA_DEVICE_ORDER=
PCI_BUS_ID`` so that CUDA numbers GPUs the same way. MIG instances are not supported.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from accelopt import settings

QUERY = "index,name,uuid,memory.total"


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str  # e.g. "NVIDIA H200"
    uuid: str  # e.g. "GPU-5f1c..."
    memory_mib: int


def parse_query(text: str) -> list[GpuInfo]:
    """Rows of ``nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,
    nounits``; lines that do not parse are skipped."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        memory = int(parts[3]) if parts[3].isdigit() else 0
        gpus.append(GpuInfo(int(parts[0]), parts[1], parts[2], memory))
    return gpus


def list_gpus() -> list[GpuInfo]:
    """The machine's NVIDIA GPUs; [] when there is no ``nvidia-smi`` or it fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run(
            [smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_query(done.stdout) if done.returncode == 0 else []


def select(gpus: list[GpuInfo], visible: str | None) -> GpuInfo | None:
    """The GPU CUDA calls device 0 under ``CUDA_VISIBLE_DEVICES=visible``."""
    if not gpus:
        return None
    if visible is None or not visible.strip():
        return gpus[0] if visible is None else None
    first = visible.split(",")[0].strip()
    if not first:  # CUDA stops at the first invalid entry: no device
        return None
    if first.isdigit():
        return next((g for g in gpus if g.index == int(first)), None)
    return next((g for g in gpus if g.uuid.startswith(first)), None)


def current_gpu() -> GpuInfo | None:
    """The GPU kernels run on here, or None when there is none."""
    return select(list_gpus(), settings.cuda_visible_devices())


def datasheet_name(gpu_name: str) -> str | None:
    """The datasheet entry for a GPU model name (``NVIDIA H200`` -> ``h200``), when known. The
    datasheets are the SXM parts': PCIe, NVL and Grace Hopper (GH200) variants have other clocks,
    SM counts or memory, so they have none (and are measured)."""
    lowered = gpu_name.lower()
    if any(variant in lowered for variant in ("pcie", "nvl", "gh200")):
        return None
    for key in ("h200", "h100"):
        if key in lowered:
            return key
    return None
