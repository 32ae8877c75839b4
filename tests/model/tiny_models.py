"""Tiny models for the model path's tests, written as people write them."""

import torch
import torch.nn.functional as F
from torch import nn

DIM, HIDDEN = 32, 48


def rmsnorm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class TinyBlock(nn.Module):
    """A projection and residual, an RMSNorm (eps 1e-6), a SwiGLU MLP and residual."""

    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.proj = nn.Linear(DIM, DIM, bias=False)
        self.norm = nn.Parameter(1 + 0.1 * torch.randn(DIM))
        self.gate = nn.Linear(DIM, HIDDEN, bias=False)
        self.up = nn.Linear(DIM, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        h = x + self.proj(x)
        n = rmsnorm(h, self.norm, self.eps)
        return h + self.down(F.silu(self.gate(n)) * self.up(n))


class NormProjection(nn.Module):
    """x + proj(x), then RMSNorm with a gain and ``eps``, then a projection: the suite's
    add_rmsnorm_matmul when eps is 1e-5, a near miss otherwise."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps
        self.proj = nn.Linear(DIM, DIM, bias=False)
        self.norm = nn.Parameter(1 + 0.1 * torch.randn(DIM))
        self.out = nn.Linear(DIM, HIDDEN, bias=False)

    def forward(self, x):
        return self.out(rmsnorm(x + self.proj(x), self.norm, self.eps))


Model = TinyBlock


def get_inputs():
    return [torch.randn(2, 8, DIM)]


def get_init_inputs():
    return []
