"""The search parameters of one run (recorded with the run, so a resume uses the same)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from accelopt.search.strategies import strategy_for
from accelopt.search.strategies.base import StrategyName


class SearchConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # a name in ``strategies.STRATEGIES``: a ``StrategyName``, kept as its string (YAML, JSON,
    # the store)
    strategy: str = StrategyName.BEAM.value
    beam: int = Field(4, ge=1, description="B: kernels kept after each iteration")
    plans: int = Field(4, ge=1, description="N: plans per kernel in the beam")
    samples: int = Field(2, ge=1, description="K: kernels written per plan")
    iterations: int = Field(8, ge=1, description="T")
    fixer: int = Field(1, ge=0, description="F: repair rounds for a failed kernel")
    memory: Literal["off", "run", "workspace"] = "workspace"
    lessons: int = Field(16, ge=0, description="top-k lessons given to the planner")
    experience_slots: int = Field(8, ge=0, description="new experiences per iteration, at most")
    variants: int = Field(
        8,
        ge=0,
        description="variants tried per kernel that declares tunables, per tuning (0: "
        "no tuning); autotune: per iteration",
    )
    per_plan: int = Field(
        1, ge=1, description="children of one (parent, plan) the beam may keep (published: 1)"
    )
    references: bool = Field(
        True,
        description="time NumPy and the problem's PyTorch kinds in the run's first session, and "
        "the fastest again at its end (the best kernel's speedup over what a user would pick)",
    )

    @field_validator("strategy")
    @classmethod
    def _registered(cls, name: str) -> str:
        strategy_for(name)  # a ValueError naming the strategies there are
        return str(name)

    def executor_calls_per_iteration(self) -> int:
        """B x N x K: the same for both strategies, so that they compare at equal cost."""
        return self.beam * self.plans * self.samples
