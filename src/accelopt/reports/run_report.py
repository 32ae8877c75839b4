"""The report of one optimization run (``accelopt report RUN``).

``load_run`` reads what the store holds about the run; ``run_report`` turns it into the page's
data model (pure: no store, no clock, no files); ``render_run_report`` draws the charts and fills
the template; ``write_run_report`` does all three and writes the file. Every table and chart of
the page is against the run's cached ceilings (``figures``), each row with the roofline time
its % of peak uses; a calibrated figure has a table of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelopt.hardware.roofline import Bound
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import Usage
from accelopt.memory.records import Experience
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports import figures, plots
from accelopt.reports.costs import ResultCost, result_cost
from accelopt.reports.figures import Cached, Calibrated
from accelopt.reports.hardware import Ceiling, ceilings
from accelopt.reports.html import DiffLine, render, svg, unified_diff, write_page
from accelopt.reports.run_roofline import Work, peaks, problem_of, roofline_points, work_of
from accelopt.reports.run_tables import (
    AgentUsage,
    FailureGroup,
    GeneralizationView,
    LineageStep,
    agent_usage,
    failures,
    generalization_view,
    lineage,
    shown_parameters,
)
from accelopt.reports.tuning_plot import sensitivity_plot
from accelopt.reports.tuning_view import TunedKernel, sensitivity, tuned_kernels
from accelopt.search.evaluations import run_evaluations, run_raced
from accelopt.search.headline import Headline, stored_headline
from accelopt.search.references import fastest_reference
from accelopt.search.retimings import RetimingRecord, stored_retimings
from accelopt.search.spec import RunSpec
from accelopt.search.variants import variant_tables
from accelopt.search.workloads import Generalization, generalization
from accelopt.store.records import IterationRecord, KernelOrigin, KernelRecord, RunRecord
from accelopt.store.store import Store


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
    retimings: tuple[RetimingRecord, ...] = ()  # stored_retimings
    references: tuple[Evaluation, ...] = ()  # NumPy and PyTorch, timed by the run (references)
    problem: Problem | None = None  # read for the page only (the roofline chart)
    # the run's evaluations on its first workload alone, where it tunes on several (the chart)
    first_workload: Mapping[str, Evaluation] | None = None
    closing: Headline | None = None  # its baseline and best re-timed side by side at its end


def load_run(store: Store, run: RunRecord, with_problem: bool = False) -> RunData:
    """What the store holds about ``run``; ``with_problem``: its problem too (the page's
    roofline chart; the dashboard, which polls, does without)."""
    kernels = tuple(store.kernels(run.id))
    tuned = any(k.origin == KernelOrigin.TUNED for k in kernels)  # else no variant table to draw
    found = generalization(store, run)
    several = found.workloads.several
    return RunData(
        run=run,
        kernels=kernels,
        evaluations=run_evaluations(store, run),
        iterations=tuple(store.iterations(run.id)),
        experiences=tuple(store.experiences(run_id=run.id)),
        usage=store.usage_by_agent(run.id),
        generalization=found if several else None,
        raced=frozenset(run_raced(store, run)) if tuned else frozenset(),
        retimings=tuple(stored_retimings(store, run.id)) if tuned else (),
        references=tuple(store.references(run.id)),
        problem=problem_of(store, run) if with_problem else None,
        first_workload=run_evaluations(store, run, run.workload)
        if with_problem and several
        else None,
        closing=stored_headline(store, run, found.workloads.tuned),
    )


@dataclass(frozen=True)
class KernelFigures:
    """Baseline, best or the best reference: a row of the headline table, against the run's
    cached ceilings (``pct`` = ``peak_s`` / ``latency_s``), its calibrated figure apart."""

    label: str
    hash: str
    status: str
    latency_s: float | None
    pct: float | None
    speedup: float | None  # over the baseline
    bound: Bound
    peak_s: float | None
    over_reference: float | None = None  # the best reference's latency over this one's
    ci_low_s: float | None = None  # the latency's 95 % interval
    ci_high_s: float | None = None
    achieved: float | None = None  # FLOP/s or B/s (``unit``) of the unit that bounds it
    unit: str = ""
    calibrated: Calibrated | None = None  # against the control timed with it, if any


@dataclass(frozen=True)
class LineageRow:
    """A lineage step as the report's table shows it: against the run's cached ceilings."""

    step: LineageStep
    figures: Cached | None


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
    ceilings: tuple[Ceiling, ...] | None  # None: the run's ceilings are not known here
    parameters: Mapping[str, Any]
    models: Mapping[str, str]
    baseline: KernelFigures | None
    best: KernelFigures | None
    candidates: tuple[plots.CandidatePoint, ...]
    best_curve: tuple[tuple[int, float | None], ...]
    not_evaluated: int  # kernels of the run without an evaluation in the store
    lineage: tuple[LineageRow, ...]
    best_source: str
    diff: tuple[DiffLine, ...]
    lessons: tuple[Experience, ...]
    failures: tuple[FailureGroup, ...]
    usage: tuple[AgentUsage, ...]
    cost: CostSummary
    generalization: GeneralizationView | None = None
    result_cost: ResultCost | None = None  # LLM calls per kept improvement, free variants
    variants: tuple[TunedKernel, ...] = ()  # each tuned kernel's variants (search/variants.py)
    reference: KernelFigures | None = None  # the fastest of NumPy and PyTorch the run timed
    spec: HardwareSpec | None = None  # the run's ceilings (those ``ceilings`` lists)
    roofline: tuple[plots.RooflinePoint, ...] = ()  # the run's kernels on its first workload
    work: Work | None = None  # what the cost model says a call does there
    closing: Headline | None = None  # where the headline's figures come from, when re-timed

    @property
    def headline(self) -> tuple[KernelFigures, ...]:
        return tuple(k for k in (self.baseline, self.best, self.reference) if k is not None)


# -- the data model (pure) --------------------------------------------------------------------


def run_report(data: RunData, hardware: HardwareSpec | None) -> RunReport:
    """The page's data model. ``hardware``: this machine's spec; the run's ceilings are those
    it recorded, else these if they are the run's (same key), else not known."""
    run, kernels = data.run, {k.hash: k for k in data.kernels}
    spec = RunSpec.of(run)
    ceiling = figures.run_spec(spec.hardware_spec, run.hardware, hardware)
    base_kernel = next((k for k in data.kernels if k.origin == KernelOrigin.BASELINE), None)
    base_eval = data.evaluations.get(base_kernel.hash) if base_kernel else None
    best_kernel = kernels.get(run.best_hash)
    fastest = fastest_reference(data.references)
    shown_base, shown_best = _shown(data, base_eval)
    baseline = _figures("baseline", shown_base, None, fastest, ceiling)
    best = _figures("best", shown_best, shown_base, fastest, ceiling)
    if best is not None and (h := data.closing) is not None and shown_best is h.best:
        best = replace(best, speedup=h.speedup)  # the session's ratio, not of two latencies
    reference = (
        _figures(f"best reference: {fastest.kernel}", fastest, base_eval, fastest, ceiling)
        if fastest
        else None
    )
    work = work_of(data.problem, run.workload) if data.problem else None
    return RunReport(
        run=run,
        ceilings=ceilings(ceiling) if ceiling else None,
        parameters=shown_parameters(spec.parameters()),
        models=dict(spec.models),
        baseline=baseline,
        best=best,
        reference=reference,
        candidates=tuple(candidate_points(data.kernels, data.evaluations)),
        best_curve=tuple(best_curve(data.iterations, data.evaluations)),
        not_evaluated=sum(1 for k in data.kernels if k.hash not in data.evaluations),
        lineage=tuple(
            LineageRow(s, _cached(data.evaluations.get(s.hash), ceiling))
            for s in lineage(kernels, data.evaluations, run.best_hash, _latency(base_eval))
        ),
        best_source=best_kernel.source if best_kernel else "",
        diff=tuple(_diff(base_kernel, best_kernel)),
        lessons=data.experiences,
        failures=tuple(failures(data.kernels, data.evaluations)),
        usage=tuple(agent_usage(data.usage, spec.models)),
        cost=cost_summary(data.usage, baseline, best),
        generalization=_generalization(data, ceiling),
        variants=tuple(_variants(data, kernels, ceiling)),
        result_cost=_result_cost(data, baseline, best),
        spec=ceiling,
        roofline=tuple(_roofline(data, work)),
        work=work,
        closing=data.closing,
    )


def _shown(data: RunData, base: Evaluation | None) -> tuple[Evaluation | None, Evaluation | None]:
    """The baseline's and the best's evaluations the headline shows: the run's closing session
    (the two re-timed side by side at its end), else the search's own."""
    h = data.closing
    if h is not None and h.baseline.passed and h.best.passed:
        return h.baseline, h.best
    return base, data.evaluations.get(data.run.best_hash)


def _generalization(data: RunData, spec: HardwareSpec | None) -> GeneralizationView | None:
    found = data.generalization
    if found is None:
        return None
    known = peaks(data.problem, found.workloads.all, spec) if data.problem and spec else {}
    return generalization_view(found, known)


def _roofline(data: RunData, work: Work | None) -> list[plots.RooflinePoint]:
    if work is None or not work.placeable:
        return []
    evaluations = data.evaluations if data.first_workload is None else data.first_workload
    references = [e for e in data.references if e.workload == work.workload]
    return roofline_points(work, data.kernels, evaluations, data.run.best_hash, references)


def _result_cost(
    data: RunData, baseline: KernelFigures | None, best: KernelFigures | None
) -> ResultCost:
    base_pct = baseline.pct if baseline else None
    best_pct = best.pct if best else None
    return result_cost(data.usage, base_pct, best_pct, data.iterations, data.kernels)


def _variants(
    data: RunData, kernels: Mapping[str, KernelRecord], spec: HardwareSpec | None
) -> list[TunedKernel]:
    best = frozenset([data.run.best_hash])
    tables = variant_tables(
        data.kernels, data.evaluations, data.raced, best, data.run.backend, data.retimings
    )
    return tuned_kernels(tables, kernels, data.evaluations, data.run.backend, spec)


def _latency(evaluation: Evaluation | None) -> float | None:
    return evaluation.latency_s if evaluation is not None and evaluation.passed else None


def _ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow and fast else None


def _cached(e: Evaluation | None, spec: HardwareSpec | None) -> Cached | None:
    return figures.cached(e, spec) if e is not None else None


def _figures(
    label: str,
    e: Evaluation | None,
    base: Evaluation | None,
    reference: Evaluation | None,
    spec: HardwareSpec | None,
) -> KernelFigures | None:
    if e is None:
        return None
    speedup = 1.0 if base is None and e.passed else _ratio(_latency(base), _latency(e))
    c = figures.cached(e, spec)
    return KernelFigures(
        label,
        e.kernel_hash,
        e.status.value,
        e.latency_s,
        c.pct,
        speedup,
        e.bound,
        c.peak_s,
        _ratio(_latency(reference), _latency(e)),
        e.ci_low_s,
        e.ci_high_s,
        c.achieved,
        c.unit,
        figures.calibrated(e),
    )


def candidate_points(
    kernels: Sequence[KernelRecord], evaluations: Mapping[str, Evaluation]
) -> list[plots.CandidatePoint]:
    """Every evaluated kernel as a point: its iteration, % of peak against the cached ceilings
    with its 95 % interval (when timed), and its status."""
    return [
        plots.CandidatePoint(k.iteration, c.pct, e.status.value, c.low, c.high)
        for k in kernels
        if (e := evaluations.get(k.hash)) is not None and (c := figures.cached(e, None))
    ]


def best_curve(
    iterations: Sequence[IterationRecord], evaluations: Mapping[str, Evaluation]
) -> list[tuple[int, float | None]]:
    """The committed best after each iteration, at the % of peak its own point has (the cached
    ceilings); the figure the iteration stored where its best has no evaluation here."""
    curve = []
    for i in iterations:
        e = evaluations.get(i.best_hash)
        pct = figures.cached(e, None).pct if e is not None else None
        curve.append((i.iteration, pct if pct is not None else i.best_pct_of_peak))
    return curve


def _diff(base: KernelRecord | None, best: KernelRecord | None) -> list[DiffLine]:
    if base is None or best is None:
        return []
    return unified_diff(
        base.source, best.source, f"baseline {base.hash[:12]}", f"best {best.hash[:12]}"
    )


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
    spec, roof = report.spec, None
    if spec is not None and report.roofline:
        roof = svg(
            plots.roofline_chart(
                report.roofline, spec.matmul_rate, spec.vector_rate, spec.bandwidth
            )
        )
    tuned = [svg(sensitivity_plot(sensitivity(t))) for t in report.variants]
    shown = report.generalization.tuned if report.generalization else ()
    workload = "+".join(shown) or report.run.workload
    title = f"{report.run.problem} / {workload} — run {report.run.id}"
    return render(
        "run_report",
        title=title,
        r=report,
        progress_svg=svg(chart),
        roofline_svg=roof,
        sensitivity_svgs=tuned,
    )


def write_run_report(
    path: Path, store: Store, run: RunRecord, hardware: HardwareSpec | None
) -> Path:
    """Read the run from ``store``, build its report and write the page to ``path``."""
    data = load_run(store, run, with_problem=True)
    return write_page(path, render_run_report(run_report(data, hardware)))
