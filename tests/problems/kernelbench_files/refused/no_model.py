import torch

size = 4


def get_inputs():
    return [torch.rand(size)]


def get_init_inputs():
    return []
