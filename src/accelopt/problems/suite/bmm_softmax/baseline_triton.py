"""bmm_softmax baseline (Triton): out[b] = row-softmax(lhs[b] @ rhs[b]), fused, two passes.

One program per (batch, BLOCK_M-row block), flattened into a 1-D grid. Each score tile
lhs[b, rows, :] @ rhs[b, :, cols] is a short K loop of fp32 (IEEE) tl.dot. Pass 1 sweeps the N
columns in BLOCK_N chunks keeping an online row max and rescaled row sum of exp; pass 2 recomputes
each score tile and writes exp(s - max) / sum. The scores never go through global memory (the
small-K matmul is recomputed instead of stored and re-read). Batch offsets are 64-bit.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _score_tile(
    a_ptr,
    b_ptr,
    offs_m,
    mask_m,
    offs_n,
    mask_n,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """lhs[rows, :] @ rhs[:, cols] for one BLOCK_M x BLOCK_N tile; masked columns are -inf."""
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        mask_k = ks < K
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=mask_m[:, None] & mask_k[None, :],
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=mask_k[:, None] & mask_n[None, :],
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    return tl.where(mask_n[None, :], acc, float("-inf"))


@triton.jit
def _bmm_softmax(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_ab,
    stride_am,
    stride_ak,
    stride_bb,
    stride_bk,
    stride_bn,
    stride_cb,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    batch = (pid // num_pid_m).to(tl.int64)
    pid_m = pid % num_pid_m

    a_ptr += batch * stride_ab
    b_ptr += batch * stride_bb
    c_ptr += batch * stride_cb
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = offs_m < M
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: online row max and sum of exp(s - max) over all N columns.
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        offs_n = n0 + cols
        mask_n = offs_n < N
        s = _score_tile(
            a_ptr, b_ptr, offs_m, mask_m, offs_n, mask_n, K,
            stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K,
        )  # fmt: skip
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m_i = m_new

    # Pass 2: recompute the scores and write the normalized probabilities.
    inv_l = 1.0 / l_i
    for n0 in range(0, N, BLOCK_N):
        offs_n = n0 + cols
        mask_n = offs_n < N
        s = _score_tile(
            a_ptr, b_ptr, offs_m, mask_m, offs_n, mask_n, K,
            stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K,
        )  # fmt: skip
        p = tl.exp(s - m_i[:, None]) * inv_l[:, None]
        tl.store(
            c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
            p,
            mask=mask_m[:, None] & mask_n[None, :],
        )


def kernel(lhs: torch.Tensor, rhs: torch.Tensor, out: torch.Tensor) -> None:
    B, M, K = lhs.shape
    N = rhs.shape[2]
    block_m, block_n, block_k = 64, 64, 32
    grid = (B * triton.cdiv(M, block_m),)
    _bmm_softmax[grid](
        lhs,
        rhs,
        out,
        M,
        N,
        K,
        lhs.stride(0),
        lhs.stride(1),
        lhs.stride(2),
        rhs.stride(0),
        rhs.stride(1),
        rhs.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )
