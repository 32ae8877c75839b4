"""One ceiling per table: what a table's % of peak is against, shown in the table.

The CLI's tables of kernel figures (``eval``, ``bench run``, ``optimize``'s run and suite tables)
score every row against one ceiling, the roofline at the hardware's cached ceilings: their
``peak ms`` column, so that in every row ``% of peak = peak ms / ms`` and the rows rank by % as they
rank by ms. Beside the % is what the kernel achieved at its bound (``achieved``: the cost model's
FLOPs or bytes at the bound over the ms; % of peak = achieved / the bound's ceiling). A calibrated
figure (the roofline at the figure of a control timed with the kernel, ``scoring.figures``) comes
only with its own ``calibrated peak ms`` column, and ``calibrated % = calibrated peak ms / ms``.
A table scored against provisional ceilings (measured while the machine was busy) says so at the
start of its title, its first line. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.markup import escape

from accelopt.formatting import achieved, giga, milliseconds, percent
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.composite import SEPARATOR
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.calibration import work
from accelopt.profiling.parent.rescoring import cached_peak
from accelopt.profiling.parent.scoring import workload_roofline
from accelopt.profiling.stats import geomean

PROVISIONAL = "provisional ceilings"  # the start of the title of a table scored against them


@dataclass(frozen=True)
class Roof:
    """The one ceiling of a table's row (a problem at a workload; a geometric mean over several,
    as ``composite.combine`` makes it): the roofline time at the cached ceilings, the bound that
    sets it and the work its ceiling pays (FLOPs or bytes; None: not known here)."""

    peak_s: float
    bound: str
    work: float | None = None

    def pct(self, latency_s: float | None) -> float | None:
        """% of peak of a kernel of ``latency_s``: peak over it, a fraction."""
        return self.peak_s / latency_s if latency_s else None

    def rate(self, latency_s: float | None) -> float | None:
        """What a kernel of ``latency_s`` achieved at the bound (FLOP/s or bytes/s)."""
        return self.work / latency_s if latency_s and self.work is not None else None

    def cells(self, latency_s: float | None) -> list[str]:
        """The ``%`` and ``achieved`` cells of a kernel of ``latency_s``."""
        return [percent(self.pct(latency_s)), achieved(self.rate(latency_s), self.bound)]


def roof_at(problem: Problem, workload: str, hardware: HardwareSpec) -> Roof:
    """The roof of ``problem`` at ``workload`` on ``hardware``; for a combined workload ("a+b"),
    the geometric means of its workloads' roofline times and works (the first one's bound)."""
    roofs = [workload_roofline(problem, name, hardware) for name in _names(problem, workload)]
    peaks = [r.peak_s for r in roofs]
    bound = str(roofs[0].bound)
    return Roof(geomean(peaks) or peaks[0], bound, work_at(problem, workload, bound))


def work_at(problem: Problem, workload: str, bound: str) -> float | None:
    """What ``bound``'s ceiling pays for ``problem`` at ``workload`` (FLOPs or bytes of its cost
    model; the geometric mean over a combined workload's)."""
    names = _names(problem, workload)
    return geomean([work(problem.cost.at(problem.workload(n).sizes), bound) for n in names])


def _names(problem: Problem, workload: str) -> list[str]:
    return [workload] if problem.has_workload(workload) else workload.split(SEPARATOR)


def roof_of(
    evaluation: Evaluation, problem: Problem | None = None, hardware: HardwareSpec | None = None
) -> Roof:
    """The roof of ``evaluation``'s problem and workload: at ``hardware``'s ceilings where it is
    given, else the evaluation's own cached roofline; the work from ``problem``'s cost model
    (None without it)."""
    if problem is not None and hardware is not None:
        return roof_at(problem, evaluation.workload, hardware)
    bound = str(evaluation.bound)
    done = work_at(problem, evaluation.workload, bound) if problem is not None else None
    return Roof(cached_peak(evaluation), bound, done)


def problem_roof(
    problem: Problem, evaluations: Sequence[Evaluation], hardware: HardwareSpec | None
) -> Roof | None:
    """The roof of ``problem``'s row in a table of ``evaluations`` (``roof_of`` its first one;
    None: none of them is of ``problem``)."""
    first = next((e for e in evaluations if e.problem == problem.name), None)
    return None if first is None else roof_of(first, problem, hardware)


def calibrated_cells(calibrated_peak_s: float | None, latency_s: float | None) -> list[str]:
    """The ``calibrated peak ms`` and ``calibrated %`` cells: the roofline at the control's
    figure, and it over ``latency_s``."""
    pct = calibrated_peak_s / latency_s if calibrated_peak_s and latency_s else None
    return [milliseconds(calibrated_peak_s), percent(pct)]


@dataclass(frozen=True)
class RunCeiling:
    """What a run's tables are scored against: the run's roof and, by kernel hash, the calibrated
    roofline time of each kernel that has one (the control timed with it)."""

    roof: Roof
    calibrated: Mapping[str, float] = field(default_factory=dict)


def run_ceiling(
    evaluations: Sequence[Evaluation],
    problem: Problem | None = None,
    hardware: HardwareSpec | None = None,
) -> RunCeiling:
    """The ceiling of a run's table from its kernels' evaluations (the first sets the roof:
    ``roof_of``); each one's calibrated roofline time where it has one."""
    calibrated = {e.kernel_hash: e.calibration.peak_s for e in evaluations if e.calibration}
    return RunCeiling(roof_of(evaluations[0], problem, hardware), calibrated)


def titled(title: str, hardware: HardwareSpec | None) -> str:
    """A table's title (markup escaped), led by ``PROVISIONAL`` where ``hardware``'s ceilings
    are provisional: the first thing its reader sees."""
    if hardware is not None and hardware.provisional:
        return (
            f"[bold yellow]{PROVISIONAL}[/bold yellow] (measured while the machine was busy): "
            + escape(title)
        )
    return escape(title)


def ceiling_lines(hardware: HardwareSpec | None, calibrated: str = "") -> list[str]:
    """The lines under a table that say what its peak columns are: the cached ceilings (of
    ``hardware``), whether they are provisional, and ``calibrated``: what the calibrated columns
    are, or where to find the calibrated figures ("": nothing said)."""
    where = f"{hardware.name}'s cached ceilings" if hardware is not None else "the cached ceilings"
    if hardware is not None:
        where += (
            f" (matmul {giga(hardware.matmul_rate, 'FLOP/s')}, vector "
            f"{giga(hardware.vector_rate, 'FLOP/s')}, bandwidth {giga(hardware.bandwidth, 'B/s')})"
        )
    lines = [
        f"peak ms: the roofline at {where}; % of peak = peak ms / ms; achieved: the cost model's "
        "FLOPs (matmul- and vector-bound) or bytes (memory-bound) over ms"
    ]
    if hardware is not None and hardware.provisional:
        lines.append(
            f"{PROVISIONAL}: measured while the machine was busy; measured again, keeping the "
            "higher figures, once it is quiet (accelopt hardware)"
        )
    return lines + ([calibrated] if calibrated else [])


CALIBRATED_COLUMNS = (
    "calibrated peak ms: the roofline at the figure of a control timed with the kernel "
    "(docs/measurement.md); calibrated % = calibrated peak ms / ms, what optimize ranks matmul- "
    "and vector-bound kernels by"
)

SUITE_CALIBRATED = (
    "calibrated % of peak (against a control timed with each kernel, docs/measurement.md): "
    "--json 'calibrated_pct' and 'calibrated_peak_s'"
)
