"""Buffers handed to kernels: float32, C-contiguous and 64-byte aligned (one cache line, one
AVX-512 vector), so aligned vector loads are legal on every argument."""

from __future__ import annotations

import numpy as np

# Every buffer the harness hands a kernel starts on a 64-byte boundary (a cache line, one
# AVX-512 vector): part of the kernel contract, so aligned vector loads are legal.
BUFFER_ALIGNMENT = 64
ALIGNMENT = BUFFER_ALIGNMENT
# The timed calls rotate input/output sets spanning at least this much memory (and four
# last-level caches), so a kernel's inputs are cold at every call: part of what agents are told.
COLD_SPAN_BYTES = 512 << 20


def aligned_empty(shape: tuple[int, ...], fill: float | None = None) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count + ALIGNMENT // 4, dtype=np.float32)
    offset = (-raw.ctypes.data % ALIGNMENT) // 4
    array = raw[offset : offset + count].reshape(shape)
    if fill is not None:
        array.fill(fill)
    return array


def aligned_copy(source: np.ndarray) -> np.ndarray:
    array = aligned_empty(source.shape)
    np.copyto(array, source)
    return array
