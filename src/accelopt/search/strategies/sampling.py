"""Repeated sampling: the same planner and executor calls as beam search, all from the starting
kernel, in B chains of N planner calls (as many at once as beam search makes)."""

from __future__ import annotations

from accelopt.search.selection import Candidate
from accelopt.search.strategies.base import Frontier, Planned


class Sampling(Planned):
    """B chains from the run's first kernel every iteration, at the cost of beam search."""

    def parents(self, at: Frontier, width: int) -> list[Candidate]:
        return [at.baseline] * width

    def first_plan(self, chain: int, plans: int) -> int:
        return chain * plans  # the chains share a parent: each its own planner calls
