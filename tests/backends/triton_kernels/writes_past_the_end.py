"""Stores 16 floats past the end of its output (no mask on the last block)."""

import triton
import triton.language as tl


@triton.jit
def _silu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(y_ptr + offsets, x / (1.0 + tl.exp(-x)), mask=offsets < n + 16)


def kernel(x, y):
    n = x.numel()
    _silu[(triton.cdiv(n + 16, 1024),)](x, y, n, BLOCK=1024)
