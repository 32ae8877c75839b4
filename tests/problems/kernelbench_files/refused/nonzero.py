import torch
import torch.nn as nn


class Model(nn.Module):
    """Keeps the elements above one half."""

    def forward(self, x):
        idx = torch.nonzero(x > 0.5, as_tuple=True)
        return x[idx]


batch_size = 8
dim = 16


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
