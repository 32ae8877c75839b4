"""Records the store keeps about runs: plain data, referring to kernels by hash."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunRecord:
    id: str
    problem: str
    workload: str
    backend: str
    hardware: str  # HardwareSpec.key()
    strategy: str  # "beam" | "sampling"
    config: dict[str, Any]  # the search parameters and models, as JSON
    status: str = "running"  # running | finished | budget | failed | interrupted
    baseline_hash: str = ""
    best_hash: str = ""
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True)
class KernelRecord:
    """A kernel as it entered a run: where it came from and which plan made it."""

    hash: str  # Kernel.hash (normalized source + backend)
    source: str
    backend: str
    iteration: int  # 0 for the baseline
    origin: str  # "baseline" | "executor" | "fixer"
    parent_hash: str = ""
    plan_title: str = ""
    plan_steps: tuple[str, ...] = ()


@dataclass(frozen=True)
class IterationRecord:
    """The state after one iteration: the beam and the best kernel so far."""

    iteration: int
    beam: tuple[str, ...]  # kernel hashes, best first
    best_hash: str
    best_latency_s: float | None
    best_pct_of_peak: float | None
    spent_usd: float
    evaluated: int
    failed_by_status: dict[str, int] = field(default_factory=dict)
    # calls that gave nothing usable: "planner failed", "executor asked again", "executor no
    # code", "executor failed", "summarizer failed", "summarizer no lesson"
    wasted: dict[str, int] = field(default_factory=dict)
