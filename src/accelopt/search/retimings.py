"""A re-timing as the store keeps it: kernels timed interleaved in one session per tuned workload
(``Measurer.session``), the first the reference, and each one's time ratio to it.

The store holds the kernels' hashes and a JSON object (``Store.put_retiming``); ``RetimingRecord``
is that pair read back (``from_stored``) and written (``to_stored``), so the JSON keeps one shape
and every reader goes through the record's fields: the settling verdicts
(``selection.session_verdicts``), the variant tables (``variants.session_ratios``) and the
run's headline (``headline.headline_of``). A record stored before a field existed reads it as its
default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelopt.profiling.evaluation import STORED, Evaluation
from accelopt.store.store import Store


@dataclass(frozen=True)
class RetimingRecord:
    """One stored session: ``kernels`` (hashes, the reference first; a second equal to the first
    is its twin), per kernel its time ratio to the reference (below 1 is faster) and that
    ratio's relative interval half-width (None where a kernel did not pass), combined over the
    tuned workloads; ``evaluations``: the session's fresh evaluations, per workload then per
    kernel."""

    kernels: tuple[str, ...]
    ratios: tuple[float | None, ...]
    ratio_ci: tuple[float | None, ...]
    twin: bool = False  # the second kernel is the reference again, in a process of its own
    rounds: int = 0  # the fewest rounds of the workloads' sessions
    clean_rounds: int | None = None  # the fewest that gave figures (None: every round did)
    disturbed: bool = False  # a session had too few clean rounds: the slices' floors compared
    evaluations: tuple[Evaluation, ...] = ()
    measured_at: str = ""  # ISO 8601, UTC: kept for a run's closing session only

    @classmethod
    def from_stored(cls, kernels: Sequence[str], data: Mapping[str, Any]) -> RetimingRecord:
        """The record of a stored session: its kernels' hashes and its data."""
        clean = data.get("clean_rounds")
        return cls(
            kernels=tuple(kernels),
            ratios=tuple(data["ratios"]),
            ratio_ci=tuple(data["ratio_ci"]),
            twin=bool(data.get("twin", False)),
            rounds=int(data.get("rounds", 0)),
            clean_rounds=None if clean is None else int(clean),
            disturbed=bool(data.get("disturbed", False)),
            evaluations=tuple(
                Evaluation.model_validate(e, context={STORED: True})
                for e in data.get("evaluations", [])
            ),
            measured_at=str(data.get("measured_at", "")),
        )

    def to_stored(self) -> dict[str, Any]:
        """The data the store keeps beside the kernels' hashes (``measured_at`` where set)."""
        data: dict[str, Any] = {
            "ratios": list(self.ratios),
            "ratio_ci": list(self.ratio_ci),
            "twin": self.twin,
            "rounds": self.rounds,
            "clean_rounds": self.clean_rounds,
            "disturbed": self.disturbed,
            "evaluations": [e.model_dump() for e in self.evaluations],
        }
        if self.measured_at:
            data["measured_at"] = self.measured_at
        return data


def put_retiming(store: Store, run_id: str, t: int, record: RetimingRecord) -> RetimingRecord:
    """Keep ``record`` in iteration ``t`` of the run; the record kept (the first of those
    kernels in that iteration wins)."""
    kept = store.put_retiming(run_id, t, record.kernels, record.to_stored())
    return RetimingRecord.from_stored(record.kernels, kept)


def get_retiming(
    store: Store, run_id: str, t: int, kernels: Sequence[str]
) -> RetimingRecord | None:
    """The session of ``kernels`` kept in iteration ``t`` of the run, or None."""
    data = store.get_retiming(run_id, t, kernels)
    return None if data is None else RetimingRecord.from_stored(kernels, data)


def stored_retimings(store: Store, run_id: str) -> list[RetimingRecord]:
    """Every re-timing session of the run, in the order kept."""
    return [RetimingRecord.from_stored(k, data) for k, data in store.retimings(run_id)]
