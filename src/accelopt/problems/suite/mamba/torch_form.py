"""mamba in PyTorch, as an engineer writes it: selective_scan_ref, a Python loop over steps."""

import torch

# torch.compile unrolls the loop over M steps (7,168 at the cpu size): compiling takes longer than
# any deadline, so the inductor kind leaves mamba out and says so (backends/pytorch/backend.py).
NOT_COMPILED = "torch.compile unrolls its Python loop over the sequence (too long to compile)"


def forward(
    delta: torch.Tensor, u: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """delta, u [C, M], a [C, S], b, c [S, M] -> (out [C, M],).

    Per channel the state h [S] starts at zero; step i: h = exp(delta_i * a) * h + delta_i * u_i
    * b_i, out_i = c_i . h (mamba_ssm's selective_scan_ref, without batch, D, z or delta bias)."""
    delta_a = torch.exp(torch.einsum("cm,cs->cms", delta, a))  # [C, M, S]
    delta_b_u = torch.einsum("cm,sm,cm->cms", delta, b, u)  # [C, M, S]
    h = delta.new_zeros(a.shape)  # [C, S]
    ys = []
    for i in range(delta.shape[1]):
        h = delta_a[:, i] * h + delta_b_u[:, i]
        ys.append(torch.einsum("cs,s->c", h, c[:, i]))
    return (torch.stack(ys, dim=1),)
