"""What the parts of one run's search share: its store and record, the problem and workloads it
optimizes, the backend and the ceilings it is scored against, and where it reports its steps.

``RunContext`` is made once per session of a run (``run.execute_run``) and handed to each part
(``Measurer``, ``Lessons``, ``Tuner``, ``Generation``), which take from it what they need.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelopt.backends.base import Backend
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.search.phases import PhaseHook, Phases
from accelopt.search.progress import Progress
from accelopt.search.workloads import RunWorkloads
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


@dataclass(frozen=True)
class RunContext:
    """One run as its search's parts see it. ``workloads``: those the score is the geometric
    mean over (the first is the run's ``workload``, whose sizes a profile describes) and those
    measured only at the end, never shown to the agents."""

    store: Store
    run: RunRecord
    problem: Problem
    backend: Backend
    hardware: HardwareSpec  # the ceilings the run is scored against
    workloads: RunWorkloads
    phase: PhaseHook = field(default_factory=Phases)  # told each step as it starts
    progress: Progress | None = None  # the live progress line, where one is shown

    @property
    def workload(self) -> str:
        return self.workloads.primary

    @property
    def tuned(self) -> tuple[str, ...]:
        return self.workloads.tuned

    @property
    def held_out(self) -> tuple[str, ...]:
        return self.workloads.held_out
