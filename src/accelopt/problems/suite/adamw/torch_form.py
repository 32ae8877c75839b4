"""adamw in PyTorch, as an engineer writes it: torch.optim.AdamW's step-1 math, functional."""

import math

import torch

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEP = 1e-3, 0.9, 0.999, 1e-8, 0.01, 1


def forward(
    theta: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """theta, g, m, v [M, N] -> (out [M, N],), the new theta (the problem returns no moments)."""
    theta = theta * (1 - LR * WEIGHT_DECAY)  # decoupled weight decay
    m = BETA1 * m + (1 - BETA1) * g
    v = BETA2 * v + (1 - BETA2) * g * g
    bias_correction1 = 1 - BETA1**STEP
    bias_correction2 = 1 - BETA2**STEP
    denom = v.sqrt() / math.sqrt(bias_correction2) + EPS
    return (theta - (LR / bias_correction1) * m / denom,)
