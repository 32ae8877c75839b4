"""matmul_add_rmsnorm baseline (Triton): two kernels. First a tiled matmul (BLOCK_M x BLOCK_N
output tiles, a loop over BLOCK_K-deep slices, fp32 accumulation) writes y = x @ w + z into out;
then one program per row computes the inverse RMS of that row over N (a loop over BLOCK-wide
chunks) and rescales it in place by inv * g."""

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_add(
    x_ptr,
    w_ptr,
    z_ptr,
    y_ptr,
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
        a = tl.load(
            x_ptr + rows64[:, None] * K + k[None, :],
            mask=row_mask[:, None] & k_mask[None, :],
            other=0.0,
        )
        b = tl.load(
            w_ptr + k.to(tl.int64)[:, None] * N + cols64[None, :],
            mask=k_mask[:, None] & col_mask[None, :],
            other=0.0,
        )
        acc += tl.dot(a, b, input_precision="ieee")
    offsets = rows64[:, None] * N + cols64[None, :]
    mask = row_mask[:, None] & col_mask[None, :]
    acc += tl.load(z_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, acc, mask=mask)


@triton.jit
def _rmsnorm_inplace(y_ptr, g_ptr, N, BLOCK: tl.constexpr):
    y_row = y_ptr + tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for n0 in range(0, N, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        y = tl.load(y_row + cols, mask=cols < N, other=0.0)
        acc += y * y
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + 1e-5)
    for n0 in range(0, N, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        mask = cols < N
        y = tl.load(y_row + cols, mask=mask)
        gain = tl.load(g_ptr + cols, mask=mask)
        tl.store(y_row + cols, y * inv * gain, mask=mask)


def kernel(
    x: torch.Tensor, w: torch.Tensor, z: torch.Tensor, g: torch.Tensor, out: torch.Tensor
) -> None:
    M, K = x.shape
    N = w.shape[1]
    block_m, block_n, block_k = 64, 64, 32
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _matmul_add[grid](x, w, z, out, M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    _rmsnorm_inplace[(M,)](out, g, N, BLOCK=256)
