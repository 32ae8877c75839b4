"""What a search strategy is: per iteration, which parents to expand (``Strategy.parents``) and
what to make of them (``Strategy.make``: children the agents write, or variants of a kernel's
declared tunables), and what the rest of the tool asks of it (whether it calls an LLM, whether it
needs a kernel that declares tunables, how one of its iterations is described).

A strategy is stateless; everything it does goes through ``Means``, the loop's parts
(``loop.Optimizer``), so that a new strategy is one module and one entry in
``strategies.STRATEGIES`` (its name an enum value).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from accelopt.search.selection import Candidate


class StrategyName(StrEnum):
    """The strategies shipped: ``SearchConfig.strategy``, ``--strategy``, ``RunRecord.strategy``."""

    BEAM = "beam"
    SAMPLING = "sampling"
    AUTOTUNE = "autotune"


@dataclass(frozen=True)
class Frontier:
    """Where an iteration starts: the beam, the run's first kernel and its best so far."""

    beam: list[Candidate]
    baseline: Candidate
    best: Candidate


@dataclass(frozen=True)
class Step:
    """What an iteration ends with: the next beam and the run's best after it."""

    beam: list[Candidate]
    best: Candidate


class Means(Protocol):
    """What a strategy can make of its parents (``loop.Optimizer``)."""

    @property
    def width(self) -> int:
        """B: the kernels kept after each iteration."""
        ...

    @property
    def plans(self) -> int:
        """N: the plans asked per parent."""
        ...

    async def children(
        self, t: int, parents: Sequence[Candidate], first_plans: Sequence[int], at: Frontier
    ) -> Step:
        """Each parent's N plans written, evaluated and repaired (its planner calls numbered
        from its ``first_plans`` entry), the unsure re-timed, lessons learned, and the next beam
        chosen from ``at``'s and the children."""
        ...

    async def tune(self, t: int, cand: Candidate) -> Candidate:
        """``cand`` or its fastest variant (``Tuner.tune_further``), with no LLM call."""
        ...


class Strategy(ABC):
    """One way to search: each iteration, ``make`` from ``parents``."""

    needs_llm: ClassVar[bool] = True  # asks the agents: endpoints probed, models recorded
    # starts only from a kernel that declares tunables; its last line is the tuning's verdict
    needs_tunables: ClassVar[bool] = False

    @abstractmethod
    def parents(self, at: Frontier, width: int) -> list[Candidate]:
        """The kernels iteration's work starts from (``width``: B)."""

    @abstractmethod
    async def make(self, means: Means, t: int, parents: Sequence[Candidate], at: Frontier) -> Step:
        """Iteration ``t``'s work on ``parents``: the next beam and the run's best."""

    @classmethod
    def iteration_size(cls, search: Mapping[str, Any]) -> str:
        """What one iteration does, from the run's recorded search parameters: B·N·K kernels
        written."""
        if not search:
            return "—"
        s = search
        return f"B·N·K = {s.get('beam', '?')}·{s.get('plans', '?')}·{s.get('samples', '?')}"


class Planned(Strategy):
    """A strategy whose children the agents write: each parent's N plans, K kernels each."""

    def first_plan(self, chain: int, plans: int) -> int:
        """The sample index of chain ``chain``'s first planner call (each call site has its
        own, ``search.samples``): 0 where parents differ; parents that repeat need their own."""
        return 0

    async def make(self, means: Means, t: int, parents: Sequence[Candidate], at: Frontier) -> Step:
        firsts = [self.first_plan(chain, means.plans) for chain in range(len(parents))]
        return await means.children(t, parents, firsts, at)
