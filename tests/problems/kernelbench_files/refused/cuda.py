import torch
import torch.nn as nn


class Model(nn.Module):
    """Runs on the GPU."""

    def forward(self, x):
        return torch.relu(x)


batch_size = 8
dim = 16


def get_inputs():
    return [torch.rand(batch_size, dim).cuda()]


def get_init_inputs():
    return []
