"""The tuned variants of a run as the report and the dashboard show them: each variant's value of
every tunable, its latency with its 95 % interval, and its % of peak against the cached ceilings
with the peak it uses (``figures``); and, per tunable, the latencies against its values (the
sensitivity plot's data). Built from ``search.variants.variant_tables`` (which rows, in which order,
each one's re-timing) and the run's kernels and evaluations. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelopt.backends.tunables import language_of, values_of
from accelopt.hardware.spec import HardwareSpec
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports import figures
from accelopt.search.variants import VariantRow, VariantTable, declared
from accelopt.store.records import KernelRecord

AS_WRITTEN = "(as written)"


@dataclass(frozen=True)
class VariantView:
    """One row of a tuned kernel's table."""

    kernel_hash: str
    values: Mapping[str, str]  # tunable -> the value this variant has
    as_written: bool  # the kernel tuned itself, not a variant
    status: str
    latency_s: float | None
    ci_low_s: float | None  # the latency's 95 % interval (the machine's drift included)
    ci_high_s: float | None
    peak_s: float | None  # roofline time at the cached ceilings; pct = peak_s / latency_s
    pct: float | None
    achieved: float | None  # FLOP/s or B/s of the unit that bounds the kernel
    unit: str
    # re-timed side by side: its speedup over the kernel as written (above 1 is faster) and
    # the interval's half-width, relative; None where never re-timed
    speedup: float | None
    speedup_ci: float | None
    kept: bool
    raced: bool

    @property
    def label(self) -> str:
        text = " ".join(f"{k}={v}" for k, v in self.values.items())
        return f"{text} {AS_WRITTEN}" if self.as_written else text


@dataclass(frozen=True)
class TunedKernel:
    """A kernel that declares tunables and the variants measured of it."""

    kernel_hash: str
    iteration: int
    tunables: tuple[str, ...]
    choices: Mapping[str, tuple[str, ...]]  # each tunable's declared values, in plotting order
    rows: tuple[VariantView, ...]


@dataclass(frozen=True)
class SensitivityPoint:
    value: str
    latency_s: float
    ci_low_s: float | None
    ci_high_s: float | None
    as_written: bool
    kept: bool


@dataclass(frozen=True)
class Sensitivity:
    """One tunable: each timed variant's latency at its value of that tunable (the others vary
    between the points at one value), and how many variants have no latency."""

    tunable: str
    values: tuple[str, ...]  # the x axis, in order
    points: tuple[SensitivityPoint, ...]
    untimed: int


def tuned_kernels(
    tables: Sequence[VariantTable],
    kernels: Mapping[str, KernelRecord],
    evaluations: Mapping[str, Evaluation],
    backend: str,
    spec: HardwareSpec | None,
) -> list[TunedKernel]:
    """Each variant table with every row's values, interval and cached figures; ``spec``: the
    run's ceilings (the achieved rate), None where not known."""
    language = language_of(backend)
    found = []
    for table in tables:
        own = kernels.get(table.kernel_hash)
        tunables = declared(own.source, backend) if own is not None else []
        rows = []
        for row in table.rows:
            source = kernels[row.kernel_hash].source if row.kernel_hash in kernels else ""
            values = values_of(source, tunables, language) if source else {}
            rows.append(_view(row, values, evaluations.get(row.kernel_hash), spec))
        choices = {t.name: ordered((t.default, *t.values)) for t in tunables}
        found.append(
            TunedKernel(table.kernel_hash, table.iteration, tuple(choices), choices, tuple(rows))
        )
    return found


def _view(
    row: VariantRow, values: Mapping[str, str], e: Evaluation | None, spec: HardwareSpec | None
) -> VariantView:
    shown = e if e is not None and row.latency_s is not None else None  # as the table judged it
    c = figures.cached(shown, spec) if shown is not None else None
    return VariantView(
        kernel_hash=row.kernel_hash,
        values=dict(values),
        as_written=row.values == AS_WRITTEN,
        status=row.status,
        latency_s=row.latency_s,
        ci_low_s=shown.ci_low_s if shown else None,
        ci_high_s=shown.ci_high_s if shown else None,
        peak_s=c.peak_s if c else None,
        pct=c.pct if c else None,
        achieved=c.achieved if c else None,
        unit=c.unit if c else "",
        speedup=row.speedup,
        speedup_ci=row.speedup_ci,
        kept=row.kept,
        raced=row.raced,
    )


def ordered(values: Sequence[str]) -> tuple[str, ...]:
    """Distinct values, by number where all are integers, else as declared."""
    distinct = tuple(dict.fromkeys(values))
    try:
        return tuple(sorted(distinct, key=int))
    except ValueError:
        return distinct


def sensitivity(kernel: TunedKernel) -> list[Sensitivity]:
    """Per tunable that took more than one value among the timed rows, its points."""
    timed = [r for r in kernel.rows if r.latency_s]
    untimed = len(kernel.rows) - len(timed)
    found = []
    for name in kernel.tunables:
        seen = {r.values.get(name) for r in timed}
        if len(seen - {None}) < 2:
            continue  # never varied: nothing to plot against
        axis = tuple(v for v in kernel.choices[name] if v in seen) + tuple(
            sorted(v for v in seen if v is not None and v not in kernel.choices[name])
        )
        points = tuple(
            SensitivityPoint(
                r.values[name], r.latency_s, r.ci_low_s, r.ci_high_s, r.as_written, r.kept
            )
            for r in timed
            if r.latency_s and name in r.values
        )
        found.append(Sensitivity(name, axis, points, untimed))
    return found
