"""Autotune: no LLM call; each iteration the run's best kernel so far is tuned further, its
declared tunables varied and measured (``Tuner``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from accelopt.search.selection import Candidate
from accelopt.search.strategies.base import Frontier, Means, Step, Strategy


class Autotune(Strategy):
    """The best so far, tuned further; it is the beam of one."""

    needs_llm: ClassVar[bool] = False
    needs_tunables: ClassVar[bool] = True

    def parents(self, at: Frontier, width: int) -> list[Candidate]:
        return [at.best]

    async def make(self, means: Means, t: int, parents: Sequence[Candidate], at: Frontier) -> Step:
        top = await means.tune(t, parents[0])
        return Step([top], top)

    @classmethod
    def iteration_size(cls, search: Mapping[str, Any]) -> str:
        return f"{search.get('variants', '?')} variants per iteration"
