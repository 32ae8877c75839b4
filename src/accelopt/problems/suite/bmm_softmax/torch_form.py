"""bmm_softmax in PyTorch, as an engineer writes it: torch.softmax(torch.bmm(lhs, rhs), dim=-1)."""

import torch


def forward(lhs: torch.Tensor, rhs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """lhs [B, M, K], rhs [B, K, N] -> (out [B, M, N],), the softmax over N."""
    return (torch.softmax(torch.bmm(lhs, rhs), dim=-1),)
