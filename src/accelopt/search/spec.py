"""What a run is: the settings it was started with, typed, validated once and kept as JSON.

A ``RunSpec`` is everything a resume, a report or the dashboard needs to know of a run beyond the
store's columns (problem, workload, backend, hardware key, strategy, status): the search
parameters, the workloads it tunes on and holds out, the models and the budget, the ceilings it is
scored against, the runs it may replay from, the kernel it started from and the problem's
fingerprint. ``search.run.new_run`` builds one; the store keeps its JSON (``RunRecord.spec``)
without reading it, and every reader goes through ``RunSpec.of(run)``.

Runs recorded by older versions of accelopt lack some fields; each has the default that means
what such a run did (one workload, no budget recorded, the problem's baseline). A session of
``accelopt mcp`` records no search: its ``search`` is None and its ``agent`` says which session.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import BudgetConfig
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem
from accelopt.search.config import SearchConfig
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


class AgentSession(BaseModel):
    """The ``accelopt mcp`` session that recorded a run (its kernels came from an outside agent)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: str = "accelopt mcp"
    session: str = ""
    pid: int = 0
    started_at: str = ""


class RunSpec(BaseModel):
    """A run's settings (see the module's docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    search: SearchConfig | None = None  # None: an ``accelopt mcp`` session, not a search
    workloads: tuple[str, ...] = ()  # tuned on, the first the run's ``workload``; (): that one
    held_out: tuple[str, ...] = ()  # measured on the baseline and the best only, at the end
    workload_sizes: dict[str, dict[str, int]] = {}  # each workload's sizes, for the reports
    models: dict[str, str] = {}  # agent -> model (an autotune run asks none)
    budget: BudgetConfig | None = None  # None: recorded before runs kept their budget
    hardware_spec: HardwareSpec | None = None  # the ceilings it is scored against
    replay_from: tuple[str, ...] = ()  # runs whose recorded answers it may reuse
    start_source: str | None = None  # the user's starting kernel (--kernel), if any
    problem_version: str = ""  # a workspace problem's fingerprint ("" for the suite's)
    agent: AgentSession | None = None  # the ``accelopt mcp`` session that recorded it

    @classmethod
    def of(cls, run: RunRecord) -> RunSpec:
        """The spec ``run`` recorded."""
        return cls.model_validate(run.spec)

    def to_json(self) -> dict[str, Any]:
        """What the store keeps (``RunRecord.spec``)."""
        return self.model_dump(mode="json")

    def parameters(self) -> dict[str, Any]:
        """The search parameters as the reports show them ({} for an ``accelopt mcp`` session)."""
        return self.search.model_dump() if self.search is not None else {}

    def tuned(self, run: RunRecord) -> tuple[str, ...]:
        """The workloads ``run`` tunes on (a run on one workload records none: its own)."""
        return self.workloads or (run.workload,)


def run_problem(store: Store, run: RunRecord) -> Problem:
    """The run's problem, from the suite or the store's workspace, as it was when the run
    started: an edited workspace problem would mix measurements of two problems in one run."""
    problem = load_problem(run.problem, store.path.parent)
    recorded = RunSpec.of(run).problem_version
    if problem.fingerprint != recorded:
        raise UserError(
            f"problem {run.problem} changed since run {run.id} started (its files' fingerprint "
            f"is {problem.fingerprint or 'none'}, was {recorded or 'none'}): a run measures one "
            f"problem; start a new run (accelopt optimize {run.problem} --kernel FILE goes on "
            "from its best kernel)"
        )
    return problem


def run_hardware(run: RunRecord, current: HardwareSpec) -> HardwareSpec:
    """The ceilings the run is scored against: those recorded when it started (evaluations are
    cached under their key, the committed best among them), even if this machine's changed."""
    recorded = RunSpec.of(run).hardware_spec
    if recorded is not None and recorded.key() == run.hardware:
        return recorded
    if current.key() == run.hardware:
        return current
    raise UserError(
        f"run {run.id} was scored against the ceilings {run.hardware}, which this machine no "
        f"longer has and the run did not record; start a new run (accelopt optimize "
        f"{run.problem} --kernel FILE to go on from its best kernel)"
    )
