"""The suite report (``accelopt bench run --html FILE``): the suite table, % of peak per problem
for each kernel kind, and where each kernel sits on the roofline of the measured ceilings.

``suite_report`` builds the page's data model from the evaluations ``bench run`` already has
(pure); ``write_suite_report`` draws the charts, fills the template and writes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.rescoring import cached_peak
from accelopt.profiling.stats import geomean
from accelopt.reports import figures, plots
from accelopt.reports.hardware import Ceiling, ceilings
from accelopt.reports.html import render, svg, write_page


@dataclass(frozen=True)
class Cell:
    """One kernel kind of one problem; ``status`` is None where the suite ships no such kernel."""

    kind: str
    status: str | None
    latency_s: float | None
    pct: float | None  # its row's peak over its latency (one ceiling for the table: the cached)


@dataclass(frozen=True)
class SuiteRow:
    problem: str
    workload: str
    bound: str
    peak_s: float | None  # the roofline at the cached ceilings (``rescoring.cached_peak``)
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class KindMean:
    kind: str
    pct: float | None  # geometric mean of % of peak over the kind's passed, timed kernels
    count: int


@dataclass(frozen=True)
class Failure:
    problem: str
    kind: str
    status: str
    error: str


@dataclass(frozen=True)
class SuiteReport:
    title: str
    hardware: str
    ceilings: tuple[Ceiling, ...]
    rates: tuple[float, float, float]  # matmul, vector (FLOP/s), bandwidth (B/s)
    kinds: tuple[str, ...]
    rows: tuple[SuiteRow, ...]
    means: tuple[KindMean, ...]
    points: tuple[plots.RooflinePoint, ...]
    skipped_points: tuple[str, ...]  # problems without FLOPs or bytes: no place on the chart
    failures: tuple[Failure, ...]
    notes: tuple[str, ...]


def suite_report(
    evaluations: Sequence[Evaluation],
    problems: Sequence[Problem],
    hardware: HardwareSpec,
    kinds: Sequence[str],
    title: str,
    notes: Sequence[str] = (),
) -> SuiteReport:
    """The page's data model, from the evaluations of ``bench run`` (pure), all scored against
    ``hardware`` (``rescoring.rescore_all``). ``notes``: lines shown under the table (e.g. how
    NumPy's BLAS is set up)."""
    by_key = {(e.problem, e.kernel): e for e in evaluations}
    points, skipped = roofline_points(evaluations, {p.name: p for p in problems})
    return SuiteReport(
        title=title,
        hardware=hardware.name,
        ceilings=ceilings(hardware),
        rates=(hardware.matmul_rate, hardware.vector_rate, hardware.bandwidth),
        kinds=tuple(kinds),
        rows=tuple(_row(p, kinds, by_key, evaluations) for p in problems),
        means=tuple(kind_means(evaluations, kinds)),
        points=tuple(points),
        skipped_points=tuple(skipped),
        failures=tuple(
            Failure(e.problem, e.kernel, e.status.value, e.error)
            for e in evaluations
            if not e.passed
        ),
        notes=tuple(notes),
    )


def _timed_pct(e: Evaluation) -> float | None:
    """% of peak where the kernel was timed (passed or suspicious: shown, never averaged):
    the roofline time at the cached ceilings over the latency, as every cell of the table."""
    return figures.cached(e, None).pct


def _row(
    problem: Problem,
    kinds: Sequence[str],
    by_key: dict[tuple[str, str], Evaluation],
    evaluations: Sequence[Evaluation],
) -> SuiteRow:
    first = next((e for e in evaluations if e.problem == problem.name), None)
    cells = []
    for kind in kinds:
        e = by_key.get((problem.name, kind))
        cells.append(
            Cell(kind, None, None, None)
            if e is None
            else Cell(kind, e.status.value, e.latency_s, _timed_pct(e))
        )
    return SuiteRow(
        problem=problem.name,
        workload=first.workload if first else "",
        bound=first.bound if first else "",
        peak_s=cached_peak(first) if first else None,
        cells=tuple(cells),
    )


def kind_means(evaluations: Sequence[Evaluation], kinds: Sequence[str]) -> list[KindMean]:
    """Per kind, the geometric mean of % of peak (against the cached ceilings, as the table's
    cells) over passed, timed kernels."""
    means = []
    for kind in kinds:
        timed = [_timed_pct(e) for e in evaluations if e.kernel == kind and e.passed]
        fractions = [pct for pct in timed if pct is not None]
        means.append(KindMean(kind, geomean(fractions, skip_missing=True), len(fractions)))
    return means


def roofline_points(
    evaluations: Sequence[Evaluation], problems: dict[str, Problem]
) -> tuple[list[plots.RooflinePoint], list[str]]:
    """Each timed kernel on the roofline chart, and the problems that cannot be placed on it.

    Arithmetic intensity = (matmul FLOPs + vector FLOPs) / bytes of the problem's cost model on
    the evaluated workload; achieved FLOP/s = those FLOPs / the measured latency.
    """
    points, skipped = [], []
    for e in evaluations:
        problem = problems.get(e.problem)
        if problem is None or e.latency_s is None or e.latency_s <= 0:
            continue
        cost = problem.cost.at(problem.workload(e.workload).sizes)
        flops = cost.matmul_flops + cost.vector_flops
        if flops <= 0 or cost.bytes <= 0:
            skipped.append(e.problem)
            continue
        points.append(
            plots.RooflinePoint(e.problem, e.kernel, flops / cost.bytes, flops / e.latency_s)
        )
    return points, sorted(set(skipped))


def render_suite_report(report: SuiteReport) -> str:
    bars = plots.kind_bars(
        [r.problem for r in report.rows],
        {k: [r.cells[i].pct for r in report.rows] for i, k in enumerate(report.kinds)},
    )
    roof = plots.roofline_chart(report.points, *report.rates)
    return render(
        "suite_report", title=report.title, s=report, bars_svg=svg(bars), roofline_svg=svg(roof)
    )


def write_suite_report(path: Path, report: SuiteReport) -> Path:
    """Write the suite report of ``bench run`` (built by ``suite_report``) to ``path`` (an HTML
    file); returns the path."""
    return write_page(Path(path), render_suite_report(report))
