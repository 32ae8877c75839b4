"""A LLaMA-style decoder block at CPU-friendly sizes, written as people write it (the layout of
Hugging Face's LlamaDecoderLayer: RMSNorm, q/k/v projections, rotary embedding by rotate_half,
grouped-query attention with repeat_kv and causal SDPA, output projection and residual, RMSNorm,
SwiGLU MLP and residual).

    accelopt model profile examples/llama_block.py
    accelopt model optimize examples/llama_block.py

KernelBench's convention: ``Model``, ``get_inputs()``, ``get_init_inputs()``.
"""

import torch
import torch.nn.functional as F
from torch import nn

BATCH, SEQ = 1, 256
DIM, HEADS, KV_HEADS = 512, 8, 4
HIDDEN = 1536
EPS = 1e-5
THETA = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(x, n_rep: int):
    b, h, t, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Model(nn.Module):
    """One decoder block: x [BATCH, SEQ, DIM] -> [BATCH, SEQ, DIM]."""

    def __init__(self, dim=DIM, heads=HEADS, kv_heads=KV_HEADS, hidden=HIDDEN, seq=SEQ):
        super().__init__()
        self.input_layernorm = RMSNorm(dim, eps=EPS)
        self.self_attn = Attention(dim, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(dim, eps=EPS)
        self.mlp = MLP(dim, hidden)
        head_dim = dim // heads
        inv_freq = 1.0 / THETA ** (torch.arange(0, head_dim, 2).float() / head_dim)
        freqs = torch.outer(torch.arange(seq).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        for p in self.parameters():  # a trained model's weights are not all ones
            nn.init.normal_(p, std=0.02) if p.dim() > 1 else nn.init.normal_(p, 1.0, 0.1)

    def forward(self, x):
        t = x.shape[1]
        h = x + self.self_attn(self.input_layernorm(x), self.cos[:t], self.sin[:t])
        return h + self.mlp(self.post_attention_layernorm(h))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
