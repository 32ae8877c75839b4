"""rope_single_freq_apply in PyTorch, as an engineer writes it: rotate halves, torch.cat."""

import torch


def forward(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """x [D, T] (head dim on rows, tokens on columns), cos and sin [D/2, T] -> (out [D, T],)."""
    x0, x1 = x.chunk(2, dim=0)
    return (torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=0),)
