"""The best reference a kernel is compared with: the fastest of what a user would pick instead
(NumPy, torch eager, torch.compile in either mode) that passed, timed in the same session
(``Measurer.references``, ``bench run``). Pure functions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from accelopt.profiling.evaluation import Evaluation


@dataclass(frozen=True)
class BestReference:
    """The fastest reference: its kind (``numpy``, ``torch``, ...) and its latency."""

    kind: str
    latency_s: float

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "latency_s": self.latency_s}


def fastest_reference(evaluations: Iterable[Evaluation | None]) -> Evaluation | None:
    """The fastest evaluation that passed and was timed; None without one."""
    timed = [e for e in evaluations if e is not None and e.passed and e.latency_s]
    return min(timed, key=lambda e: e.latency_s or 0.0, default=None)


def best_reference(evaluations: Iterable[Evaluation | None]) -> BestReference | None:
    found = fastest_reference(evaluations)
    if found is None or found.latency_s is None:
        return None
    return BestReference(found.kernel, found.latency_s)


def over_reference(reference: BestReference | None, latency_s: float | None) -> float | None:
    """How many times faster than the best reference a kernel of ``latency_s`` is (>1: faster)."""
    if reference is None or not latency_s:
        return None
    return reference.latency_s / latency_s
