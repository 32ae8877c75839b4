"""The cache sizes a C kernel is built with: ``ACCELOPT_L1D_BYTES`` and ``ACCELOPT_L2_BYTES``,
this machine's level-1 data and level-2 caches as sysfs lists them, so that a kernel derives its
cache blocking from the machine it runs on rather than from one machine's constants.

They are -D macros beside the sizes (and so part of the build's cache key). A cache sysfs does
not list, and every cache of a cross build (the target is another machine), is left undefined:
a kernel keeps a default behind ``#ifndef``.
"""

from __future__ import annotations

from functools import cache

from accelopt.hardware.cpuinfo import cache_levels, data_cache
from accelopt.hardware.toolchain import Compiler

MACROS = {1: "ACCELOPT_L1D_BYTES", 2: "ACCELOPT_L2_BYTES"}


@cache
def _measured() -> dict[str, int]:
    levels = cache_levels()
    found = {}
    for level, name in MACROS.items():
        level_cache = data_cache(levels, level)
        if level_cache is not None and level_cache.size_bytes > 0:
            found[name] = level_cache.size_bytes
    return found


def cache_macros(cc: Compiler) -> dict[str, int]:
    """The cache-size macros for a kernel built by ``cc``: none for a cross compiler."""
    return {} if cc.cross else dict(_measured())
