"""The rotation of input/output sets: a pure function (the timing statistics are
``profiling/stats.py``)."""

from __future__ import annotations

import math

from accelopt.backends.buffers import COLD_SPAN_BYTES

MAX_ROTATION_SETS = 64
MIN_ROTATION_SETS = 2
LLC_SPAN = 4  # the sets together span at least this many last-level caches


def rotation_sets(set_bytes: int, llc_bytes: int | None, budget_bytes: int) -> int:
    """How many input/output sets to rotate so that the timed calls start from memory.

    At least two sets, together spanning COLD_SPAN_BYTES or four last-level caches, whichever is
    larger. Caches here do not behave as their size suggests: AMD's L3 is a victim cache, and on
    this VM a working set of four L3s still streams at twice the bandwidth of half a gigabyte
    (measured: a non-temporal triad at 130 GB/s over 128 MiB, 60 GB/s over 384 MiB; adamw 0.8 ms
    with one set, 1.8 ms with several). The bandwidth ceiling is measured over arrays of the same
    span, so kernels and ceiling see the same memory. Capped by the memory budget and at
    MAX_ROTATION_SETS (very small problems then stay partly cache-resident, as on any device).
    """
    llc = llc_bytes or 32 << 20
    span = max(COLD_SPAN_BYTES, LLC_SPAN * llc)
    wanted = max(MIN_ROTATION_SETS, math.ceil(span / max(set_bytes, 1)))
    affordable = max(1, budget_bytes // max(set_bytes, 1))
    return int(max(1, min(wanted, affordable, MAX_ROTATION_SETS)))
