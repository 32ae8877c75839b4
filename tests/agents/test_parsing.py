"""The parsing boundaries of the agents and strict prompt rendering: pure functions."""

from __future__ import annotations

import jinja2
import pytest

from accelopt.agents.code import extract_code
from accelopt.agents.planner import parse_plan
from accelopt.agents.prompting import render
from accelopt.agents.summarizer import parse_lesson

KERNEL = "void kernel(const float *x, float *y) { y[0] = x[0]; }"


def test_plan_in_the_asked_form():
    plan = parse_plan("TITLE: Block the K loop\nSTEPS:\n1. Tile K by 256.\n2. Pack B panels.\n")
    assert plan is not None
    assert plan.title == "Block the K loop"
    assert plan.steps == ("Tile K by 256.", "Pack B panels.")


def test_plan_parsed_leniently_from_markdown():
    text = """Here is my plan.

## **Register blocking for the inner product**

- Use a 6x32 micro-kernel with zmm accumulators
* Broadcast A, load B rows
3) Unroll K by 4
"""
    plan = parse_plan(text)
    assert plan is not None
    assert plan.title == "Register blocking for the inner product"
    assert len(plan.steps) == 3 and plan.steps[2] == "Unroll K by 4"


def test_plan_with_bold_title_and_prose_steps():
    plan = parse_plan("**Title:** Fuse the norm into the GEMM\nCompute rms per row block first.")
    assert plan is not None and plan.title == "Fuse the norm into the GEMM"
    assert plan.steps == ("Compute rms per row block first.",)


@pytest.mark.parametrize("text", ["", "   \n", "TITLE: only a title"])
def test_no_plan(text):
    assert parse_plan(text) is None


def test_code_takes_the_last_block_defining_the_kernel():
    text = f"First try:\n```c\n{KERNEL}\n```\nBetter:\n```c\n// v2\n{KERNEL}\n```\nDone."
    got = extract_code(text)
    assert got.source is not None and got.source.startswith("// v2")
    assert extract_code(f"```\n{KERNEL}\n```").source is not None  # no language tag
    assert extract_code(f"```C++\n{KERNEL}\n```").source is not None


@pytest.mark.parametrize(
    ("text", "finish", "reason"),
    [
        ("", None, "empty"),
        ("I would tile the loops and use AVX-512.", None, "no code block"),
        ("```python\nprint(1)\n```", None, "no code block"),
        ("```c\nint helper(void) { return 1; }\n```", None, "do not define the kernel"),
        (f"```c\n{KERNEL[:20]}", "length", "cut off"),
        (f"```c\n{KERNEL[:20]}", None, "cut off"),
    ],
)
def test_replies_without_usable_code(text, finish, reason):
    got = extract_code(text, "c", finish)
    assert got.source is None and reason in got.reason


def test_huge_reply_still_parses():
    filler = "word " * 400_000
    got = extract_code(f"{filler}\n```c\n{KERNEL}\n```")
    assert got.source is not None


def test_lesson_in_the_asked_form():
    text = """TITLE: Hoist the row scale out of the inner loop
LESSON: When a per-row factor multiplies every product, apply it once per row.
It saves a multiply per element.
BEFORE:
```c
o[j] += x[k] * inv * w[k][j];
```
AFTER:
```c
o[j] += a * w[k][j];
```
"""
    lesson = parse_lesson(text)
    assert lesson is not None
    assert lesson.title == "Hoist the row scale out of the inner loop"
    assert (
        lesson.description.startswith("When a per-row factor") and "multiply" in lesson.description
    )
    assert lesson.before == "o[j] += x[k] * inv * w[k][j];"
    assert lesson.after == "o[j] += a * w[k][j];"


def test_lesson_with_markdown_labels():
    lesson = parse_lesson("**Title**: Pack B\n**Description**: Packing B keeps the panel in L2.")
    assert lesson is not None and lesson.title == "Pack B" and lesson.before == ""


@pytest.mark.parametrize("text", ["NO LESSON", "no lesson.", "Nothing general here."])
def test_no_lesson_parses_to_none(text):
    assert parse_lesson(text) is None


def test_templates_fail_loudly_on_a_missing_variable():
    with pytest.raises(jinja2.UndefinedError):
        render("planner_user", problem=None)
