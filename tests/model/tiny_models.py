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


class Attention(nn.Module):
    """Grouped-query attention as LLaMA-style code writes it: projections viewed as heads,
    transposed to heads-major, k and v repeated to every query head, SDPA."""

    def __init__(self, causal: bool, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.causal, self.heads, self.kv_heads = causal, heads, kv_heads
        self.head_dim = DIM // heads
        self.q = nn.Linear(DIM, DIM, bias=False)
        self.kv = nn.Linear(DIM, 2 * kv_heads * self.head_dim, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).chunk(2, dim=-1)
        k = k.reshape(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return F.scaled_dot_product_attention(q, repeat_kv(k, self.heads), repeat_kv(v, self.heads),
                                              is_causal=self.causal)  # fmt: skip


def repeat_kv(x, heads: int):
    b, kv_heads, t, d = x.shape
    return x[:, :, None].expand(b, kv_heads, heads // kv_heads, t, d).reshape(b, heads, t, d)
