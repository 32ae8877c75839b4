"""The workloads of a run: those it tunes on and those it holds out, and their figures.

A run tunes on one or more workloads (the score is the geometric mean of % of peak over them,
``profiling.composite``) and may hold others out: the agents never see a held-out workload, and
the baseline and the best kernel are measured on it once the search ends, so that the report
shows whether the speedup carried over to shapes the kernel was not tuned on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

from accelopt.errors import UserError
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.stats import geomean
from accelopt.search.evaluations import run_evaluations
from accelopt.search.spec import RunSpec
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


class WorkloadRole(StrEnum):
    """What a run does with one of its workloads."""

    TUNED = "tuned"  # the score is the geometric mean over these; the agents see them
    HELD_OUT = "held out"  # measured only at the end, on the baseline and the best kernel


@dataclass(frozen=True)
class RunWorkloads:
    tuned: tuple[str, ...]
    held_out: tuple[str, ...] = ()

    @property
    def primary(self) -> str:
        """The first tuned workload: the run's ``workload``, whose sizes the agents see first."""
        return self.tuned[0]

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.tuned, *self.held_out)

    @property
    def several(self) -> bool:
        """Whether the run goes beyond one workload (a generalization table is worth showing)."""
        return len(self.tuned) > 1 or bool(self.held_out)

    def role(self, workload: str) -> WorkloadRole:
        return WorkloadRole.TUNED if workload in self.tuned else WorkloadRole.HELD_OUT


def choose_workloads(
    problem: Problem, tuned: Sequence[str], held_out: Sequence[str] = ()
) -> RunWorkloads:
    """The run's workloads as the user named them, checked: each exists, none twice, and none
    held out that is tuned on (by name or by its sizes). A UserError otherwise. A workload given
    by its sizes (``M=512,N=768,K=384``) is kept under its canonical name."""
    chosen = RunWorkloads(
        tuple(workload_name(problem, n) for n in tuple(tuned) or ("cpu",)),
        tuple(workload_name(problem, n) for n in held_out),
    )
    named = [*chosen.tuned, *chosen.held_out]
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise UserError(
            f"workload {twice[0]} is named twice: tune on a workload (--workload) or hold it "
            "out (--held-out), once"
        )
    sizes = {_key(problem, n): n for n in chosen.tuned}
    for name in chosen.held_out:
        same = sizes.get(_key(problem, name))
        if same is not None:
            raise UserError(
                f"held-out workload {name} has the sizes of tuned workload {same}: it would "
                "hold nothing out; hold out a workload with other sizes"
            )
    return chosen


def workload_name(problem: Problem, name: str) -> str:
    """The canonical name of the workload ``name`` (a workload's name, or its sizes in any
    order: ``problems.sizes``); a UserError, one sentence saying what to give, when there is
    none."""
    try:
        return problem.workload_name(name)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None


def _key(problem: Problem, workload: str) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(problem.workload(workload).sizes.items()))


def run_workloads(run: RunRecord) -> RunWorkloads:
    """The workloads a run recorded (a run made before runs had several: its one workload)."""
    spec = RunSpec.of(run)
    return RunWorkloads(spec.tuned(run), spec.held_out)


@dataclass(frozen=True)
class WorkloadFigures:
    """One workload's row of the generalization table: baseline vs best."""

    workload: str
    role: WorkloadRole
    sizes: Mapping[str, int]
    baseline_latency_s: float | None
    baseline_pct: float | None
    best_latency_s: float | None
    best_pct: float | None
    best_status: str  # the best kernel's status there ("" when not measured)

    @property
    def speedup(self) -> float | None:
        b, t = self.baseline_latency_s, self.best_latency_s
        return b / t if b and t else None


@dataclass(frozen=True)
class GroupFigures:
    """The geometric means over the tuned, or the held-out, workloads."""

    role: WorkloadRole
    workloads: int
    baseline_pct: float | None
    best_pct: float | None
    speedup: float | None


def _passed(e: Evaluation | None) -> Evaluation | None:
    return e if e is not None and e.passed else None


def workload_figures(
    workloads: RunWorkloads,
    sizes: Mapping[str, Mapping[str, int]],
    baseline: Mapping[str, Evaluation],
    best: Mapping[str, Evaluation],
) -> list[WorkloadFigures]:
    """A row per workload (tuned first), from the baseline's and the best kernel's evaluation
    on each (workload -> evaluation; a missing one is a workload not measured yet)."""
    rows = []
    for name in workloads.all:
        b, t = _passed(baseline.get(name)), best.get(name)
        rows.append(
            WorkloadFigures(
                workload=name,
                role=workloads.role(name),
                sizes=dict(sizes.get(name, {})),
                baseline_latency_s=b.latency_s if b else None,
                baseline_pct=b.pct_of_peak if b else None,
                best_latency_s=t.latency_s if t is not None and t.passed else None,
                best_pct=t.pct_of_peak if t is not None and t.passed else None,
                best_status=t.status.value if t is not None else "",
            )
        )
    return rows


def group_figures(rows: Sequence[WorkloadFigures]) -> list[GroupFigures]:
    """Geometric means per role; a group with a workload not measured (or failed) has None."""
    groups = []
    for role in WorkloadRole:
        members = [r for r in rows if r.role == role]
        if not members:
            continue
        groups.append(
            GroupFigures(
                role=role,
                workloads=len(members),
                baseline_pct=_all_or_none([r.baseline_pct for r in members]),
                best_pct=_all_or_none([r.best_pct for r in members]),
                speedup=_all_or_none([r.speedup for r in members]),
            )
        )
    return groups


def _all_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return geomean(known) if len(known) == len(values) else None


@dataclass(frozen=True)
class Generalization:
    """A run's figures per workload (baseline vs best) and their means per role."""

    workloads: RunWorkloads
    rows: tuple[WorkloadFigures, ...]
    groups: tuple[GroupFigures, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "tuned": list(self.workloads.tuned),
            "held_out": list(self.workloads.held_out),
            "workloads": [asdict(r) | {"speedup": r.speedup} for r in self.rows],
            "geomeans": [asdict(g) for g in self.groups],
        }


def generalization(store: Store, run: RunRecord) -> Generalization:
    """The run's generalization table, from the evaluations the store holds of its baseline
    and its best kernel on each of its workloads."""
    chosen = run_workloads(run)
    baseline: dict[str, Evaluation] = {}
    best: dict[str, Evaluation] = {}
    for name in chosen.all:
        found = run_evaluations(store, run, workload=name)
        if run.baseline_hash in found:
            baseline[name] = found[run.baseline_hash]
        if run.best_hash in found:
            best[name] = found[run.best_hash]
    sizes = RunSpec.of(run).workload_sizes
    rows = workload_figures(chosen, sizes, baseline, best)
    return Generalization(chosen, tuple(rows), tuple(group_figures(rows)))
