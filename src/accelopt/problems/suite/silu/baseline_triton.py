"""silu baseline (Triton): one program per block of BLOCK elements of the flattened matrix."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024  # tune: 256 512 1024 2048 4096


@triton.jit
def _silu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, x / (1.0 + tl.exp(-x)), mask=mask)


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    n = x.numel()
    _silu[(triton.cdiv(n, BLOCK_SIZE),)](x, y, n, BLOCK=BLOCK_SIZE)
