"""adamw baseline (Triton): the t = 1 update elementwise, one program per block of BLOCK elements
of the flattened matrices."""

import torch
import triton
import triton.language as tl


@triton.jit
def _adamw(theta_ptr, g_ptr, m_ptr, v_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    theta = tl.load(theta_ptr + offsets, mask=mask)
    g = tl.load(g_ptr + offsets, mask=mask)
    m = tl.load(m_ptr + offsets, mask=mask)
    v = tl.load(v_ptr + offsets, mask=mask)
    m1 = 0.9 * m + 0.1 * g
    v1 = 0.999 * v + 0.001 * g * g
    out = theta * (1.0 - 1e-5) - 0.01 * m1 / (tl.sqrt(1000.0 * v1) + 1e-8)
    tl.store(out_ptr + offsets, out, mask=mask)


def kernel(
    theta: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, out: torch.Tensor
) -> None:
    n = theta.numel()
    block = 1024
    _adamw[(triton.cdiv(n, block),)](theta, g, m, v, out, n, BLOCK=block)
