"""lora in PyTorch, as an engineer writes it: x @ w + (x @ a) @ b."""

import torch


def forward(
    x: torch.Tensor, w: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """x [M, K], w [K, N], a [K, R], b [R, N] -> (out [M, N],)."""
    return (x @ w + (x @ a) @ b,)
