"""Buffers handed to kernels: float32, C-contiguous and 64-byte aligned (one cache line, one
AVX-512 vector), so aligned vector loads are legal on every argument.

Every host buffer sits inside a larger block, with room on each side for guard regions
(``guards.py`` fills and checks them); a *fenced* block is also flanked by inaccessible pages:

    [fence: PROT_NONE] [guard >= 4 KiB] [buffer, 64-byte aligned] [guard >= 4 KiB] [fence]

A write that lands in a guard region is found after the call (the kernel is INCORRECT); any access
that reaches a fence kills the kernel with SIGSEGV (CRASH). Fences cost address space, not memory.
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass

import numpy as np

# Every buffer the harness hands a kernel starts on a 64-byte boundary (a cache line, one
# AVX-512 vector): part of the kernel contract, so aligned vector loads are legal.
BUFFER_ALIGNMENT = 64
ALIGNMENT = BUFFER_ALIGNMENT
# The timed calls rotate input/output sets spanning at least this much memory (and four
# last-level caches), so a kernel's inputs are cold at every call: part of what agents are told.
COLD_SPAN_BYTES = 512 << 20
# Guard region on each side of every host buffer, at least: one page, 1024 floats. It catches the
# usual overruns (a vector or an unrolled loop past a tail, a tile row of up to 1024 floats) in
# every call, timed ones included; farther accesses reach the fence in the correctness calls.
GUARD_BYTES = 4096
# Inaccessible address space on each side of a fenced buffer (the correctness calls): an access up
# to 16 MiB beyond the guard (a row or a tile past the end, a wrong stride) faults. Reserved, never
# backed by memory, so its size costs nothing but address space.
FENCE_BYTES = 16 << 20
PAGE_BYTES = mmap.PAGESIZE
PROT_NONE = 0
HUGE_PAGE_MIN_BYTES = 4 << 20

_F32 = np.dtype(np.float32).itemsize


@dataclass(frozen=True)
class HostBuffer:
    """A buffer and the memory either side of it, in one block (flat float32 views)."""

    array: np.ndarray  # what the kernel gets: aligned, C-contiguous
    before: np.ndarray  # everything from the block's start (or the fence) up to the buffer
    after: np.ndarray  # everything from just past the buffer to the block's end (or the fence)


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _heap_block(floats: int) -> np.ndarray:
    return np.empty(floats, dtype=np.float32)


def _mprotect(address: int, length: int, prot: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(ctypes.c_void_p(address), ctypes.c_size_t(length), prot) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mprotect of a buffer fence failed: {errno}")


def _fenced_block(floats: int, fence_bytes: int) -> np.ndarray:
    """``floats`` (rounded up to whole pages) of fresh private memory between two fences; the
    block lives (and the mapping with it) as long as any view of the returned array."""
    usable = _round_up(floats * _F32, PAGE_BYTES)
    fence = _round_up(fence_bytes, PAGE_BYTES)
    mapping = mmap.mmap(
        -1,
        fence + usable + fence,
        flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
        prot=mmap.PROT_READ | mmap.PROT_WRITE,
    )
    if usable >= HUGE_PAGE_MIN_BYTES and hasattr(mmap, "MADV_HUGEPAGE"):
        mapping.madvise(mmap.MADV_HUGEPAGE, fence, usable)  # as NumPy does: fewer page faults
    whole = np.frombuffer(mapping, dtype=np.uint8)  # holds the mapping; never read
    start = whole.ctypes.data
    _mprotect(start, fence, PROT_NONE)
    _mprotect(start + fence + usable, fence, PROT_NONE)
    return whole[fence : fence + usable].view(np.float32)


def allocate(
    shape: tuple[int, ...], guard_bytes: int = GUARD_BYTES, fence_bytes: int = 0
) -> HostBuffer:
    """A float32 buffer of ``shape``, 64-byte aligned, with at least ``guard_bytes`` of its block
    on each side; between fences of ``fence_bytes`` when that is not 0 (then the buffer starts
    exactly ``guard_bytes`` after a page boundary)."""
    if guard_bytes % ALIGNMENT:
        raise ValueError(f"guard_bytes must be a multiple of {ALIGNMENT}")
    count = int(np.prod(shape, dtype=np.int64))
    lead = guard_bytes // _F32
    if fence_bytes:
        block = _fenced_block(lead + count + lead, fence_bytes)  # starts on a page boundary
        offset = lead
    else:
        block = _heap_block(lead + count + lead + ALIGNMENT // _F32)
        offset = lead + (-(block.ctypes.data + guard_bytes) % ALIGNMENT) // _F32
    return HostBuffer(
        array=block[offset : offset + count].reshape(shape),
        before=block[:offset],
        after=block[offset + count :],
    )
