"""rope_single_freq_apply baseline (Triton): a 2D grid, axis 0 over blocks of BLOCK columns and
axis 1 over the D2 row pairs (r, r + D2); each program rotates one block of one row pair."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rope(x_ptr, cos_ptr, sin_ptr, out_ptr, T, D2, BLOCK: tl.constexpr):
    r = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < T
    lo = r * T + cols  # row r of x / out, and of cos / sin
    hi = (r + D2) * T + cols  # row r + D2 of x / out
    x0 = tl.load(x_ptr + lo, mask=mask)
    x1 = tl.load(x_ptr + hi, mask=mask)
    c = tl.load(cos_ptr + lo, mask=mask)
    s = tl.load(sin_ptr + lo, mask=mask)
    tl.store(out_ptr + lo, x0 * c - x1 * s, mask=mask)
    tl.store(out_ptr + hi, x0 * s + x1 * c, mask=mask)


def kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor) -> None:
    D2, T = cos.shape
    block = 1024
    _rope[(triton.cdiv(T, block), D2)](x, cos, sin, out, T, D2, BLOCK=block)
