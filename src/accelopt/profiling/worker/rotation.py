"""The input/output sets a kernel is timed on, in rotation: how many (``rotation_sets``, a pure
function; the timing statistics are ``profiling/stats.py``), made before the kernel is loaded
(``make_sets``: a separate kernel process is trusted only until then), their inputs written after
the correctness check (``fill``: rolls of the last seed's inputs, ``freshness.py``)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelopt.backends.buffers import COLD_SPAN_BYTES
from accelopt.backends.device import Buffer, Device
from accelopt.profiling.worker.arguments import Arguments
from accelopt.profiling.worker.freshness import Freshness

MAX_ROTATION_SETS = 64
MIN_ROTATION_SETS = 2
LLC_SPAN = 4  # the sets together span at least this many last-level caches

RotationSets = list[tuple[tuple[Buffer, ...], list[Buffer]]]  # (inputs, outputs) per set


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


def make_sets(args: Arguments, llc_bytes: int | None, budget_bytes: int) -> RotationSets:
    """Input/output sets at distinct addresses: together they span the last-level caches (and
    COLD_SPAN_BYTES: ``rotation_sets``), so each timed call reads from memory. Filled after the
    check with rolls of the last seed's inputs (``fill``)."""
    count = rotation_sets(args.problem.buffer_bytes(args.sizes), llc_bytes, budget_bytes)
    return [(tuple(args.inputs()), args.outputs()) for _ in range(count)]


@dataclass(frozen=True)
class Rotation:
    """The sets a kernel is timed on, their inputs as the harness writes them (``fresh``), and
    the seconds one set's rewrite takes (measured filling them): what decides how often the
    timed batches rewrite them (``freshness.py``)."""

    sets: RotationSets
    fresh: Freshness
    refresh_s: float


def fill(
    device: Device, sets: RotationSets, base: Sequence[np.ndarray], rng: np.random.Generator
) -> Rotation:
    """Every set's inputs: independent random rolls of ``base`` (the last seed's inputs)."""
    fresh = Freshness(device, [ins for ins, _ in sets], base, rng)
    start = time.perf_counter()
    for index in range(len(sets)):
        fresh.refresh(index)
    return Rotation(sets, fresh, (time.perf_counter() - start) / max(len(sets), 1))
