"""Every agent's messages for a cpu and a triton problem: the kernel in the backend's language
fence, the parent and the plan where the agent needs them, and the same text every time."""

from __future__ import annotations

import pytest

from accelopt.agents.context import problem_view
from accelopt.agents.executor import ExecutorInput, executor_messages
from accelopt.agents.fixer import NO_CODE, Failure, FixerInput, fixer_messages
from accelopt.agents.planner import Plan
from accelopt.backends import get_backend
from accelopt.backends.registry import shipped_kernel
from accelopt.hardware.datasheet import H200
from accelopt.problems import load_problem

PROBLEM = load_problem("matmul")
PLAN = Plan("Block for L2", ("Split i and j into 64-wide blocks.", "Unroll the k loop by 4."))
FENCE = {"cpu": "```c", "triton": "```python"}


@pytest.fixture(params=["cpu", "triton"])
def backend(request, hw):
    name = request.param
    spec = hw if name == "cpu" else H200
    source = shipped_kernel(PROBLEM, "baseline", name).read_text()
    return name, get_backend(name).facts(spec), source


def test_the_executor_sees_the_kernel_and_the_plan(backend):
    name, facts, source = backend
    given = ExecutorInput(problem_view(PROBLEM, "cpu"), source, PLAN, facts)
    user = executor_messages(given)[-1]["content"]
    assert FENCE[name] in user and source.strip().splitlines()[-1] in user
    assert "Block for L2" in user and "Unroll the k loop by 4." in user
    assert executor_messages(given) == executor_messages(given)


@pytest.mark.parametrize("status", ["INCORRECT", "COMPILE_ERROR", "TIMEOUT", "SUSPICIOUS", NO_CODE])
def test_the_fixer_sees_the_failure_the_parent_and_the_plan(backend, status):
    name, facts, source = backend
    failed = "" if status == NO_CODE else source.replace("kernel(", "kernel (", 1)
    failure = Failure(status, "what went wrong")
    given = FixerInput(problem_view(PROBLEM, "cpu"), facts, failed, failure, PLAN, source)
    user = fixer_messages(given)[-1]["content"]
    assert FENCE[name] in user and "Block for L2" in user and "what went wrong" in user
    assert source.strip().splitlines()[0] in user  # the parent kernel
    assert fixer_messages(given) == fixer_messages(given)


def test_the_summarizer_is_told_which_way_the_plan_went(hw):
    from accelopt.agents.summarizer import SummarizerInput, summarizer_messages

    source = shipped_kernel(PROBLEM, "baseline").read_text()
    common = dict(plan=PLAN)
    up = SummarizerInput(problem_view(PROBLEM, "cpu"), source, source, 1.5, "c", **common)
    down = SummarizerInput(problem_view(PROBLEM, "cpu"), source, source, 1.5, "c",
                           plan_made_slower=True, **common)  # fmt: skip
    assert (
        "turned the slow kernel (the parent) into the fast one"
        in (summarizer_messages(up)[-1]["content"])
    )
    assert "a change to undo" in summarizer_messages(down)[-1]["content"]
