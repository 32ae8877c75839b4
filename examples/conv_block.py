"""A small convolutional block that no problem of the suite computes: ``accelopt model profile``
shows where its time goes and, for each hot part, what an endpoint would add (no kernel is
swapped, and ``optimize`` says so rather than claiming a gain).

    accelopt model profile examples/conv_block.py
"""

import torch
import torch.nn.functional as F
from torch import nn

BATCH, CHANNELS, SIZE = 8, 32, 56


class Model(nn.Module):
    def __init__(self, channels: int = CHANNELS):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.max_pool2d(F.relu(x + y), 2)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return []
