"""What the planner is shown of a parent besides its profile (``ParentBrief``), all from
iterations before the current one, so that a resumed iteration is shown the same: the lessons
retrieved for it (``Lessons.shown``), the plans tried on its lineage (``history.plans_tried``),
and, where it declares tunables, one line per variant its tuning measured (``variant_lines``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelopt.agents.attempts import TriedPlan
from accelopt.backends.status import Status
from accelopt.backends.tunables import base, label, language_of, values_of
from accelopt.memory.records import Experience
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.variants import declared
from accelopt.store.records import KernelRecord


@dataclass(frozen=True)
class ParentBrief:
    """What the planner is shown of a parent besides its profile: the lessons retrieved for it,
    the plans tried on its lineage, and what its tuning measured where it declares tunables."""

    lessons: tuple[Experience, ...] = ()
    tried: tuple[TriedPlan, ...] = ()
    variants: tuple[str, ...] = ()


MAX_VARIANT_LINES = 12  # the planner is shown this many of a kernel's variants, at most


def variant_lines(
    kernels: Sequence[KernelRecord],
    evaluations: Mapping[str, Evaluation],
    kernel: KernelRecord,
    backend: str,
    before: int,
) -> list[str]:
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
