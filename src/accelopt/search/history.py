"""What the planner is told was tried before on a kernel's lineage: pure functions over the run's
kernel records and cached evaluations.

The lineage of a kernel is the kernel, its parent, its parent's parent, ... (``LINEAGE_DEPTH`` of
them). Every plan tried on one of them (one title in one iteration) is reported once, with the
best of its kernels that PASSED (its time over the lineage kernel's: > 1 is faster), or, when none
passed, how they failed. Only iterations before the current one count, so that a resumed iteration
is shown exactly what the killed one was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from accelopt.agents.attempts import TriedPlan
from accelopt.profiling.evaluation import Evaluation
from accelopt.store.records import KernelRecord

LINEAGE_DEPTH = 4  # the kernel and three ancestors
MAX_TRIED = 24  # the most recent plans shown, at most


def lineage(
    kernels: Mapping[str, KernelRecord], start: str, depth: int = LINEAGE_DEPTH
) -> list[str]:
    """``start`` and its ancestors, nearest first (a cycle or an unknown parent ends it)."""
    chain: list[str] = []
    current = start
    while current in kernels and current not in chain and len(chain) < depth:
        chain.append(current)
        current = kernels[current].parent_hash
    return chain


def _where(distance: int) -> str:
    return {0: "this kernel", 1: "its parent"}.get(distance, f"{distance} generations up")


def _outcome(
    base: Evaluation | None, tried: Sequence[Evaluation | None]
) -> tuple[float | None, str]:
    """The best PASSED child's speedup over ``base``; else the commonest failure status."""
    times = [e.latency_s for e in tried if e is not None and e.passed and e.latency_s]
    if times and base is not None and base.latency_s:
        return base.latency_s / min(times), ""
    failures = Counter(e.status.value for e in tried if e is not None and not e.passed)
    return None, failures.most_common(1)[0][0] if failures else ""


def plans_tried(
    kernels: Sequence[KernelRecord],
    evaluations: Mapping[str, Evaluation],
    start: str,
    before: int,
) -> list[TriedPlan]:
    """The plans tried on ``start``'s lineage in iterations before ``before``, oldest first
    (the most recent MAX_TRIED). ``kernels``: a record for every time a kernel was written
    (``Store.kernels(every_write=True)``), so that a plan tried again is reported again even
    when it wrote the same kernel; the lineage follows each kernel's first record."""
    by_hash: dict[str, KernelRecord] = {}
    for k in kernels:
        by_hash.setdefault(k.hash, k)
    chain = lineage(by_hash, start)
    groups: dict[tuple[int, int, str], list[Evaluation | None]] = {}
    for k in kernels:
        if k.iteration >= before or k.parent_hash not in chain or not k.plan_title:
            continue
        key = (k.iteration, chain.index(k.parent_hash), k.plan_title)
        groups.setdefault(key, []).append(evaluations.get(k.hash))
    tried = []
    for (iteration, distance, title), found in sorted(groups.items()):
        speedup, status = _outcome(evaluations.get(chain[distance]), found)
        tried.append(TriedPlan(title, _where(distance), iteration, speedup, status))
    return tried[-MAX_TRIED:]
