"""The report of one optimization run (``accelopt report RUN``).

``load_run`` reads what the store holds about the run; ``run_report`` turns it into the page's
data model (pure: no store, no clock, no files); ``render_run_report`` draws the chart and fills
the template; ``write_run_report`` does all three and writes the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt.hardware.roofline import Bound
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import Usage
from accelopt.memory.records import Experience
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports import plots
from accelopt.reports.costs import ResultCost, result_cost
from accelopt.reports.hardware import Ceiling, ceilings
from accelopt.reports.html import DiffLine, render, svg, unified_diff, write_page
from accelopt.search.evaluations import run_evaluations, run_raced
from accelopt.search.references import fastest_reference
from accelopt.search.spec import RunSpec
from accelopt.search.tuning import VariantTable, variant_tables
from accelopt.search.workloads import Generalization, generalization
from accelopt.store.records import IterationRecord, KernelOrigin, KernelRecord, RunRecord
from accelopt.store.store import Store

ERROR_CHARS = 600  # an example error is clipped to this many characters


@dataclass(frozen=True)
class RunData:
    """Everything the store holds about one run, read once."""

    run: RunRecord
    kernels: tuple[KernelRecord, ...]
    evaluations: Mapping[str, Evaluation]  # kernel hash -> evaluation
    iterations: tuple[IterationRecord, ...]
    experiences: tuple[Experience, ...]
    usage: Mapping[str, Usage]  # Store.usage_by_agent
    generalization: Generalization | None = None  # per workload, when the run has several
    raced: frozenset[str] = frozenset()  # kernels whose timing stopped early (Store.run_raced)
    retimings: tuple[tuple[list[str], dict[str, Any]], ...] = ()  # Store.retimings
    references: tuple[Evaluation, ...] = ()  # NumPy and PyTorch, timed by the run (references)


def load_run(store: Store, run: RunRecord) -> RunData:
    kernels = tuple(store.kernels(run.id))
    tuned = any(k.origin == KernelOrigin.TUNED for k in kernels)  # else no variant table to draw
    return RunData(
        run=run,
        kernels=kernels,
        evaluations=run_evaluations(store, run),
        iterations=tuple(store.iterations(run.id)),
        experiences=tuple(store.experiences(run_id=run.id)),
        usage=store.usage_by_agent(run.id),
        generalization=found if (found := generalization(store, run)).workloads.several else None,
        raced=frozenset(run_raced(store, run)) if tuned else frozenset(),
        retimings=tuple(store.retimings(run.id)) if tuned else (),
        references=tuple(store.references(run.id)),
    )


@dataclass(frozen=True)
class KernelFigures:
    """Baseline or best: the numbers of the headline table."""

    label: str
    hash: str
    status: str
    latency_s: float | None
    pct: float | None
    speedup: float | None  # over the baseline
    bound: Bound
    peak_s: float | None
    over_reference: float | None = None  # the best reference's latency over this one's


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


@dataclass(frozen=True)
class CostSummary:
    total_usd: float
    unknown_calls: int  # calls whose price is unknown: total_usd is then a lower bound
    tokens: int
    gain_points: float | None  # best minus baseline, in percentage points of peak
    usd_per_point: float | None  # None when nothing was gained


@dataclass(frozen=True)
class RunReport:
    run: RunRecord
    ceilings: tuple[Ceiling, ...] | None  # None: this machine's spec is not the run's hardware
    parameters: Mapping[str, Any]
    models: Mapping[str, str]
    baseline: KernelFigures | None
    best: KernelFigures | None
    candidates: tuple[plots.CandidatePoint, ...]
    best_curve: tuple[tuple[int, float | None], ...]
    not_evaluated: int  # kernels of the run without an evaluation in the store
    lineage: tuple[LineageStep, ...]
    best_source: str
    diff: tuple[DiffLine, ...]
    lessons: tuple[Experience, ...]
    failures: tuple[FailureGroup, ...]
    usage: tuple[AgentUsage, ...]
    cost: CostSummary
    generalization: Generalization | None = None
    result_cost: ResultCost | None = None  # LLM calls per kept improvement, free variants
    variants: tuple[VariantTable, ...] = ()  # each tuned kernel's variants (search/tuning.py)
    reference: KernelFigures | None = None  # the fastest of NumPy and PyTorch the run timed


# -- the data model (pure) --------------------------------------------------------------------


def run_report(data: RunData, hardware: HardwareSpec | None) -> RunReport:
    """The page's data model. ``hardware``: this machine's spec; its ceilings are shown only if
    it is the hardware the run was measured on (same key)."""
    run, kernels = data.run, {k.hash: k for k in data.kernels}
    base_kernel = next((k for k in data.kernels if k.origin == KernelOrigin.BASELINE), None)
    base_eval = data.evaluations.get(base_kernel.hash) if base_kernel else None
    best_kernel = kernels.get(run.best_hash)
    fastest = fastest_reference(data.references)
    baseline = _figures("baseline", base_eval, None, fastest)
    best = _figures("best", data.evaluations.get(run.best_hash), base_eval, fastest)
    reference = (
        _figures(f"best reference: {fastest.kernel}", fastest, base_eval, fastest)
        if fastest
        else None
    )
    spec = RunSpec.of(run)
    return RunReport(
        run=run,
        ceilings=ceilings(hardware) if hardware and hardware.key() == run.hardware else None,
        parameters=spec.parameters(),
        models=dict(spec.models),
        baseline=baseline,
        best=best,
        reference=reference,
        candidates=tuple(candidate_points(data.kernels, data.evaluations)),
        best_curve=tuple((i.iteration, i.best_pct_of_peak) for i in data.iterations),
        not_evaluated=sum(1 for k in data.kernels if k.hash not in data.evaluations),
        lineage=tuple(lineage(kernels, data.evaluations, run.best_hash, _latency(base_eval))),
        best_source=best_kernel.source if best_kernel else "",
        diff=tuple(_diff(base_kernel, best_kernel)),
        lessons=data.experiences,
        failures=tuple(failures(data.kernels, data.evaluations)),
        usage=tuple(agent_usage(data.usage, spec.models)),
        cost=cost_summary(data.usage, baseline, best),
        generalization=data.generalization,
        variants=tuple(_variants(data)),
        result_cost=_result_cost(data, baseline, best),
    )


def _result_cost(
    data: RunData, baseline: KernelFigures | None, best: KernelFigures | None
) -> ResultCost:
    base_pct = baseline.pct if baseline else None
    best_pct = best.pct if best else None
    return result_cost(data.usage, base_pct, best_pct, data.iterations, data.kernels)


def _variants(data: RunData) -> list[VariantTable]:
    best = frozenset([data.run.best_hash])
    return variant_tables(
        data.kernels, data.evaluations, data.raced, best, data.run.backend, data.retimings
    )


def _latency(evaluation: Evaluation | None) -> float | None:
    return evaluation.latency_s if evaluation is not None and evaluation.passed else None


def _ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow and fast else None


def _figures(
    label: str, e: Evaluation | None, base: Evaluation | None, reference: Evaluation | None
) -> KernelFigures | None:
    if e is None:
        return None
    speedup = 1.0 if base is None and e.passed else _ratio(_latency(base), _latency(e))
    return KernelFigures(label, e.kernel_hash, e.status.value, e.latency_s, e.pct_of_peak,
                         speedup, e.bound, e.peak_s,
                         _ratio(_latency(reference), _latency(e)))  # fmt: skip


def candidate_points(
    kernels: Sequence[KernelRecord], evaluations: Mapping[str, Evaluation]
) -> list[plots.CandidatePoint]:
    """Every evaluated kernel as a point: its iteration, % of peak (when timed) and status."""
    return [
        plots.CandidatePoint(k.iteration, e.pct_of_peak, e.status.value)
        for k in kernels
        if (e := evaluations.get(k.hash)) is not None
    ]


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
        mine = _latency(e)
        theirs = _latency(evaluations.get(parent.hash)) if parent else None
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


def _diff(base: KernelRecord | None, best: KernelRecord | None) -> list[DiffLine]:
    if base is None or best is None:
        return []
    return unified_diff(base.source, best.source, f"baseline {base.hash[:12]}",
                        f"best {best.hash[:12]}")  # fmt: skip


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
        FailureGroup(status, len(members), members[0][0].hash, members[0][0].iteration,
                     _clip(members[0][1].error or members[0][1].log or "(no message)"))
        for status, members in ordered
    ]  # fmt: skip


def agent_usage(usage: Mapping[str, Usage], models: Mapping[str, str]) -> list[AgentUsage]:
    return [
        AgentUsage(agent=agent, model=models.get(agent, ""), **dataclasses.asdict(u))
        for agent, u in usage.items()
    ]


def cost_summary(
    usage: Mapping[str, Usage],
    baseline: KernelFigures | None,
    best: KernelFigures | None,
) -> CostSummary:
    """$ and tokens of the run, and $ per percentage point of peak gained over the baseline."""
    total = sum(u.cost_usd for u in usage.values())
    tokens = sum(u.tokens_in + u.tokens_out for u in usage.values())
    unknown = sum(u.unknown_cost for u in usage.values())
    gain = None
    if baseline and best and baseline.pct is not None and best.pct is not None:
        gain = (best.pct - baseline.pct) * 100
    per_point = total / gain if gain is not None and gain > 0 else None
    return CostSummary(total, unknown, tokens, gain, per_point)


# -- the page ---------------------------------------------------------------------------------


def render_run_report(report: RunReport) -> str:
    chart = plots.progress_plot(report.candidates, report.best_curve)
    shown = report.generalization.workloads.tuned if report.generalization else ()
    workload = "+".join(shown) or report.run.workload
    title = f"{report.run.problem} / {workload} — run {report.run.id}"
    return render("run_report", title=title, r=report, progress_svg=svg(chart))


def write_run_report(
    path: Path, store: Store, run: RunRecord, hardware: HardwareSpec | None
) -> Path:
    """Read the run from ``store``, build its report and write the page to ``path``."""
    return write_page(path, render_run_report(run_report(load_run(store, run), hardware)))
