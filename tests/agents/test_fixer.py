"""The fixer's messages per status: what a person would look at (the mismatch, the first compiler
errors, the phase of a crash or timeout, why a time is suspicious, why a reply had no code), with
the parent kernel and the plan; rendered the same every time."""

from __future__ import annotations

import numpy as np
import pytest

from accelopt.agents.context import problem_view
from accelopt.agents.fixer import (
    MAX_COMPILE_ERRORS,
    NO_CODE,
    Failure,
    FixerInput,
    failure_phase,
    first_errors,
    fixer_messages,
)
from accelopt.agents.planner import Plan
from accelopt.backends.cpu.backend import CpuBackend
from accelopt.backends.registry import shipped_kernel
from accelopt.problems import load_problem
from accelopt.profiling.worker.correctness import check_outputs

PROBLEM = load_problem("matmul")
PARENT = shipped_kernel(PROBLEM, "baseline").read_text()
FAILED = "\n".join(["#include <math.h>", "", "void kernel(const float *lhs, const float *rhs,",
                    "            float *out) { /* tiled */ nope; }", ""])  # fmt: skip
PLAN = Plan("Tile K", ("Block K by 256.", "Unroll by 4."))
COMPILER = """\
kernel.c:4:35: error: 'nope' undeclared (first use in this function)
    4 |             float *out) { /* tiled */ nope; }
      |                                       ^~~~"""
SUSPICIOUS = (
    "412% of peak is above the 105% the roofline allows: the kernel skips work (a cheat) or the "
    "cost model is wrong"
)


def given(hw, status: str, error: str, source: str = FAILED, **fields) -> FixerInput:
    values = {"parent_source": PARENT, "plan": PLAN, **fields}
    facts = CpuBackend().facts(hw)
    return FixerInput(problem_view(PROBLEM, "cpu"), facts, source, Failure(status, error), **values)


def prompt(given_: FixerInput) -> str:
    return fixer_messages(given_)[1]["content"]


def what_happened(text: str) -> str:
    return text.split("# What happened: ")[1]


def mismatch() -> str:
    ref = np.random.default_rng(0).standard_normal((16, 12))
    out = ref.copy()
    out[:, -3:] = np.nan
    check = check_outputs(["out"], [out.astype(np.float32)], [ref], 2e-5)
    return f"{check.error} (seed 1 of 5)"


# -- what each status shows -------------------------------------------------------------------


def test_incorrect_shows_the_mismatch_and_the_rule(hw):
    text = prompt(given(hw, "INCORRECT", mismatch()))
    happened = what_happened(text)
    assert happened.startswith("INCORRECT\nThe kernel ran, but its results are wrong:")
    assert "48 of 192 elements wrong: all of the last 3 columns (9-11; out[:, 9:12])" in happened
    assert "NaN in 48 elements" in happened and "first wrong: out[0, 9]: expected" in happened
    assert "(seed 1 of 5)" in happened
    assert "|got - expected| > 2e-05 * (|expected| + the" in happened
    assert "remainder (tail) loop" in happened


def test_incorrect_without_a_mismatch_has_no_rule(hw):
    text = prompt(given(hw, "INCORRECT", "the kernel modified input 'lhs' (seed 1 of 5)"))
    assert "the kernel modified input 'lhs'" in text and "counts as wrong" not in text


def test_compile_error_shows_the_first_errors_with_source_lines(hw):
    text = prompt(given(hw, "COMPILE_ERROR", COMPILER))
    happened = what_happened(text)
    assert "kernel.c:LINE is\nline LINE of the failed kernel above" in happened
    assert COMPILER in happened
    assert FAILED.splitlines()[3] in text  # line 4 of the failed kernel, as the model wrote it
    failed_block = text.split("# The failed kernel\n```c\n")[1].split("```")[0]
    assert failed_block.splitlines()[3] == FAILED.splitlines()[3]  # line numbers hold


def test_compile_errors_are_cut_to_the_first_few():
    errors = "\n".join(f"kernel.c:{n}:1: error: problem {n}\n    {n} | code" for n in range(1, 9))
    shown = first_errors(errors)
    assert shown.count("error:") == MAX_COMPILE_ERRORS
    assert "    5 | code" in shown and "problem 6" not in shown
    assert shown.endswith("... (3 more errors)")
    assert first_errors("compilation ran past 60 s") == "compilation ran past 60 s"


def test_timeout_names_the_phase_and_what_it_means(hw):
    error = "the kernel call (seed 1 of 5) ran past its 2 s deadline; the worker was killed"
    happened = what_happened(prompt(given(hw, "TIMEOUT", error)))
    assert happened.startswith(
        "TIMEOUT\nThe kernel ran past its deadline and was killed:\n" + error
    )
    assert "This happened during the kernel call (seed 1 of 5), that is one of the correctness" in (
        happened
    )
    assert "a loop that never ends" in happened


def test_crash_while_timed_names_the_timing_phase(hw):
    error = (
        "the kernel was killed by SIGSEGV (invalid memory access) during the kernel call (timing)"
    )
    happened = what_happened(prompt(given(hw, "CRASH", error)))
    assert "during the kernel call (timing), that is the timed calls, after the kernel passed" in (
        happened
    )
    assert "outside the buffers" in happened


@pytest.mark.parametrize(
    ("error", "phase"),
    [
        ("timed out during the kernel call (seed 1 of 5)", "the kernel call (seed 1 of 5)"),
        ("compilation (first launch) ran past its 60 s deadline", "compilation (first launch)"),
        ("the worker died from signal 9 during loading the kernel", "loading the kernel"),
        ("the reference computation (seeds 1-4 of 5) ran past", "the reference computation"),
        ("something else", ""),
    ],
)
def test_failure_phase(error, phase):
    found, meaning = failure_phase(error)
    assert found.startswith(phase) and bool(meaning) == bool(phase)


def test_suspicious_says_why_and_asks_for_all_the_work(hw):
    happened = what_happened(prompt(given(hw, "SUSPICIOUS", SUSPICIOUS)))
    assert "412% of peak is above the 105% the roofline allows" in happened
    assert "probably skips\nwork" in happened and "reuses results" in happened
    assert "do all the work on\nevery call" in happened


def test_no_code_gives_the_reason_and_asks_for_the_complete_kernel(hw):
    text = prompt(given(hw, NO_CODE, "the reply was cut off before its code block ended", ""))
    assert "# The failed kernel" not in text
    assert "# The kernel it descends from (the last correct version, before the plan)" in text
    assert "had no usable code: the reply was cut off before its code block ended." in text
    assert "It ran out of room" in text
    assert "Write the complete kernel that carries out the plan,\nstarting from the kernel" in text


def test_the_parent_and_the_plan_are_shown(hw):
    text = prompt(given(hw, "COMPILE_ERROR", COMPILER))
    assert "# The plan it was carrying out: Tile K\n1. Block K by 256.\n2. Unroll by 4." in text
    parent = text.split("# The kernel it descends from")[1].split("# The failed kernel")[0]
    assert PARENT.strip() in parent
    assert text.index("# The plan") < text.index("# The kernel it") < text.index("# The failed")
    assert "keep the plan's changes" in text


def test_without_a_plan_or_a_parent_it_shows_neither(hw):
    failure = Failure("COMPILE_ERROR", COMPILER)
    old = FixerInput(problem_view(PROBLEM, "cpu"), CpuBackend().facts(hw), FAILED, failure)
    assert old.parent_source == "" and old.plan is None
    text = prompt(old)
    assert "# The plan" not in text and "# The kernel it descends from" not in text
    assert COMPILER in text and "keep the plan's changes" not in text


def test_a_parent_equal_to_the_failed_kernel_is_shown_once(hw):
    text = prompt(given(hw, "TIMEOUT", "x", parent_source=FAILED))
    assert "# The kernel it descends from" not in text and text.count("/* tiled */") == 1


# -- determinism ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["INCORRECT", "COMPILE_ERROR", "TIMEOUT", "SUSPICIOUS", NO_CODE])
def test_rendering_is_deterministic(hw, status):
    error = {"INCORRECT": mismatch(), "COMPILE_ERROR": COMPILER, "SUSPICIOUS": SUSPICIOUS}.get(
        status, "the kernel call (seed 2 of 5) ran past its 2 s deadline; the worker was killed"
    )
    first = fixer_messages(given(hw, status, error))
    again = fixer_messages(given(hw, status, error, plan=Plan(PLAN.title, list(PLAN.steps))))
    assert first == again
    assert [m["content"].encode() for m in first] == [m["content"].encode() for m in again]
