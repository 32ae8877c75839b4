import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Performs a standard 1D convolution operation.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias: bool = False):
        super().__init__()
        self.conv1d = nn.Conv1d(in_channels, out_channels, kernel_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d(x)


batch_size = 4
in_channels = 6
out_channels = 10
kernel_size = 3
length = 64
bias = True


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias]
