"""gqa_full in PyTorch, as an engineer writes it: F.scaled_dot_product_attention(enable_gqa)."""

import torch
import torch.nn.functional as F


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q [B, N, QH, D], k and v [B, N, KH, D] (token-major) -> (out [B, QH, N, D],) (head-major).

    Non-causal, scale 1/sqrt(D) (SDPA's default); with enable_gqa, query head h reads key/value
    head h // (QH / KH), as the reference does."""
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    return (F.scaled_dot_product_attention(q, k, v, enable_gqa=True),)
