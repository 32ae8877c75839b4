"""Canaries: catch a kernel that skips work on repeated calls, at no cost to the timing.

Before each timed call a few output elements of the set about to be used (the first, the last
and one at random, per output) are set to NaN; after the call they must have been written. A
kernel that remembers a set and returns early leaves them NaN. Three scalar writes per output,
outside the timed window, leave the caches as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Array = Any  # a NumPy array or a torch tensor: indexed, flattened and compared alike


class Canaries:
    """Canaries in arrays the worker indexes directly: NumPy arrays (``HostDevice``, a Triton
    kernel's shared memory) or torch tensors (a Triton kernel's CUDA buffers, opened by IPC)."""

    def __init__(self, outputs_per_set: Sequence[Sequence[Array]], seed: int) -> None:
        self._flat = [[out.reshape(-1) for out in outs] for outs in outputs_per_set]
        self._rng = np.random.default_rng(seed)
        self._armed: list[tuple[Array, list[int]]] = []

    def arm(self, set_index: int) -> None:
        self._armed = []
        for flat in self._flat[set_index]:
            where = [0, len(flat) - 1, int(self._rng.integers(len(flat)))]
            flat[where] = float("nan")
            self._armed.append((flat, where))

    def written(self) -> bool:
        """Whether every canary of the last armed set was overwritten (NaN is the one value
        unequal to itself, in NumPy and in torch)."""
        for flat, where in self._armed:
            values = flat[where]
            if bool((values != values).any()):
                return False
        return True
