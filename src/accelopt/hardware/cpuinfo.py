"""What this machine is: CPU model, usable CPUs, last-level cache. Read from Linux's /proc and /sys,
with portable fallbacks; nothing here measures anything."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
SIZE_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30}


def cpu_model_name(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name ("model name" in /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux: no affinity masks
        return max(1, os.cpu_count() or 1)


def parse_cache_size(text: str) -> int:
    """A sysfs cache size such as ``32768K`` or ``1M``, in bytes."""
    text = text.strip()
    multiplier = SIZE_SUFFIXES.get(text[-1:].upper(), 1)
    digits = text[:-1] if text[-1:].upper() in SIZE_SUFFIXES else text
    return int(digits) * multiplier


def llc_level_and_bytes(root: Path = CACHE_SYSFS) -> tuple[int, int] | None:
    """The level and size of CPU 0's highest unified cache, from sysfs ``cache/index*``."""
    return last_level(cache_levels(root))


def last_level(levels: list[CacheLevel]) -> tuple[int, int] | None:
    """The level and size of the highest unified cache among ``levels``."""
    unified = [c for c in levels if c.kind == "Unified"]
    top = max(unified, key=lambda c: c.level, default=None)
    return (top.level, top.size_bytes) if top else None


@dataclass(frozen=True)
class CacheLevel:
    level: int
    kind: str  # "Data", "Instruction", "Unified"
    size_bytes: int
    shared_by: int  # CPUs that share one instance (1: private to a core)


def _count_cpus(cpu_list: str) -> int:
    """CPUs in a sysfs list such as ``0-3,8``."""
    count = 0
    for part in cpu_list.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        count += int(hi) - int(lo) + 1 if hi else 1
    return max(count, 1)


def cache_levels(root: Path = CACHE_SYSFS) -> list[CacheLevel]:
    """CPU 0's caches as sysfs lists them (``cache/index*``), by level; [] when unreadable."""
    levels = []
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = parse_cache_size((index / "size").read_text())
            shared_path = index / "shared_cpu_list"
            shared = shared_path.read_text() if shared_path.exists() else "0"
            levels.append(CacheLevel(level, kind, size, _count_cpus(shared)))
        except (OSError, ValueError):
            continue
    return sorted(levels, key=lambda c: (c.level, c.kind))


def data_cache(levels: list[CacheLevel], level: int) -> CacheLevel | None:
    """The data (or unified) cache of ``level``."""
    return next((c for c in levels if c.level == level and c.kind in ("Data", "Unified")), None)
