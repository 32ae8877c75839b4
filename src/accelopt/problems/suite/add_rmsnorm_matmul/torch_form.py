"""add_rmsnorm_matmul in PyTorch, as an engineer writes it: RMSNorm(x + z) * g, then @ w."""

import torch

EPS = 1e-5


def forward(
    x: torch.Tensor, z: torch.Tensor, g: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """x, z [M, K], g [K], w [K, N] -> (out [M, N],); the RMS is over K, eps 1e-5 inside."""
    y = x + z
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + EPS) * g
    return (y @ w,)
