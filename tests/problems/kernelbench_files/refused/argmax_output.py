import torch
import torch.nn as nn


class Model(nn.Module):
    """Argmax over a dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmax(x, dim=self.dim)


batch_size = 8
dim1 = 16
dim = 1


def get_inputs():
    return [torch.rand(batch_size, dim1)]


def get_init_inputs():
    return [dim]
