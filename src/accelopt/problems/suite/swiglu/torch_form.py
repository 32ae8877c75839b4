"""swiglu in PyTorch, as an engineer writes it: (F.silu(x @ w_gate) * (x @ w_up)) @ w_down."""

import torch
import torch.nn.functional as F


def forward(
    x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, w_gate: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """x [M, K], w_up [K, N], w_down [N, K], w_gate [K, N] -> (out [M, K],)."""
    return ((F.silu(x @ w_gate) * (x @ w_up)) @ w_down,)
