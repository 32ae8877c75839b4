"""The ``Lesson`` record: what the summarizer learned from one slow→fast pair, and the
``Experience`` the optimization memory keeps of it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ExperienceKind(StrEnum):
    """Which way a lesson points (the store's ``experiences.kind`` holds the value)."""

    POSITIVE = "positive"  # a child that beat its parent: do this
    NEGATIVE = "negative"  # a child much slower than its parent, stored reversed: undo this


@dataclass(frozen=True)
class Lesson:
    title: str
    description: str  # generalizable: when it applies and why it helps
    before: str = ""  # a short snippet of the slow kernel
    after: str = ""  # the same spot in the fast kernel


@dataclass(frozen=True)
class Experience:
    """A lesson with its provenance, as the optimization memory keeps it.

    ``positive``: the ``fast`` kernel is a child that beat its parent (do this). ``negative``: a
    child that was much slower, stored reversed so that ``fast`` is the parent (undo this).
    ``speedup`` is always slow latency / fast latency, > 1: measured by this workspace's own run
    when ``measured_here``, else (an imported lesson) only claimed by whoever exported it, which
    retrieval never ranks by and the planner is told is a claim.
    """

    lesson: Lesson
    kind: ExperienceKind
    speedup: float
    problem: str
    backend: str
    hardware: str
    model: str  # the summarizer's model
    run_id: str
    slow_hash: str
    fast_hash: str
    id: int | None = None  # assigned by the store
    created_at: str = ""
    # Where a run's loop learned it: (run, iteration, parent, plan) is unique in the store, and
    # the experience is visible only once that iteration is committed. None: imported or added by
    # hand, visible at once.
    iteration: int | None = None
    parent_hash: str = ""
    plan_title: str = ""
    # False: imported (``memory import``), its speedup a claim not measured in this workspace
    measured_here: bool = True
