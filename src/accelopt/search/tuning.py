"""Tuning a kernel's declared parameters by measuring, with no LLM call (``backends/tunables.py``).

A kernel that PASSED and declares tunables gets up to ``SearchConfig.variants`` variants
(``tunables.sweep``: the whole product when it fits, else single-parameter moves first, then a
seeded random draw). Each is admitted to the run like any kernel, as the same plan's child of the
same parent (origin ``tuned``), and evaluated racing the kernel it varies: one clearly slower
stops timing early. A variant that does not build, fails its checks or crashes is recorded with
its status and left out. The fastest few that could be faster (``compare``: not NOT_FASTER) are
then re-timed beside that kernel in one session on one device, with the search's own rules
(``settling.retime``: its noise floor, and a gain confirmed against the kernel's twin); the
fastest variant found faster there is kept, else the kernel itself.

The variants of one kernel are the run's kernels of origin ``tuned`` with the same source once the
tuned values are taken out (``tunables.base``): ``variant_tables`` makes their tables.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelopt.agents.planner import Plan
from accelopt.backends.status import Status
from accelopt.backends.tunables import (
    Tunable,
    TunableError,
    base,
    find_tunables,
    label,
    language_of,
    render,
    sweep,
    values_of,
)
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.selection import Candidate, Comparison, compare, session_verdicts
from accelopt.store.records import KernelOrigin, KernelRecord

if TYPE_CHECKING:
    from accelopt.search.loop import Optimizer

AUTOTUNE_PLAN = Plan(title="autotune", steps=())
RACED_IN_SESSION = 3  # the fastest variants re-timed beside the kernel they vary, at most


def declared(source: str, backend: str) -> list[Tunable]:
    """The tunables of a kernel; none where a declaration cannot be used (told nowhere else:
    the kernel is then simply not tuned)."""
    try:
        return find_tunables(source, language_of(backend))
    except TunableError:
        return []


def _seed(kernel_hash: str, t: int) -> int:
    return int(hashlib.sha256(f"{kernel_hash}:{t}".encode()).hexdigest()[:8], 16)


def tried_labels(
    kernels: Sequence[KernelRecord], source: str, backend: str, before: int
) -> frozenset[str]:
    """The values already tried on ``source`` (itself or a variant of it) in iterations before
    ``before``."""
    language = language_of(backend)
    tunables = declared(source, backend)
    mine = base(source, language)
    return frozenset(
        label(values_of(k.source, tunables, language))
        for k in kernels
        if k.iteration < before and base(k.source, language) == mine
    )  # fmt: skip


async def tune(
    opt: Optimizer, t: int, cand: Candidate, parent: Candidate | None, plan: Plan
) -> Candidate:
    """``cand`` (written for ``plan`` on ``parent``) or its fastest variant, as the module's
    docstring says; ``cand`` itself where it did not pass or declares nothing."""
    backend = opt.backend.name
    # a name the harness defines (a size of the problem) is not the kernel's to vary: a variant
    # redefining it would compute another problem, and only fail its checks
    sizes = set(opt.problem.params)
    tunables = [t for t in declared(cand.kernel.source, backend) if t.name not in sizes]
    limit = opt.config.variants
    if not tunables or not cand.evaluation.passed or limit == 0:
        return cand
    language = language_of(backend)
    current = values_of(cand.kernel.source, tunables, language)
    tried = tried_labels(opt.store.kernels(opt.run.id), cand.kernel.source, backend, t)
    chosen = sweep(tunables, current, limit, _seed(cand.hash, t), tried)
    if not chosen:
        return cand
    opt.phase("tuning", t)
    sources = [render(cand.kernel.source, values, language) for values in chosen]
    variants = await asyncio.gather(
        *(opt.admit(s, parent, plan, t, KernelOrigin.TUNED, race=cand) for s in sources)
    )
    return await _race(opt, t, cand, list(variants))


async def _race(opt: Optimizer, t: int, cand: Candidate, variants: list[Candidate]) -> Candidate:
    out = Comparison.NOT_FASTER
    hopeful = [
        v for v in variants if v.hash != cand.hash and compare(v.evaluation, cand.evaluation) != out
    ]
    contenders = sorted(hopeful, key=lambda v: v.latency or float("inf"))[:RACED_IN_SESSION]
    if not contenders:
        return cand
    verdicts = await opt.retime(t, cand, contenders)
    faster = [v for v in contenders if verdicts.get(v.hash) is Comparison.FASTER]
    return faster[0] if faster else cand


MAX_VARIANT_LINES = 12  # the planner is shown this many of a kernel's variants, at most


def variant_lines(
    kernels: Sequence[KernelRecord], evaluations: Mapping[str, Evaluation], kernel: KernelRecord,
    backend: str, before: int,
) -> list[str]:  # fmt: skip
    """What the planner is told of ``kernel``'s variants measured in iterations before
    ``before`` (so a resumed iteration is shown the same): one line each, fastest first, with
    its speedup over ``kernel`` (``kernel``'s time over the variant's, above 1 is faster:
    "values: speedup 1.08x over this kernel (separate evaluations)"), or its status."""
    language = language_of(backend)
    tunables = declared(kernel.source, backend)
    if not tunables:
        return []
    mine, own = base(kernel.source, language), evaluations.get(kernel.hash)
    found = [
        (label(values_of(k.source, tunables, language)), evaluations.get(k.hash))
        for k in kernels
        if k.hash != kernel.hash and k.iteration < before and base(k.source, language) == mine
    ]
    found.sort(key=lambda f: (f[1] is None or not f[1].latency_s, f[1].latency_s if f[1] else 0))
    lines = []
    for values, e in found[:MAX_VARIANT_LINES]:
        if e is None or e.status is not Status.PASSED or not e.latency_s:
            lines.append(f"{values}: {e.status.value if e else 'stopped early: slower'}")
        elif own is not None and own.latency_s:
            speedup = own.latency_s / e.latency_s
            lines.append(
                f"{values}: speedup {speedup:.2f}x over this kernel (separate evaluations)"
            )
        else:
            lines.append(f"{values}: {e.latency_s * 1e3:.3f} ms")
    return lines


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


Session = tuple[Sequence[str], Mapping[str, Any]]  # a stored re-timing: its kernels, its data
Ratio = tuple[float | None, float | None, str]  # a child's time ratio, its interval, the reference


def session_ratios(sessions: Sequence[Session]) -> dict[str, Ratio]:
    """Each child's ratio, interval and reference in the last session that timed it (a twin
    session, which confirms a gain, comes after the one that found it)."""
    found: dict[str, Ratio] = {}
    for kernels, data in sessions:
        children = kernels[2:] if data.get("twin") else kernels[1:]
        for child, (ratio, ci) in zip(children, session_verdicts(data), strict=True):
            found[child] = (ratio, ci, kernels[0])
    return found


def variant_tables(
    kernels: Sequence[KernelRecord],
    evaluations: Mapping[str, Evaluation],
    raced: frozenset[str],
    kept: frozenset[str],
    backend: str,
    sessions: Sequence[Session] = (),
) -> list[VariantTable]:
    """Every tuned kernel's variant table, in the order the kernels were recorded
    (``VariantTable``). ``sessions``: the run's re-timings (``Store.retimings``), whose ratios
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
    return dataclasses.replace(row, session_ratio=ratio, session_ci=ci,
                               session_reference=reference, session_speedup=speedup)  # fmt: skip


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
        self, kernel: KernelRecord, variants: Sequence[KernelRecord],
        evaluations: Mapping[str, Evaluation], raced: frozenset[str], kept: frozenset[str],
        backend: str,
    ) -> None:  # fmt: skip
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
        return VariantRow(k.hash, shown, e.status.value, latency, pct, False, kept,
                          ci=e.ci if latency else None, by_evaluations=compared,
                          measured_at=e.measured_at, load_others=e.load_others)  # fmt: skip


def _cached_peak(e: Evaluation) -> float | None:
    """The roofline time at the hardware's cached ceiling (a record from before calibrated
    figures has it as its ``peak_s``)."""
    if e.cached_peak_s:
        return e.cached_peak_s
    return e.peak_s if not e.calibrated and e.peak_s else None
