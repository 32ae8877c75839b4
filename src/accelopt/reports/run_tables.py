"""Tables of the run report besides its headline: the search parameters, the lineage of the best
kernel, failures by status, tokens and $ per agent, and the generalization table against the
run's cached ceilings. Pure functions."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelopt.llm.client import Usage
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.strategies import STRATEGIES
from accelopt.search.workloads import Generalization, GroupFigures, WorkloadFigures, group_figures
from accelopt.store.records import KernelOrigin, KernelRecord

ERROR_CHARS = 600  # an example error is clipped to this many characters


@dataclass(frozen=True)
class FailureGroup:
    status: str
    count: int
    example_hash: str
    example_iteration: int
    example_error: str


@dataclass(frozen=True)
class AgentUsage:
    agent: str
    model: str
    calls: int
    failed: int
    replayed: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    unknown_cost: int


def _clip(text: str, limit: int = ERROR_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failures(
    kernels: Sequence[KernelRecord], evaluations: Mapping[str, Evaluation]
) -> list[FailureGroup]:
    """Kernels that did not pass, by status (most frequent first), with the first one's error."""
    groups: dict[str, list[tuple[KernelRecord, Evaluation]]] = {}
    for k in kernels:
        e = evaluations.get(k.hash)
        if e is not None and not e.passed:
            groups.setdefault(e.status.value, []).append((k, e))
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [
        FailureGroup(
            status,
            len(members),
            members[0][0].hash,
            members[0][0].iteration,
            _clip(members[0][1].error or members[0][1].log or "(no message)"),
        )
        for status, members in ordered
    ]


def agent_usage(usage: Mapping[str, Usage], models: Mapping[str, str]) -> list[AgentUsage]:
    return [
        AgentUsage(agent=agent, model=models.get(agent, ""), **dataclasses.asdict(u))
        for agent, u in usage.items()
    ]


@dataclass(frozen=True)
class GeneralizationView:
    """The generalization table, one ceiling for every row: each workload's roofline time at
    the run's cached ceilings (``peaks``), and every % of peak that time over the latency."""

    rows: tuple[WorkloadFigures, ...]
    groups: tuple[GroupFigures, ...]
    peaks: Mapping[str, float]  # workload -> roofline time; {}: the ceilings are not known here
    tuned: tuple[str, ...]


def generalization_view(found: Generalization, peaks: Mapping[str, float]) -> GeneralizationView:
    """``found`` re-figured at ``peaks`` (a workload without one keeps the figures the search
    stored, and shows no peak)."""

    def at(latency: float | None, peak: float | None, stored: float | None) -> float | None:
        if peak is None:
            return stored
        return peak / latency if latency else None

    rows = tuple(
        dataclasses.replace(
            r,
            baseline_pct=at(r.baseline_latency_s, peaks.get(r.workload), r.baseline_pct),
            best_pct=at(r.best_latency_s, peaks.get(r.workload), r.best_pct),
        )
        for r in found.rows
    )
    return GeneralizationView(
        rows, tuple(group_figures(rows)), dict(peaks), tuple(found.workloads.tuned)
    )


AUTOTUNE_PARAMETERS = ("strategy", "iterations", "variants")  # what an autotune run uses


def shown_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The search parameters the run used: an autotune run asks no LLM, so has no beam,
    plans, samples, fixer or memory."""
    strategy = STRATEGIES.get(str(parameters.get("strategy", "")))
    if strategy is None or strategy.needs_llm:
        return dict(parameters)
    return {k: v for k, v in parameters.items() if k in AUTOTUNE_PARAMETERS}


@dataclass(frozen=True)
class LineageStep:
    iteration: int
    hash: str
    origin: KernelOrigin
    plan: str
    steps: tuple[str, ...]
    latency_s: float | None
    pct: float | None
    speedup_over_parent: float | None
    speedup_over_baseline: float | None


def _passed_latency(evaluation: Evaluation | None) -> float | None:
    return evaluation.latency_s if evaluation is not None and evaluation.passed else None


def _ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow and fast else None


def lineage(
    kernels: Mapping[str, KernelRecord],
    evaluations: Mapping[str, Evaluation],
    best_hash: str,
    baseline_latency: float | None,
) -> list[LineageStep]:
    """From the baseline to the best kernel, each step with its plan and speedups."""
    steps: list[LineageStep] = []
    current, seen = kernels.get(best_hash), set()
    while current is not None and current.hash not in seen:
        seen.add(current.hash)
        parent = kernels.get(current.parent_hash) if current.parent_hash else None
        e = evaluations.get(current.hash)
        mine = _passed_latency(e)
        theirs = _passed_latency(evaluations.get(parent.hash)) if parent else None
        steps.append(
            LineageStep(
                iteration=current.iteration,
                hash=current.hash,
                origin=current.origin,
                plan=current.plan_title,
                steps=current.plan_steps,
                latency_s=mine,
                pct=e.pct_of_peak if e else None,
                speedup_over_parent=_ratio(theirs, mine),
                speedup_over_baseline=_ratio(baseline_latency, mine),
            )
        )
        current = parent
    return steps[::-1]
