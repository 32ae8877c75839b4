"""matmul in PyTorch, as an engineer writes it: lhs @ rhs."""

import torch


def forward(lhs: torch.Tensor, rhs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """lhs [M, K], rhs [K, N] -> (out [M, N],)."""
    return (lhs @ rhs,)
