"""add_rmsnorm_matmul baseline (Triton): two kernels. First one program per row computes the
inverse RMS of y = x + z over K (a loop over BLOCK-wide chunks) into a scratch vector inv[M];
then a tiled matmul (BLOCK_M x BLOCK_N output tiles, a loop over BLOCK_K-deep slices, fp32
accumulation) forms each A slice as (x + z) * g on the fly, multiplies it by w, and scales each
output row by its inv, which equals (y * inv * g) @ w."""

import torch
import triton
import triton.language as tl


@triton.jit
def _inv_rms(x_ptr, z_ptr, inv_ptr, K, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        cols = k0 + tl.arange(0, BLOCK)
        mask = cols < K
        y = tl.load(x_ptr + row * K + cols, mask=mask, other=0.0) + tl.load(
            z_ptr + row * K + cols, mask=mask, other=0.0
        )
        acc += y * y
    ss = tl.sum(acc, axis=0)
    tl.store(inv_ptr + row, 1.0 / tl.sqrt(ss / K + 1e-5))


@triton.jit
def _add_gain_matmul_row_scaled(
    x_ptr,
    z_ptr,
    g_ptr,
    w_ptr,
    inv_ptr,
    out_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_mask = rows < M
    col_mask = cols < N
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_mask = k < K
        a_offsets = rows64[:, None] * K + k[None, :]
        a_mask = row_mask[:, None] & k_mask[None, :]
        y = tl.load(x_ptr + a_offsets, mask=a_mask, other=0.0) + tl.load(
            z_ptr + a_offsets, mask=a_mask, other=0.0
        )
        gain = tl.load(g_ptr + k, mask=k_mask, other=0.0)
        b = tl.load(
            w_ptr + k.to(tl.int64)[:, None] * N + cols64[None, :],
            mask=k_mask[:, None] & col_mask[None, :],
            other=0.0,
        )
        acc += tl.dot(y * gain[None, :], b, input_precision="ieee")
    inv = tl.load(inv_ptr + rows, mask=row_mask, other=0.0)
    acc = acc * inv[:, None]
    tl.store(
        out_ptr + rows64[:, None] * N + cols64[None, :],
        acc,
        mask=row_mask[:, None] & col_mask[None, :],
    )


def kernel(
    x: torch.Tensor, z: torch.Tensor, g: torch.Tensor, w: torch.Tensor, out: torch.Tensor
) -> None:
    M, K = x.shape
    N = w.shape[1]
    inv = torch.empty((M,), device=x.device, dtype=torch.float32)
    _inv_rms[(M,)](x, z, inv, K, BLOCK=256)
    block_m, block_n, block_k = 64, 64, 32
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _add_gain_matmul_row_scaled[grid](
        x, z, g, w, inv, out, M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k
    )
