"""Settling an iteration's children: those whose gain over their parent is within twice the noise
of their evaluations (``selection.compare``: UNSURE) are re-timed beside the parent in one
session, whose verdict is the one the beam and the run's best are chosen by. A session stores time
ratios (child / parent: below 1 is faster); what users read of it is the speedup, their inverse
(``variants.VariantRow.session_speedup``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from accelopt.search.children import PlanKernels
from accelopt.search.measuring import Measurer
from accelopt.search.selection import (
    Candidate,
    Comparison,
    compare,
    session_compare,
    session_verdicts,
)

# Children re-timed beside their parent in one session, at most (beside the parent and its twin,
# one fewer: ``retime``): each kernel of a session holds its own rotation buffers (hundreds of
# MiB), so more are split into several sessions.
SESSION_CHILDREN = 3


async def settle(
    measurer: Measurer, t: int, groups: Sequence[PlanKernels]
) -> dict[str, Comparison]:
    """Re-time each parent with its children whose gain is within twice the noise, in one
    session (interleaved on one device; at most SESSION_CHILDREN children a session, each
    holding its own buffers); the verdict per child hash."""
    unsure: dict[str, tuple[Candidate, dict[str, Candidate]]] = {}
    for group in groups:
        for kid in group.kernels:
            if kid.hash == group.parent.hash:
                continue
            if compare(kid.evaluation, group.parent.evaluation) is Comparison.UNSURE:
                unsure.setdefault(group.parent.hash, (group.parent, {}))[1][kid.hash] = kid
    if not unsure:
        return {}
    measurer.context.phase("settling", t)
    sessions = [
        (parent, chunk)
        for parent, kids in unsure.values()
        for chunk in _chunks(list(kids.values()), SESSION_CHILDREN)
    ]
    verdicts = await asyncio.gather(*(retime(measurer, t, p, kids) for p, kids in sessions))
    return {h: v for found in verdicts for h, v in found.items()}


async def retime(
    measurer: Measurer, t: int, parent: Candidate, kids: list[Candidate]
) -> dict[str, Comparison]:
    """One session: the parent and ``kids`` timed interleaved. A child it finds faster is
    timed again beside the parent and its twin (the parent again, in a kernel process of its
    own: ``stats.against_twin``), and that session's verdict is the one kept. Sessions
    are kept in the store (a resumed iteration reuses them), never in the evaluation cache."""
    first = await measurer.session(t, [parent, *kids])
    found = zip(kids, session_verdicts(first), strict=True)
    verdicts = {kid.hash: session_compare(*ratio) for kid, ratio in found}
    claimed = [kid for kid in kids if verdicts[kid.hash] is Comparison.FASTER]
    for chunk in _chunks(claimed, SESSION_CHILDREN - 1):
        again = await measurer.session(t, [parent, parent, *chunk])
        found = zip(chunk, session_verdicts(again), strict=True)
        verdicts |= {kid.hash: session_compare(*ratio) for kid, ratio in found}
    return verdicts


def _chunks(items: list[Candidate], size: int) -> list[list[Candidate]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
