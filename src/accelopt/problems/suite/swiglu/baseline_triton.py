"""swiglu baseline (Triton): out = (silu(x @ w_gate) * (x @ w_up)) @ w_down, two tiled kernels.

Kernel 1: one program per BLOCK_M x BLOCK_N tile of the hidden [M, N]; its K loop loads each x
tile once and feeds two fp32 (IEEE) tl.dot accumulators (gate and up), then applies
silu(gate) * up and stores the tile into an [M, N] scratch buffer. Kernel 2: a tiled matmul
out = hidden @ w_down. Both use a 1-D grid grouped along M for L2 reuse and masked edge tiles.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _tile_ids(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program: GROUP_M row-tiles sweep the N tiles together (L2 reuse)."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _gate_up(
    x_ptr,
    wg_ptr,
    wu_ptr,
    h_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_hm,
    stride_hn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """hidden = silu(x @ w_gate) * (x @ w_up); w_gate and w_up share strides."""
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N

    gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        mask_k = ks < K
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + ks[None, :] * stride_xk,
            mask=mask_m[:, None] & mask_k[None, :],
            other=0.0,
        )
        w_offs = ks[:, None] * stride_wk + offs_n[None, :] * stride_wn
        w_mask = mask_k[:, None] & mask_n[None, :]
        wg = tl.load(wg_ptr + w_offs, mask=w_mask, other=0.0)
        wu = tl.load(wu_ptr + w_offs, mask=w_mask, other=0.0)
        gate = tl.dot(x, wg, gate, input_precision="ieee")
        up = tl.dot(x, wu, up, input_precision="ieee")

    hidden = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(
        h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn,
        hidden,
        mask=mask_m[:, None] & mask_n[None, :],
    )


@triton.jit
def _matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """c = a @ b (used for out = hidden @ w_down)."""
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N

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

    tl.store(
        c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
        acc,
        mask=mask_m[:, None] & mask_n[None, :],
    )


def kernel(
    x: torch.Tensor,
    w_up: torch.Tensor,
    w_down: torch.Tensor,
    w_gate: torch.Tensor,
    out: torch.Tensor,
) -> None:
    M, K = x.shape
    N = w_up.shape[1]
    block_m, block_n, block_k = 64, 64, 32
    hidden = torch.empty((M, N), device=x.device, dtype=torch.float32)
    _gate_up[(triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)](
        x,
        w_gate,
        w_up,
        hidden,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w_up.stride(0),
        w_up.stride(1),
        hidden.stride(0),
        hidden.stride(1),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=8,
    )
    _matmul[(triton.cdiv(M, block_m) * triton.cdiv(K, block_n),)](
        hidden,
        w_down,
        out,
        M,
        K,
        N,
        hidden.stride(0),
        hidden.stride(1),
        w_down.stride(0),
        w_down.stride(1),
        out.stride(0),
        out.stride(1),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=8,
    )
