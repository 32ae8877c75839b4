import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by dropout."""

    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.dropout = nn.Dropout(p=0.5)

    def forward(self, x):
        return self.dropout(self.linear(x))


batch_size = 8
features = 16


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
