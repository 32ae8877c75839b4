"""Beam search: each iteration expands every kernel of the beam."""

from __future__ import annotations

from accelopt.search.selection import Candidate
from accelopt.search.strategies.base import Frontier, Planned


class Beam(Planned):
    """The published search: the B kernels kept are the next iteration's parents."""

    def parents(self, at: Frontier, width: int) -> list[Candidate]:
        return list(at.beam)
