"""The parsing boundaries of the agents and strict prompt rendering: pure functions."""

from __future__ import annotations

import jinja2
import pytest

from accelopt.agents.code import extract_code
from accelopt.agents.planner import MAX_STEPS, Plan, parse_plan
from accelopt.agents.prompting import render
from accelopt.agents.summarizer import parse_lesson
from accelopt.memory.records import Lesson

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


USAGE = "int main(void) {\n    float x[1], y[1];\n    kernel(x, y);\n    return 0;\n}"


def test_code_prefers_the_definition_over_a_usage_example():
    text = f"The kernel:\n```c\n{KERNEL}\n```\nUse it like this:\n```c\n{USAGE}\n```\n"
    assert extract_code(text).source == KERNEL + "\n"
    got = extract_code(f"```c\n{USAGE}\n```")
    assert got.source is None and "only call it" in got.reason


def test_c_definitions_in_several_styles():
    for source in (
        "static inline void\nkernel(const float *restrict x, float *y)\n{\n}",
        "void kernel(const float (*x)[4], float *y) __attribute__((hot)) { }",
        'extern "C" void kernel(float *x) { }',
    ):
        assert extract_code(f"```c\n{source}\n```").source is not None, source
    assert extract_code("```c\nif (kernel(x)) { return; }\n```").source is None


def test_python_takes_the_module_defining_the_launcher():
    module = "import triton\n\n\ndef kernel(x, out):\n    pass\n"
    usage = "out = torch.empty_like(x)\nkernel(x, out)\n"
    text = f"```python\n{module}```\nCall it:\n```python\n{usage}```\n"
    assert extract_code(text, "python").source == module
    nested = "def main():\n    def kernel(x):\n        pass\n"
    assert extract_code(f"```python\n{nested}```", "python").source is None
    indented = "1. The module:\n   ```python\n   def kernel(x, out):\n       pass\n   ```\n"
    assert extract_code(indented, "python").source == "def kernel(x, out):\n    pass\n"


def test_huge_reply_still_parses():
    filler = "word " * 400_000
    got = extract_code(f"{filler}\n```c\n{KERNEL}\n```")
    assert got.source is not None


PLAN_REPLIES = {
    "a C code block with #include before the plan": """The kernel is memory bound. A sketch:

```c
#include <stdlib.h>
#include <immintrin.h>
void kernel(const float *x, float *y) { y[0] = x[0]; }
```

TITLE: Vectorize the row loop
STEPS:
1. Load 16 floats at a time.
2. Use FMA.
""",
    "analysis bullets before the title": """Analysis:
- The kernel reaches 5 % of peak.
- B is read with stride N.

TITLE: Vectorize the row loop
STEPS:
1. Load 16 floats at a time.
2. Use FMA.
""",
    "a markdown heading with a Plan label": """## Plan: Vectorize the row loop
1) Load 16 floats at a time.
2) Use FMA.
""",
    "a bare Title heading, the title below": """### Title
Vectorize the row loop

### Steps
1. Load 16 floats at a time.
2. Use FMA.
""",
    "a bold title line and bullets after analysis": """- The loads are scalar.
- No FMA is used.

**Vectorize the row loop**

- Load 16 floats at a time.
- Use FMA.
""",
    "a heading title after an analysis section": """## Analysis
- The loads are scalar.

## Vectorize the row loop
1. Load 16 floats at a time.
2. Use FMA.
""",
    "bold labels and Step N items": """**Title:** Vectorize the row loop

**Step 1:** Load 16 floats at a time.
**Step 2:** Use FMA.
""",
    "JSON in a fence": """Here it is:
```json
{"title": "Vectorize the row loop", "steps": ["Load 16 floats at a time.", "Use FMA."]}
```
""",
    "bare JSON": '{"title": "Vectorize the row loop",'
    ' "steps": [{"step": "Load 16 floats at a time."}, {"description": "Use FMA."}]}',
}


@pytest.mark.parametrize("text", PLAN_REPLIES.values(), ids=PLAN_REPLIES.keys())
def test_plan_in_each_model_style(text):
    assert parse_plan(text) == Plan(
        "Vectorize the row loop", ("Load 16 floats at a time.", "Use FMA.")
    )


def test_code_inside_a_plan_is_neither_title_nor_step():
    text = """TITLE: Unroll K
STEPS:
1. Unroll the K loop by 4.
2. Keep four accumulators, for example:
```c
// 1. not a step
#include <immintrin.h>
acc0 += a[k] * b[k];
```
3. Sum the accumulators at the end.

**Expected impact:**
- 2x faster
"""
    plan = parse_plan(text)
    assert plan is not None and plan.title == "Unroll K"
    assert plan.steps == (
        "Unroll the K loop by 4.",
        "Keep four accumulators, for example:",
        "Sum the accumulators at the end.",
    )


def test_a_reply_that_is_only_code_has_no_plan():
    assert parse_plan("```c\n#include <stdlib.h>\n// 1. step\nint x;\n```") is None


def test_nested_items_join_their_step_and_steps_are_capped():
    plan = parse_plan("TITLE: T\n1. Tile K\n   - by 256\n2. Pack B\n")
    assert plan is not None and plan.steps == ("Tile K; by 256", "Pack B")
    many = "TITLE: T\n" + "".join(f"{i}. step {i}\n" for i in range(1, 30))
    plan = parse_plan(many)
    assert plan is not None and len(plan.steps) == MAX_STEPS


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


LESSON_REPLIES = {
    "bold labels": """**TITLE:** Pack B
**LESSON:** Packing B keeps the panel in L2.
**BEFORE:**
```c
a
```
**AFTER:**
```c
b
```""",
    "headings": """## Title
Pack B

## Lesson
Packing B keeps the panel in L2.

### Before
```c
a
```

### After
```c
b
```""",
    "bold names, colon outside": """**Title**: Pack B
**Lesson**: Packing B keeps the panel in L2.
**Before**:
```c
a
```
**After**:
```c
b
```""",
    "heading with the value inline": """## Title: Pack B
**Lesson:**
Packing B keeps the panel in L2.
BEFORE:
```c
a
```
AFTER:
```c
b
```""",
}


@pytest.mark.parametrize("text", LESSON_REPLIES.values(), ids=LESSON_REPLIES.keys())
def test_lesson_in_each_markdown_style(text):
    assert parse_lesson(text) == Lesson("Pack B", "Packing B keeps the panel in L2.", "a", "b")


@pytest.mark.parametrize(
    "text", ["NO LESSON", "no lesson.", "**NO LESSON**", "Nothing general here."]
)
def test_no_lesson_parses_to_none(text):
    assert parse_lesson(text) is None


def test_templates_fail_loudly_on_a_missing_variable():
    with pytest.raises(jinja2.UndefinedError):
        render("planner_user", problem=None)
