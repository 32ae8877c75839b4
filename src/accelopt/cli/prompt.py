"""``accelopt prompt``: the messages an agent would receive, rendered, without calling it.

For debugging a model and reviewing prompt changes. The kernel shown is measured first (once: the
workspace's evaluation cache keeps it), because the planner sees its profile, the fixer its failure
and the summarizer both kernels' profiles and the measured speedup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from accelopt import views
from accelopt.agents.context import ProblemView, problem_view
from accelopt.agents.executor import ExecutorInput, executor_messages
from accelopt.agents.fixer import Failure, FixerInput, fixer_messages
from accelopt.agents.planner import Plan, PlannerInput, planner_messages
from accelopt.agents.summarizer import SummarizerInput, summarizer_messages
from accelopt.backends.base import Backend, get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.cli import common
from accelopt.cli.optimize import WorkspaceOption, open_store
from accelopt.cli.output import JsonOption, console, shows_table, write_json
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.records import Message
from accelopt.memory.retrieval import retrieve
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.profile import Profile, build_profile
from accelopt.search.children import DRAFT_PLAN
from accelopt.store.store import Store

AGENTS = ("planner", "executor", "fixer", "summarizer")
EXAMPLE_PLAN = Plan(
    "Tile the loops for the cache",
    ("Split the outer loops into blocks that fit the L2 cache.", "Vectorize the inner loop."),
)


class _Scene:
    """One problem, workload, backend and workspace: measures kernels and builds what the
    agents are given."""

    def __init__(
        self,
        store: Store,
        problem: Problem,
        workload: str,
        backend: Backend,
        hardware: HardwareSpec,
    ) -> None:
        self.store, self.problem, self.workload = store, problem, workload
        self.backend, self.hardware = backend, hardware
        self.view: ProblemView = problem_view(problem, workload)
        self.facts = backend.facts(hardware)

    def measure(self, source: str, name: str) -> Evaluation:
        kernel = Kernel(source, self.backend.name, name)
        config = EvalConfig(workers=1)
        with make_profiler("local", self.hardware, config, store=self.store) as profiler:
            return profiler.evaluate(kernel, self.problem, self.workload)

    def profile(self, source: str, evaluation: Evaluation) -> Profile:
        sizes = self.problem.workload(self.workload).sizes
        remarks = self.backend.remarks(source, self.problem, sizes)
        cost = self.problem.cost.at(sizes)
        return build_profile(evaluation, cost, self.hardware, remarks)

    def passed(self, source: str, name: str) -> Evaluation:
        evaluation = self.measure(source, name)
        if not evaluation.passed:
            raise UserError(
                f"the {name} kernel does not pass ({evaluation.status.value}: "
                f"{evaluation.error}); give one that passes"
            )
        return evaluation


def _planner(scene: _Scene, source: str) -> list[Message]:
    evaluation = scene.passed(source, "shown")
    lessons = retrieve(
        scene.store,
        problem_text=f"{scene.problem.name} {scene.problem.description}",
        kernel_text=source,
        backend=scene.backend.name,
        hardware=scene.hardware.key(),
        problem=scene.problem.name,
    )
    profile = scene.profile(source, evaluation)
    return planner_messages(PlannerInput(scene.view, source, profile, scene.facts, lessons))


def _fixer(scene: _Scene, source: str, baseline: str, plan: Plan) -> list[Message]:
    e = scene.measure(source, "shown")
    if e.passed:
        raise UserError(
            "the kernel PASSED: the fixer is given only kernels that fail; give one that fails "
            "with --kernel"
        )
    failure = Failure(e.status.value, e.error, e.log)
    given = FixerInput(scene.view, scene.facts, source, failure, plan, parent_source=baseline)
    return fixer_messages(given)


def _summarizer(scene: _Scene, slow: str, fast: str, plan: Plan) -> list[Message]:
    slow_e, fast_e = scene.passed(slow, "slow"), scene.passed(fast, "fast")
    assert slow_e.latency_s and fast_e.latency_s
    given = SummarizerInput(
        scene.view,
        slow,
        fast,
        slow_e.latency_s / fast_e.latency_s,
        scene.facts.language,
        plan=plan,
        slow_profile=scene.profile(slow, slow_e),
        fast_profile=scene.profile(fast, fast_e),
    )
    return summarizer_messages(given)


def prompt_command(
    problem: Annotated[str, typer.Argument(help="problem name (see `accelopt bench list`)")],
    agent: Annotated[str, typer.Option(help="planner, executor, fixer or summarizer")] = "planner",
    kernel: Annotated[
        Path | None,
        typer.Option(help="the kernel shown (default: the baseline); summarizer: the fast one"),
    ] = None,
    slow: Annotated[
        Path | None, typer.Option(help="summarizer: the slow kernel (default: the baseline)")
    ] = None,
    plan: Annotated[
        str | None, typer.Option(help="executor, fixer, summarizer: plan title")
    ] = None,
    step: Annotated[list[str] | None, typer.Option(help="a step of that plan (repeatable)")] = None,
    backend: Annotated[str, typer.Option(help="kernel language/device")] = "cpu",
    workload: common.WorkloadOption = "cpu",
    workspace: WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Show the messages an agent would receive, without calling it."""
    if agent not in AGENTS:
        raise UserError(f"unknown agent {agent!r}; choose one of: {', '.join(AGENTS)}")
    prob = views.problem_and_workload(problem, workload, workspace, evaluating=False)
    workload = prob.workload_name(workload)  # one given by its sizes: its canonical name
    path = shipped_kernel(prob, "baseline", backend)
    baseline = path.read_text() if path.is_file() else ""  # none: the first kernel is drafted
    if plan is None:
        chosen = EXAMPLE_PLAN if baseline or kernel else DRAFT_PLAN
    else:
        chosen = Plan(plan, tuple(step or ()))
    source = common.read_kernel_file(kernel) if kernel else baseline
    if not source and agent != "executor":
        raise UserError(
            f"problem {prob.name} has no baseline kernel: give one with --kernel (the executor's "
            "prompt for its first kernel needs none)"
        )
    if agent == "summarizer" and kernel is None:
        raise UserError("the summarizer compares two kernels: give the fast one with --kernel")
    common.workspace_dir(workspace)
    hardware = common.hardware_for(backend)
    with open_store(workspace) as store:
        scene = _Scene(store, prob, workload, get_backend(backend), hardware)
        if agent == "planner":
            messages = _planner(scene, source)
        elif agent == "executor":
            messages = executor_messages(ExecutorInput(scene.view, source, chosen, scene.facts))
        elif agent == "fixer":
            messages = _fixer(scene, source, baseline, chosen)
        else:
            slow_source = common.read_kernel_file(slow) if slow else baseline
            messages = _summarizer(scene, slow_source, source, chosen)
    if shows_table(json_path):
        for message in messages:
            console.rule(message["role"])
            console.print(message["content"], markup=False, highlight=False)
    result: dict[str, Any] = {"agent": agent, "problem": problem, "messages": messages}
    write_json(json_path, result)
