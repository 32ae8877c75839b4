"""mamba baseline (Triton): one program per block of BLOCK_C channels, holding their states
h[BLOCK_C, BLOCK_S] (S padded to a power of 2, masked) in registers and looping over the M steps
in order: per step, load delta and u for the channels and the b and c columns, update h, and
store out[ch, i] = sum_s c[s, i] * h[ch, s]."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scan(
    delta_ptr,
    u_ptr,
    a_ptr,
    b_ptr,
    c_ptr,
    out_ptr,
    M,
    C,
    S,
    BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    chans = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    states = tl.arange(0, BLOCK_S)
    c_mask = chans < C
    s_mask = states < S
    chan_rows = chans.to(tl.int64) * M  # offsets of the channels' rows in delta, u, out
    state_rows = states.to(tl.int64) * M  # offsets of the states' rows in b, c
    # Padded lanes get a = 0 and b = c = 0, so their h stays 0 and adds nothing to out.
    a = tl.load(
        a_ptr + chans.to(tl.int64)[:, None] * S + states[None, :],
        mask=c_mask[:, None] & s_mask[None, :],
        other=0.0,
    )
    h = tl.zeros((BLOCK_C, BLOCK_S), dtype=tl.float32)
    for i in range(0, M):
        d = tl.load(delta_ptr + chan_rows + i, mask=c_mask, other=0.0)
        u = tl.load(u_ptr + chan_rows + i, mask=c_mask, other=0.0)
        b = tl.load(b_ptr + state_rows + i, mask=s_mask, other=0.0)
        c = tl.load(c_ptr + state_rows + i, mask=s_mask, other=0.0)
        h = tl.exp(d[:, None] * a) * h + (d * u)[:, None] * b[None, :]
        y = tl.sum(h * c[None, :], axis=1)
        tl.store(out_ptr + chan_rows + i, y, mask=c_mask)


def kernel(
    delta: torch.Tensor,
    u: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    out: torch.Tensor,
) -> None:
    C, M = delta.shape
    S = a.shape[1]
    block_c = 2
    block_s = triton.next_power_of_2(S)
    _scan[(triton.cdiv(C, block_c),)](
        delta, u, a, b, c, out, M, C, S, BLOCK_C=block_c, BLOCK_S=block_s, num_warps=1
    )
