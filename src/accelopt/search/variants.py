"""A kernel's variants: the tunables it declares (``backends/tunables.py``), and the table of
the variants a run measured of it (``variant_tables``), which the command line, the views and the
reports show.

The variants of one kernel are the run's kernels of origin ``tuned`` with the same source once the
tuned values are taken out (``tunables.base``). A row carries the variant's evaluation and, where
it was re-timed beside the kernel it varies (``Tuner``), that session's ratio
(``RetimingRecord``), chained through earlier winners to the kernel as written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelopt.backends.status import Status
from accelopt.backends.tunables import (
    Tunable,
    TunableError,
    base,
    find_tunables,
    label,
    language_of,
    values_of,
)
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.retimings import RetimingRecord
from accelopt.search.selection import compare, session_verdicts
from accelopt.store.records import KernelOrigin, KernelRecord


def declared(source: str, backend: str) -> list[Tunable]:
    """The tunables of a kernel; none where a declaration cannot be used (told nowhere else:
    the kernel is then simply not tuned)."""
    try:
        return find_tunables(source, language_of(backend))
    except TunableError:
        return []


COULD_NOT = "could not be evaluated"  # the service failed it, not the variant (profiling/faults)
UNMEASURED = frozenset({COULD_NOT, "not evaluated"})


@dataclass(frozen=True)
class VariantRow:
    """One row of a kernel's variant table: the values, and how the variant fared."""

    kernel_hash: str
    values: str  # ``label``: "BM=32 BN=64"; "(as written)" for the kernel tuned
    status: str
    latency_s: float | None
    pct_of_peak: float | None  # the table's one peak (``VariantTable.peak_s``) / latency_s
    raced: bool
    kept: bool  # the run kept it (its best, or a beam member)
    # re-timed beside the kernel tuned (its last session): its time over that kernel's (a time
    # ratio: below 1 is faster), the interval's half-width, and that kernel's hash (None: never
    # re-timed)
    session_ratio: float | None = None
    session_ci: float | None = None
    session_reference: str = ""
    ci: float | None = None  # the evaluation's 95 % interval half-width, relative (0.047: ±4.7 %)
    session_speedup: float | None = None  # 1 / session_ratio: above 1 is faster
    # the re-timed speedup over the table's kernel (as written), above 1 faster: the session's,
    # or chained through the kernels it was re-timed against (each an earlier winner re-timed
    # against the kernel as written, intervals added in quadrature); None where not re-timed
    speedup: float | None = None
    speedup_ci: float | None = None
    # ``selection.compare`` of its evaluation with the kernel as written's: "faster", "unsure"
    # (re-timed before deciding), "not faster" (within the noise: never re-timed); '' if failed
    by_evaluations: str = ""
    measured_at: str = ""  # when its evaluation was made (``Evaluation.measured_at``)
    load_others: float | None = None  # the share of the CPUs others used while it was timed


@dataclass(frozen=True)
class VariantTable:
    """The variants of one kernel of a run: its own row first, then the variants in the order
    that decides (re-timed speedup over it, highest first; then ms; those without a time last)."""

    kernel_hash: str  # the kernel they vary (as written or as started)
    iteration: int
    rows: tuple[VariantRow, ...]
    # the one roofline time every row's % of peak is against (the hardware's cached ceiling,
    # the same for every row: a calibrated figure has a peak of its own per evaluation)
    peak_s: float | None = None
    ceiling: str = "cached"


Ratio = tuple[float | None, float | None, str]  # a child's time ratio, its interval, the reference


def session_ratios(sessions: Sequence[RetimingRecord]) -> dict[str, Ratio]:
    """Each child's ratio, interval and reference in the last session that timed it (a twin
    session, which confirms a gain, comes after the one that found it)."""
    found: dict[str, Ratio] = {}
    for session in sessions:
        kernels = session.kernels
        children = kernels[2:] if session.twin else kernels[1:]
        for child, (ratio, ci) in zip(children, session_verdicts(session), strict=True):
            found[child] = (ratio, ci, kernels[0])
    return found


def variant_tables(
    kernels: Sequence[KernelRecord],
    evaluations: Mapping[str, Evaluation],
    raced: frozenset[str],
    kept: frozenset[str],
    backend: str,
    sessions: Sequence[RetimingRecord] = (),
) -> list[VariantTable]:
    """Every tuned kernel's variant table, in the order the kernels were recorded
    (``VariantTable``). ``sessions``: the run's re-timings (``stored_retimings``), whose ratios
    the rows carry."""
    ratios = session_ratios(sessions)
    language = language_of(backend)
    groups: dict[str, list[KernelRecord]] = {}
    for k in kernels:
        if k.origin == KernelOrigin.TUNED:
            groups.setdefault(base(k.source, language), []).append(k)
    tables = []
    for k in kernels:
        if k.origin == KernelOrigin.TUNED:
            continue
        variants = groups.pop(base(k.source, language), None)
        if variants:
            found = _Rows(k, variants, evaluations, raced, kept, backend)
            rows = _chained([_with_session(found.row(v), ratios) for v in variants], k.hash)
            rows.sort(key=_deciding)
            own = found.row(k, "(as written)")
            tables.append(VariantTable(k.hash, k.iteration, (own, *rows), found.peak_s))
    return tables


def _deciding(row: VariantRow) -> tuple[int, float]:
    """Re-timed over the kernel as written first (highest speedup first), then by ms, then
    those without a time."""
    if row.speedup is not None:
        return 0, -row.speedup
    return (1, row.latency_s) if row.latency_s is not None else (2, 0.0)


def _with_session(row: VariantRow, ratios: Mapping[str, Ratio]) -> VariantRow:
    if row.kernel_hash not in ratios:
        return row
    ratio, ci, reference = ratios[row.kernel_hash]
    speedup = 1.0 / ratio if ratio else None
    return dataclasses.replace(
        row,
        session_ratio=ratio,
        session_ci=ci,
        session_reference=reference,
        session_speedup=speedup,
    )


def _chained(rows: list[VariantRow], kernel_hash: str) -> list[VariantRow]:
    """``rows`` with their re-timed speedup over ``kernel_hash``: a row re-timed against another
    row (an earlier winner) multiplies its speedup by that row's, when that row's is known."""
    by_hash = {r.kernel_hash: r for r in rows}
    found: dict[str, tuple[float, float | None] | None] = {}

    def over(row: VariantRow, seen: frozenset[str]) -> tuple[float, float | None] | None:
        if row.session_speedup is None or row.kernel_hash in seen:
            return None
        own = (row.session_speedup, row.session_ci)
        if row.session_reference == kernel_hash:
            return own
        via = by_hash.get(row.session_reference)
        step = None if via is None else over(via, seen | {row.kernel_hash})
        if step is None:
            return None
        ci = None if own[1] is None or step[1] is None else math.hypot(own[1], step[1])
        return own[0] * step[0], ci

    for row in rows:
        found[row.kernel_hash] = over(row, frozenset())
    return [
        dataclasses.replace(r, speedup=f[0], speedup_ci=f[1]) if (f := found[r.kernel_hash]) else r
        for r in rows
    ]


class _Rows:
    """The rows of one kernel's table: each against the table's one peak (the cached roofline
    time of the kernel as written, else of the first variant that has one), and compared with
    the kernel as written by their evaluations."""

    def __init__(
        self,
        kernel: KernelRecord,
        variants: Sequence[KernelRecord],
        evaluations: Mapping[str, Evaluation],
        raced: frozenset[str],
        kept: frozenset[str],
        backend: str,
    ) -> None:
        self.language = language_of(backend)
        self.tunables = declared(kernel.source, backend)
        self.evaluations, self.raced, self.kept = evaluations, raced, kept
        self.own = evaluations.get(kernel.hash)
        found = (evaluations.get(k.hash) for k in [kernel, *variants])
        self.peak_s = next((p for e in found if e is not None and (p := _cached_peak(e))), None)

    def row(self, k: KernelRecord, values: str = "") -> VariantRow:
        """A raced variant (its timing stopped early: clearly slower than the kernel it varies)
        has no final figure."""
        e, kept = self.evaluations.get(k.hash), k.hash in self.kept
        shown = values or label(values_of(k.source, self.tunables, self.language))
        if e is None:
            status = "raced: slower" if k.hash in self.raced else "not evaluated"
            return VariantRow(k.hash, shown, status, None, None, k.hash in self.raced, kept)
        if e.service:
            return VariantRow(k.hash, shown, COULD_NOT, None, None, False, kept)
        latency = e.latency_s if e.status is Status.PASSED else None
        pct = self.peak_s / latency if latency and self.peak_s else None
        compared = "" if latency is None or self.own is None else compare(e, self.own).value
        return VariantRow(
            k.hash,
            shown,
            e.status.value,
            latency,
            pct,
            False,
            kept,
            ci=e.ci if latency else None,
            by_evaluations=compared,
            measured_at=e.measured_at,
            load_others=e.load_others,
        )


def _cached_peak(e: Evaluation) -> float | None:
    """The roofline time at the hardware's cached ceiling (a record from before calibrated
    figures has it as its ``peak_s``)."""
    if e.cached is not None and e.cached.peak_s:
        return e.cached.peak_s
    return e.peak_s if not e.calibrated and e.peak_s else None
