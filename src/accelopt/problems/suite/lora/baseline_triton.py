"""lora baseline (Triton): out = x @ w + (x @ a) @ b, two tiled matmul kernels.

Kernel 1 computes the rank-R intermediate xa = x @ a into an [M, R] scratch buffer. Kernel 2 is a
tiled matmul with one program per BLOCK_M x BLOCK_N output tile (1-D grid, grouped along M for L2
reuse) that accumulates x @ w over K and then xa @ b over R into the same fp32 accumulator, so the
adapter add is fused and out is written once. Every product is a masked K loop of fp32 (IEEE)
tl.dot.
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
def _dot_acc(
    acc,
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
    BLOCK_K: tl.constexpr,
):
    """acc + a[rows, :K] @ b[:K, cols], looping over K in masked BLOCK_K chunks."""
    offs_k = tl.arange(0, BLOCK_K)
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
    return acc


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
    """c = a @ b (used for xa = x @ a)."""
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = _dot_acc(
        acc, a_ptr, b_ptr, offs_m, mask_m, offs_n, mask_n, K,
        stride_am, stride_ak, stride_bk, stride_bn, BLOCK_K,
    )  # fmt: skip
    tl.store(
        c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
        acc,
        mask=mask_m[:, None] & mask_n[None, :],
    )


@triton.jit
def _lora_out(
    x_ptr,
    w_ptr,
    xa_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    R,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_xam,
    stride_xar,
    stride_br,
    stride_bn,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """out = x @ w + xa @ b, one output tile per program."""
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = _dot_acc(
        acc, x_ptr, w_ptr, offs_m, mask_m, offs_n, mask_n, K,
        stride_xm, stride_xk, stride_wk, stride_wn, BLOCK_K,
    )  # fmt: skip
    acc = _dot_acc(
        acc, xa_ptr, b_ptr, offs_m, mask_m, offs_n, mask_n, R,
        stride_xam, stride_xar, stride_br, stride_bn, BLOCK_K,
    )  # fmt: skip
    tl.store(
        out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on,
        acc,
        mask=mask_m[:, None] & mask_n[None, :],
    )


def kernel(
    x: torch.Tensor, w: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor
) -> None:
    M, K = x.shape
    N = w.shape[1]
    R = a.shape[1]
    block_m, block_n, block_k = 64, 64, 32
    xa = torch.empty((M, R), device=x.device, dtype=torch.float32)
    _matmul[(triton.cdiv(M, block_m) * triton.cdiv(R, block_n),)](
        x,
        a,
        xa,
        M,
        R,
        K,
        x.stride(0),
        x.stride(1),
        a.stride(0),
        a.stride(1),
        xa.stride(0),
        xa.stride(1),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=8,
    )
    _lora_out[(triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)](
        x,
        w,
        xa,
        b,
        out,
        M,
        N,
        K,
        R,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        w.stride(1),
        xa.stride(0),
        xa.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=8,
    )
