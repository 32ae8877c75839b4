"""transpose_matmul baseline (Triton): tiled out = lhs_t^T @ rhs.

One program per BLOCK_M x BLOCK_N output tile (1-D grid, grouped along M for L2 reuse); the K
loop loads the BLOCK_M x BLOCK_K left tile straight out of the K-major lhs_t through its strides
(contiguous along M, so no transpose pass), the BLOCK_K x BLOCK_N rhs tile, masked at the edges,
and accumulates with an fp32 (IEEE) tl.dot.
"""

import torch
import triton
import triton.language as tl


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
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M row-tiles sweep the N tiles together, so rhs tiles stay in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

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


def kernel(lhs_t: torch.Tensor, rhs: torch.Tensor, out: torch.Tensor) -> None:
    K, M = lhs_t.shape
    N = rhs.shape[1]
    block_m, block_n, block_k = 64, 64, 32
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    _matmul[grid](
        lhs_t,
        rhs,
        out,
        M,
        N,
        K,
        lhs_t.stride(1),  # stride along M of the left matrix
        lhs_t.stride(0),  # stride along K
        rhs.stride(0),
        rhs.stride(1),
        out.stride(0),
        out.stride(1),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=8,
    )
