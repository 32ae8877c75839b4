"""What has been tried on a kernel's lineage: plain records the planner is shown, built by the
search from the run's kernels and evaluations (``search.history``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TriedPlan:
    """One plan tried on a kernel of the lineage, and what came of it.

    ``on``: which kernel of the lineage it was tried on ("this kernel", "its parent", "2
    generations up"). ``speedup``: the best PASSED child's time over that kernel's (> 1 is
    faster); None when no child passed, and ``status`` then says how they failed (e.g.
    "COMPILE_ERROR", "INCORRECT").
    """

    title: str
    on: str
    iteration: int
    speedup: float | None = None
    status: str = ""

    @property
    def outcome(self) -> str:
        if self.speedup is not None:
            return f"{self.speedup:.2f}x" + (" (faster)" if self.speedup > 1 else " (not faster)")
        return f"failed: {self.status or 'no kernel'}"
