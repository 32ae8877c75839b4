"""Canaries: catch a kernel that skips work on repeated calls, at no cost to the timing.

Before each timed call a few output elements of the set about to be used (the first, the last
and one at random, per output) are set to NaN; after the call they must have been written. A
kernel that remembers a set and returns early leaves them NaN. Three scalar writes per output,
outside the timed window, leave the caches as they were.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Canaries:
    def __init__(self, outputs_per_set: Sequence[Sequence[np.ndarray]], seed: int) -> None:
        self._flat = [[out.reshape(-1) for out in outs] for outs in outputs_per_set]
        self._rng = np.random.default_rng(seed)
        self._armed: list[tuple[np.ndarray, np.ndarray]] = []

    def arm(self, set_index: int) -> None:
        self._armed = []
        for flat in self._flat[set_index]:
            where = np.array([0, flat.size - 1, self._rng.integers(flat.size)])
            flat[where] = np.nan
            self._armed.append((flat, where))

    def written(self) -> bool:
        """Whether every canary of the last armed set was overwritten."""
        return all(not np.isnan(flat[where]).any() for flat, where in self._armed)
