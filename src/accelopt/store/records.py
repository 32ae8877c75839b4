"""Records the store keeps about runs: plain data, referring to kernels by hash."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    """Where a run stands (the ``runs.status`` column holds the value)."""

    RUNNING = "running"  # a session is at work on it (or was killed before it could say)
    FINISHED = "finished"  # every iteration ran
    BUDGET = "budget"  # stopped when its budget ran out
    FAILED = "failed"  # stopped by an error
    INTERRUPTED = "interrupted"  # stopped by the user (Ctrl-C), or an agent session cut off


class KernelOrigin(StrEnum):
    """Who wrote a kernel of a run (the ``run_kernels.origin`` column holds the value)."""

    BASELINE = "baseline"  # the run's first kernel: the problem's or the user's (--kernel)
    EXECUTOR = "executor"  # written by the executor for a plan (or drafted from the reference)
    FIXER = "fixer"  # a repair of a failed kernel
    AGENT = "agent"  # written by an agent through ``accelopt mcp`` (its runs' strategy)
    TUNED = "tuned"  # a variant of another kernel's declared tunables (search/tuner.py)


@dataclass(frozen=True)
class RunRecord:
    id: str
    problem: str
    workload: str
    backend: str
    hardware: str  # HardwareSpec.key()
    strategy: str  # a ``search.strategies.StrategyName``, or "agent" (an ``accelopt mcp`` session)
    spec: dict[str, Any]  # the run's settings as JSON (``search.spec.RunSpec``), kept unread
    status: RunStatus = RunStatus.RUNNING
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
    origin: KernelOrigin
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
