"""What the planner and the summarizer are shown: the lineage's tried plans with their outcomes,
the titles already drafted this round, the plan and both profiles; rendered deterministically
(the text is a replay key), for the cpu and the triton backend."""

from __future__ import annotations

import pytest

from accelopt.agents.attempts import TriedPlan
from accelopt.agents.context import problem_view
from accelopt.agents.planner import Plan, PlannerInput, planner_messages
from accelopt.agents.summarizer import SummarizerInput, summarizer_messages
from accelopt.backends import Status, get_backend
from accelopt.backends.registry import shipped_kernel
from accelopt.hardware.datasheet import H200
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profile import Profile, build_profile

PROBLEM = load_problem("matmul")
TRIED = (
    TriedPlan("Pack the B panel", "this kernel", 3, speedup=1.31),
    TriedPlan("Unroll K by 8", "its parent", 2, speedup=0.92),
    TriedPlan("Use AVX-512 gathers", "2 generations up", 1, status="COMPILE_ERROR"),
)
DRAFTED = ("Block for L2", "Prefetch the A rows")


def profile(hw: HardwareSpec, backend: str, latency_s: float, workload: str) -> Profile:
    evaluation = Evaluation(
        problem="matmul", workload=workload, backend=backend, kernel="k", kernel_hash="h",
        hardware=hw.key(), status=Status.PASSED, latency_s=latency_s, noise=0.02, calls=20,
        peak_s=0.00185, pct_of_peak=0.00185 / latency_s, bound="matmul", max_rel_err=4e-7,
        tolerance=2e-5,
    )  # fmt: skip
    cost = PROBLEM.cost.at(PROBLEM.workload(workload).sizes)
    return build_profile(evaluation, cost, hw, [])


def planner_input(backend: str, hw: HardwareSpec, workload: str, **fields) -> PlannerInput:
    return PlannerInput(
        problem=problem_view(PROBLEM, workload),
        kernel_source=shipped_kernel(PROBLEM, "baseline", backend).read_text(),
        profile=profile(hw, backend, 0.0104, workload),
        facts=get_backend(backend).facts(hw),
        **fields,
    )


def summarizer_input(hw: HardwareSpec, **fields) -> SummarizerInput:
    return SummarizerInput(
        problem=problem_view(PROBLEM, "cpu"),
        slow_source=shipped_kernel(PROBLEM, "baseline").read_text(),
        fast_source="void kernel(const float *lhs, const float *rhs, float *out) { /* v2 */ }",
        speedup=2.5,
        **fields,
    )


@pytest.fixture(params=["cpu", "triton"])
def planner_case(request, hw) -> tuple[str, HardwareSpec, str]:
    return ("cpu", hw, "cpu") if request.param == "cpu" else ("triton", H200, "paper")


def test_planner_is_shown_the_tried_plans_with_their_outcomes(planner_case):
    given = planner_input(*planner_case, tried=TRIED)
    prompt = planner_messages(given)[1]["content"]
    section = prompt.split("# Already tried on this kernel's lineage")[1].split("# Your task")[0]
    assert "- Pack the B panel — on this kernel, iteration 3: 1.31x (faster)" in section
    assert "- Unroll K by 8 — on its parent, iteration 2: 0.92x (not faster)" in section
    assert "- Use AVX-512 gathers — on 2 generations up, iteration 1: failed: COMPILE_ERROR" in (
        section
    )
    assert "Already drafted" not in prompt


def test_planner_is_shown_the_titles_drafted_this_round(planner_case):
    prompt = planner_messages(planner_input(*planner_case, drafted=DRAFTED))[1]["content"]
    section = prompt.split("# Already drafted this round — propose something different")[1]
    assert "- Block for L2\n- Prefetch the A rows\n" in section
    assert "must differ from the plans already drafted" in prompt
    assert "Already tried" not in prompt


def test_planner_asks_for_one_plan_in_the_fixed_layout(planner_case):
    prompt = planner_messages(planner_input(*planner_case, tried=TRIED, drafted=DRAFTED))[1]
    text = prompt["content"]
    assert "Propose ONE optimization plan" in text
    assert text.endswith("TITLE: <a short title>\nSTEPS:\n1. <first concrete step>\n"
                         "2. <next step>\n...\n")  # fmt: skip
    assert text.index("# Already tried") < text.index("# Already drafted") < text.index("# Your")


def test_planner_without_history_has_neither_section(planner_case):
    prompt = planner_messages(planner_input(*planner_case))[1]["content"]
    assert "Already tried" not in prompt and "Already drafted" not in prompt
    assert "must differ" not in prompt


def test_planner_rendering_is_deterministic(planner_case):
    first = planner_messages(planner_input(*planner_case, tried=TRIED, drafted=DRAFTED))
    again = planner_messages(planner_input(*planner_case, tried=list(TRIED), drafted=[*DRAFTED]))
    assert [m["content"].encode() for m in first] == [m["content"].encode() for m in again]


def test_triton_planner_prompt_is_in_python(hw):
    prompt = planner_messages(planner_input("triton", H200, "paper", tried=TRIED))[1]["content"]
    assert "```python\n" in prompt and "@triton.jit" in prompt and "M=4096" in prompt
    assert "latency: 10.4 ms (median)" in prompt


def test_summarizer_is_shown_the_plan_both_profiles_and_the_speedup(hw):
    slow, fast = profile(hw, "cpu", 0.0104, "cpu"), profile(hw, "cpu", 0.00416, "cpu")
    given = summarizer_input(
        hw,
        plan=Plan("Pack the B panel", ("Copy B into panels.", "Stream them in the micro-kernel.")),
        slow_profile=slow,
        fast_profile=fast,
    )
    prompt = summarizer_messages(given)[1]["content"]
    plan = prompt.split("# The plan that turned the slow kernel")[1].split("# Slow")[0]
    assert "Pack the B panel\n1. Copy B into panels.\n2. Stream them in the micro-kernel." in plan
    slow_part, fast_part = prompt.split("# Slow kernel")[1].split("# Fast kernel")
    assert "latency: 10.4 ms (median), noise ±2.0 %" in slow_part
    assert "17.8 % of peak: roofline 1.85 ms, matmul-bound" in slow_part
    assert "latency: 4.16 ms (median)" in fast_part
    assert "44.5 % of peak: roofline 1.85 ms, matmul-bound" in fast_part
    assert "(measured 2.50x faster, both correct)" in fast_part
    assert "which ceiling" in prompt


def test_summarizer_without_plan_or_profiles_renders_as_before(hw):
    prompt = summarizer_messages(summarizer_input(hw))[1]["content"]
    assert "# The plan" not in prompt and "Its profile" not in prompt
    assert "2.50x faster" in prompt and "NO LESSON" in prompt


def test_summarizer_rendering_is_deterministic(hw):
    fields = {"plan": Plan("T", ("a", "b")),
              "slow_profile": profile(hw, "cpu", 0.01, "cpu"),
              "fast_profile": profile(hw, "cpu", 0.005, "cpu")}  # fmt: skip
    first = summarizer_messages(summarizer_input(hw, **fields))
    again = summarizer_messages(summarizer_input(hw, **{**fields, "plan": Plan("T", ["a", "b"])}))
    assert first == again
