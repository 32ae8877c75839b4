"""The steps of the loop as it reports them: to ``on_phase`` and on the progress line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from accelopt.search.progress import Progress

# What the loop reports (``Phases``) as it enters each step.
PHASES = (
    "drafting",
    "planning",
    "writing",
    "evaluating",
    "fixing",
    "tuning",
    "settling",
    "learning",
    "committing",
    "holding out",
    "timing references",
    "re-timing side by side",
)

PhaseHook = Callable[[str, int], None]  # told each step (one of PHASES) and its iteration


@dataclass(frozen=True)
class Phases:
    """A ``PhaseHook`` that tells ``on_phase`` and shows the step on the progress line."""

    on_phase: PhaseHook | None = None
    progress: Progress | None = None

    def __call__(self, name: str, t: int) -> None:
        if self.on_phase is not None:
            self.on_phase(name, t)
        if self.progress is not None:
            self.progress.phase = f"{name} iteration {t}" if t else name
            self.progress.refresh()
