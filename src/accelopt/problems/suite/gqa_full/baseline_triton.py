"""gqa_full baseline (Triton): non-causal grouped-query attention, flash-attention style.

One program per (batch, query head, BLOCK_M query rows), flattened into a 1-D grid. It sweeps the
N keys of key/value head h // (QH / KH) in BLOCK_N chunks: scores q k^T / sqrt(D) by fp32 (IEEE)
tl.dots accumulated over D in BLOCK_DC chunks, an online softmax (running row max, rescaled row
sum and output accumulator), and the p @ v tl.dot into the BLOCK_M x D accumulator (D padded to
a power of two and masked). The [N, N] score matrix never touches global memory; out is written
once, head-major. Batch offsets are 64-bit; the last (D) axis of every tensor is contiguous.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gqa_full(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    N,
    QH,
    KH,
    D,
    stride_qb,
    stride_qn,
    stride_qh,
    stride_kb,
    stride_kn,
    stride_kh,
    stride_vb,
    stride_vn,
    stride_vh,
    stride_ob,
    stride_oh,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DC: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(N, BLOCK_M)
    bh = pid // num_pid_m
    pid_m = pid % num_pid_m
    batch = (bh // QH).to(tl.int64)
    head = bh % QH
    kv_head = head // (QH // KH)

    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + kv_head * stride_kh
    v_ptr += batch * stride_vb + kv_head * stride_vh
    o_ptr += batch * stride_ob + head * stride_oh

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dc = tl.arange(0, BLOCK_DC)
    mask_m = offs_m < N
    mask_d = offs_d < D
    sm_scale = 1.0 / tl.sqrt(D.to(tl.float32))

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        offs_n = (n0 + tl.arange(0, BLOCK_N)).to(tl.int64)
        mask_n = offs_n < N
        # Scores q k^T, accumulated over D in BLOCK_DC chunks (a single D-deep fp32 FMA dot
        # would need far more registers); the q chunks are re-read, they stay in L1/L2.
        s = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_DC):
            ds = d0 + offs_dc
            mask_dc = ds < D
            q = tl.load(
                q_ptr + offs_m[:, None] * stride_qn + ds[None, :],
                mask=mask_m[:, None] & mask_dc[None, :],
                other=0.0,
            )
            k_t = tl.load(  # [BLOCK_DC, BLOCK_N]: the key tile, transposed through its strides
                k_ptr + offs_n[None, :] * stride_kn + ds[:, None],
                mask=mask_dc[:, None] & mask_n[None, :],
                other=0.0,
            )
            s = tl.dot(q, k_t, s, input_precision="ieee")
        s = s * sm_scale
        s = tl.where(mask_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(
            v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :],
            mask=mask_n[:, None] & mask_d[None, :],
            other=0.0,
        )
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new

    tl.store(
        o_ptr + offs_m[:, None] * stride_on + offs_d[None, :],
        acc / l_i[:, None],
        mask=mask_m[:, None] & mask_d[None, :],
    )


def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    B, N, QH, D = q.shape
    KH = k.shape[2]
    block_m, block_n, block_dc = 64, 64, 32
    block_d = max(16, triton.next_power_of_2(D))  # tl.dot needs every dimension >= 16
    grid = (B * QH * triton.cdiv(N, block_m),)
    _gqa_full[grid](
        q,
        k,
        v,
        out,
        N,
        QH,
        KH,
        D,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        v.stride(0),
        v.stride(1),
        v.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        BLOCK_DC=block_dc,
        num_warps=8,  # the 64 x D fp32 output accumulator needs the registers of 8 warps
    )
