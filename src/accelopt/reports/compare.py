"""Several runs side by side (``accelopt runs compare``): beam search against repeated sampling,
or one model against another, by best % of peak for the $ spent and the iterations run.

``load_comparison`` reads one run from the store; ``compare_run`` (pure) reduces it to the
numbers and the curve; ``write_compare_report`` draws both charts into one page.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelopt.llm.client import Usage
from accelopt.llm.records import LLMCall
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports import plots
from accelopt.reports.costs import ResultCost, result_cost
from accelopt.reports.html import render, svg, write_page
from accelopt.search import samples
from accelopt.search.evaluations import run_evaluations
from accelopt.search.headline import Headline, stored_headline
from accelopt.search.references import BestReference, best_reference, over_reference
from accelopt.search.spec import RunSpec
from accelopt.search.strategies import iteration_size
from accelopt.search.workloads import run_workloads
from accelopt.store.records import (
    IterationRecord,
    KernelOrigin,
    KernelRecord,
    RunRecord,
    RunStatus,
)
from accelopt.store.store import Store


@dataclass(frozen=True)
class CurvePoint:
    """After one iteration: the $ spent so far (all agents) and the best % of peak."""

    iteration: int
    spent_usd: float
    best_pct: float | None


@dataclass(frozen=True)
class RunComparison:
    run: str
    problem: str
    workload: str
    strategy: str
    status: RunStatus
    models: dict[str, str]
    search: dict[str, Any]
    iterations: int  # the last iteration committed (0: only the baseline)
    baseline_pct: float | None
    best_pct: float | None
    cost_usd: float
    unknown_cost_calls: int
    tokens: int
    curve: tuple[CurvePoint, ...]
    cost: ResultCost  # $ per point gained, LLM calls per kept improvement, free variants
    speedup: float | None = None  # the best kernel over the baseline
    reference: BestReference | None = None  # the fastest of NumPy and PyTorch the run timed
    speedup_over_reference: float | None = None  # the best kernel over it
    speedup_interval: float | None = None  # of ``speedup``, from the run's closing session
    wall_s: float | None = None  # from the run's start to its last update (pauses included)
    candidates: int = 0  # kernels evaluated (variants included)

    @property
    def per_minute(self) -> float | None:
        """Candidates evaluated per minute of wall time."""
        return self.candidates / (self.wall_s / 60) if self.wall_s else None

    @property
    def search_size(self) -> str:
        """What one iteration of the search does, as its strategy says (``iteration_size``):
        B·N·K kernels written (beam, sampling), or the variants measured (autotune)."""
        return iteration_size(self.strategy, self.search)

    @property
    def label(self) -> str:
        """Short enough for a legend: the planner's and executor's models when they differ."""
        main = {a: m for a, m in self.models.items() if a in {"planner", "executor"}}
        models = models_text(self.models) if len(set(self.models.values())) == 1 else None
        return f"{self.run[:8]} {self.problem} {self.strategy} ({models or models_text(main)})"


def models_text(models: Mapping[str, str]) -> str:
    """One model name when every agent uses it, else ``agent=model`` pairs."""
    names = set(models.values())
    if len(names) == 1:
        return names.pop()
    return ", ".join(f"{agent}={model}" for agent, model in models.items()) or "—"


def spend_by_iteration(calls: Sequence[LLMCall]) -> dict[int, float]:
    """The $ of the calls made in each iteration (unknown prices count 0).

    Calls are stored in the order they were made and iterations run one after the other, so a
    call belongs to the iteration of the latest planner call before it; that call's sample
    index says which (``search.samples.decode``). Replayed calls cost 0, so a resumed run is
    not counted twice (the iteration records' ``spent_usd`` restart from 0 on a resume).
    """
    spend: dict[int, float] = {}
    current = 0
    for call in calls:
        if call.agent == "planner":
            current, _ = samples.decode(call.sample_index)
        spend[current] = spend.get(current, 0.0) + (call.cost_usd or 0.0)
    return spend


def curve(iterations: Sequence[IterationRecord], calls: Sequence[LLMCall]) -> list[CurvePoint]:
    spend = spend_by_iteration(calls)
    return [
        CurvePoint(
            i.iteration,
            sum(usd for t, usd in spend.items() if t <= i.iteration),
            i.best_pct_of_peak,
        )
        for i in iterations
    ]


def compare_run(
    run: RunRecord,
    kernels: Sequence[KernelRecord],
    evaluations: Mapping[str, Evaluation],
    iterations: Sequence[IterationRecord],
    calls: Sequence[LLMCall],
    usage: Mapping[str, Usage],
    references: Sequence[Evaluation] = (),
    closing: Headline | None = None,
) -> RunComparison:
    """One run reduced to what the comparison shows (pure); ``usage``: ``Store.usage_by_agent``;
    ``references``: what the run timed of NumPy and PyTorch (``Store.references``);
    ``closing``: its baseline and best re-timed side by side at its end (the figures shown)."""
    base = next((k.hash for k in kernels if k.origin == KernelOrigin.BASELINE), "")
    base_eval, best_eval = evaluations.get(base), evaluations.get(run.best_hash)
    speedup = _ratio(_latency(base_eval), _latency(best_eval))
    if closing is not None and closing.baseline.passed and closing.best.passed:
        base_eval, best_eval, speedup = closing.baseline, closing.best, closing.speedup
    best_pct = best_eval.pct_of_peak if best_eval else None
    if best_pct is None and iterations:
        best_pct = iterations[-1].best_pct_of_peak
    return RunComparison(
        run=run.id,
        problem=run.problem,
        workload=run.workload,
        strategy=run.strategy,
        status=run.status,
        models=dict(RunSpec.of(run).models),
        search=RunSpec.of(run).parameters(),
        iterations=iterations[-1].iteration if iterations else 0,
        baseline_pct=base_eval.pct_of_peak if base_eval else None,
        best_pct=best_pct,
        cost_usd=sum(u.cost_usd for u in usage.values()),
        unknown_cost_calls=sum(u.unknown_cost for u in usage.values()),
        tokens=sum(u.tokens_in + u.tokens_out for u in usage.values()),
        curve=tuple(curve(iterations, calls)),
        cost=result_cost(usage, _pct(base_eval), best_pct, iterations, kernels),
        speedup=speedup,
        speedup_interval=closing.interval if closing is not None else None,
        reference=(reference := best_reference(references)),
        speedup_over_reference=over_reference(reference, _latency(best_eval)),
        wall_s=wall_seconds(run),
        candidates=len(evaluations),
    )


def wall_seconds(run: RunRecord) -> float | None:
    """Seconds from the run's creation to its last update; None where a time is unreadable."""
    try:
        start = datetime.datetime.fromisoformat(run.created_at)
        end = datetime.datetime.fromisoformat(run.updated_at)
    except ValueError:
        return None
    return max(0.0, (end - start).total_seconds())


def _latency(evaluation: Evaluation | None) -> float | None:
    return evaluation.latency_s if evaluation is not None else None


def _ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow and fast else None


def _pct(evaluation: Evaluation | None) -> float | None:
    return evaluation.pct_of_peak if evaluation is not None else None


def load_comparison(store: Store, run: RunRecord) -> RunComparison:
    return compare_run(
        run,
        store.kernels(run.id),
        run_evaluations(store, run),
        store.iterations(run.id),
        store.llm_calls(run.id),
        store.usage_by_agent(run.id),
        store.references(run.id),
        stored_headline(store, run, run_workloads(run).tuned),
    )


def comparison_json(c: RunComparison) -> dict[str, Any]:
    return asdict(c) | {
        "curve": [asdict(p) for p in c.curve],
        "cost": asdict(c.cost),
        "candidates_per_minute": c.per_minute,
    }


def _curves(comparisons: Sequence[RunComparison], x: str) -> list[plots.Curve]:
    """One line per run: (``x`` of each curve point, best % of peak)."""
    return [
        plots.Curve(
            c.label,
            tuple((getattr(p, x), p.best_pct) for p in c.curve if p.best_pct is not None),
        )
        for c in comparisons
    ]


def spent_nothing(comparisons: Sequence[RunComparison]) -> bool:
    """Every run cost $0 and no call went unpriced: a $ axis would have nothing to show."""
    return all(c.cost_usd == 0 and not c.unknown_cost_calls for c in comparisons)


def render_compare(comparisons: Sequence[RunComparison]) -> str:
    free = spent_nothing(comparisons)
    return render(
        "compare",
        title=f"comparison of {len(comparisons)} runs",
        runs=comparisons,
        usd_svg=None
        if free
        else svg(plots.compare_plot(_curves(comparisons, "spent_usd"), "$ spent")),
        iterations_svg=svg(
            plots.compare_plot(_curves(comparisons, "iteration"), "iteration", integer_x=True)
        ),
    )


def write_compare_report(path: Path, comparisons: Sequence[RunComparison]) -> Path:
    return write_page(Path(path), render_compare(comparisons))
