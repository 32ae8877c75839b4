"""Timed calls that cannot be answered from memory.

Every timed call gets inputs no earlier call saw: before a set is used, ``Freshness`` copies the
values of a few random positions of each of its inputs from other random positions of the same
tensor (so every value stays one the problem's generator made: a non-negative input stays
non-negative). A kernel that keeps results by buffer address or by content, or recomputes only the
outputs the canaries mark, returns stale values at the changed positions; ``Audit`` keeps a few
timed calls, chosen uniformly at random from all of them after the fact, whose outputs are then
checked against the reference on exactly the inputs those calls got.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

POSITIONS = 4  # changed per input per call


class Freshness:
    def __init__(
        self,
        device: Any,
        inputs_per_set: Sequence[Sequence[Any]],
        base: Sequence[np.ndarray],
        rng: np.random.Generator,
    ) -> None:
        self._device = device
        self._inputs = inputs_per_set
        self._shapes = [x.shape for x in base]
        self._base = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in base]
        self._rng = rng
        self._changes: list[list[dict[int, float]]] = [[{} for _ in base] for _ in inputs_per_set]

    def perturb(self, set_index: int) -> None:
        """Change POSITIONS values of every input of the set (inputs of one value stay)."""
        for buffer, flat, changes in zip(
            self._inputs[set_index], self._base, self._changes[set_index], strict=True
        ):
            if flat.size < 2:
                continue
            where = self._rng.integers(flat.size, size=POSITIONS)
            values = flat[self._rng.integers(flat.size, size=POSITIONS)]
            self._device.poke(buffer, where, values)
            changes.update(zip(where.tolist(), values.tolist(), strict=True))

    def expected(self, set_index: int) -> list[np.ndarray]:
        """The inputs the set holds now, as the harness made them."""
        out = []
        for flat, shape, changes in zip(
            self._base, self._shapes, self._changes[set_index], strict=True
        ):
            x = flat.copy()
            if changes:
                x[np.fromiter(changes, dtype=np.int64)] = np.fromiter(
                    changes.values(), dtype=np.float32
                )
            out.append(x.reshape(shape))
        return out


class Audit:
    """A uniform sample of ``size`` timed calls out of however many there will be (reservoir
    sampling): a kernel cannot tell which of its calls will be checked."""

    def __init__(self, size: int, rng: np.random.Generator) -> None:
        self.size = size
        self._rng = rng
        self.kept: list[Any] = []  # (inputs, outputs, expected inputs) per slot
        self.calls: list[int] = []  # the number of the timed call kept in each slot
        self._pending: list[int] = []

    def choose(self, first: int, batch: Sequence[int]) -> list[int]:
        """Of the batch's calls (numbered ``first + 1`` on, on these sets), the sets to keep now;
        ``keep`` is then called once per returned set, in order."""
        chosen, self._pending = [], []
        for j, index in enumerate(batch):
            number = first + j + 1
            if len(self.kept) < self.size:
                self.kept.append(None)
                self.calls.append(number)
                slot = len(self.kept) - 1
            else:
                slot = int(self._rng.integers(number))
                if slot >= self.size:
                    continue
                self.calls[slot] = number
            self._pending.append(slot)
            chosen.append(index)
        return chosen

    def keep(
        self, inputs: list[np.ndarray], outputs: list[np.ndarray], expected: list[np.ndarray]
    ) -> None:
        self.kept[self._pending.pop(0)] = (inputs, outputs, expected)
