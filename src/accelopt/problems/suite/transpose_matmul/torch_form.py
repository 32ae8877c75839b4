"""transpose_matmul in PyTorch, as an engineer writes it: lhs_t.T @ rhs (a transposed view)."""

import torch


def forward(lhs_t: torch.Tensor, rhs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """lhs_t [K, M] (the left operand stored K-major), rhs [K, N] -> (out [M, N],)."""
    return (lhs_t.T @ rhs,)
