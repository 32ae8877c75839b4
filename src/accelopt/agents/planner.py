"""The planner: from a kernel, its profile and retrieved lessons, one optimization plan."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.agents.attempts import TriedPlan
from accelopt.agents.context import ProblemView
from accelopt.agents.lessons import lessons_context
from accelopt.agents.prompting import chat, problem_context
from accelopt.backends.facts import BackendFacts
from accelopt.llm.chat import ChatModel
from accelopt.llm.records import LLMCall, Message
from accelopt.memory.records import Experience
from accelopt.profiling.profile import Profile, render_profile

MAX_STEPS = 12


@dataclass(frozen=True)
class PlannerInput:
    problem: ProblemView
    kernel_source: str
    profile: Profile
    facts: BackendFacts
    # the retrieved memory, best first: each lesson with its kind, speedup (measured here or an
    # imported claim) and problem; the prompt quotes them bounded, inside a fence, as data
    lessons: Sequence[Experience] = ()
    # plans already tried on this kernel's lineage, with what came of each
    tried: Sequence[TriedPlan] = ()
    # titles earlier planner calls drafted for this same kernel in this iteration
    drafted: Sequence[str] = ()
    # the kernel's tuned variants measured before this iteration: "values: figures", fastest first
    variants: Sequence[str] = ()


@dataclass(frozen=True)
class Plan:
    title: str
    steps: tuple[str, ...]


def plan_context(plan: Plan | None) -> dict[str, object]:
    """A plan as the fixer's and summarizer's templates show it (none: empty)."""
    if plan is None:
        return {"plan_title": "", "plan_steps": ()}
    return {"plan_title": plan.title.strip(), "plan_steps": tuple(s.strip() for s in plan.steps)}


@dataclass(frozen=True)
class PlanResult:
    plan: Plan | None
    call: LLMCall
    error: str = ""  # why there is no plan


_FENCE_LINE = re.compile(r"^\s*(?:```|~~~)")
_JSON_BLOCK = re.compile(r"```[ \t]*(?:json)?[^\n]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_PLAN_WORDS = r"(?:title|plan|plan title|proposed plan|optimization plan|the plan)"
_LABEL = re.compile(rf"^\W*{_PLAN_WORDS}\s*[*_]*\s*:\s*(.+)$", re.IGNORECASE)  # Title: x
_LABEL_ONLY = re.compile(rf"^\W*{_PLAN_WORDS}\W*$", re.IGNORECASE)  # "### Title", x below
_STEPS_LABEL = re.compile(r"^\W*steps\W*$", re.IGNORECASE)
# "1. x", "2) x", "- x", "* x", "**1.** x", "Step 3: x", "### Step 3: x"
_STEP = re.compile(
    r"^(\s*)(?:#{1,6}\s+)?(?:\*\*|__)?(?:\d+[.)]|[-*•+]|step\s*\d+\s*[:.)\-–—]?)(?:\*\*|__)?"
    r"[:\s]\s*(.+)$",
    re.IGNORECASE,
)
_HEADING = re.compile(r"^\s*#{1,6}\s+(.+?)[\s#]*$")
_BOLD_LINE = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$")
# Section names that are not a plan's title (its analysis, its steps, its expected effect).
_GENERIC = re.compile(
    r"^(?:analysis|observations?|steps|summary|overview|rationale|reasoning|diagnosis|context|"
    r"bottlenecks?|profile.*|notes?|expected.*|why.*|current kernel.*|risks?)\W*$",
    re.IGNORECASE,
)


def _clean(text: str) -> str:
    return re.sub(r"\*\*|__", "", text).strip().strip("*_").strip()


def _prose_lines(text: str) -> list[str]:
    """The non-empty lines outside fenced code blocks (code is never a title nor a step)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE_LINE.match(line):
            fenced = not fenced
        elif not fenced and line.strip():
            lines.append(line)
    return lines


def _heading(line: str) -> str | None:
    """The text of a markdown heading or a line that is all bold; None for other lines."""
    m = _HEADING.match(line) or _BOLD_LINE.match(line)
    return _clean(m.group(1)).rstrip(":").strip() if m else None


def _find_title(lines: list[str]) -> tuple[int, str]:
    """Where the title is and its text: a ``TITLE:`` label, the line below a bare ``Title``
    heading, a heading or bold line that names no generic section, else the first line."""
    for i, line in enumerate(lines):
        if m := _LABEL.match(line):
            return i, _clean(m.group(1))
        if _LABEL_ONLY.match(line) and i + 1 < len(lines) and not _STEP.match(lines[i + 1]):
            return i + 1, _heading(lines[i + 1]) or _clean(lines[i + 1])
    for i, line in enumerate(lines):
        text = None if _STEP.match(line) else _heading(line)
        if text and not _GENERIC.match(text) and not _LABEL_ONLY.match(text):
            return i, text
    for i, line in enumerate(lines):
        if not _STEP.match(line) and not _STEPS_LABEL.match(line):
            return i, _heading(line) or _clean(line)
    return -1, ""


def _list_steps(body: list[str]) -> list[str]:
    """The numbered or bulleted items, up to the next section; deeper items join their step."""
    steps: list[str] = []
    indent = -1
    for line in body:
        m = _STEP.match(line)
        if m is None:
            if steps and (_heading(line) is not None or _LABEL.match(line)):
                break
            continue
        depth, item = len(m.group(1).expandtabs()), _clean(m.group(2))
        if indent < 0:
            indent = depth
        if depth > indent and steps:
            steps[-1] += f"; {item}"
        elif item:
            steps.append(item)
    return steps


def _prose_steps(body: list[str], title: str) -> list[str]:
    skip = (_STEPS_LABEL, _LABEL, _LABEL_ONLY)
    lines = [_clean(line) for line in body if not any(p.match(line) for p in skip)]
    return [line for line in lines if line and line != title]


def _plan_from_lines(lines: list[str]) -> Plan | None:
    at, title = _find_title(lines)
    body = lines[at + 1 :]
    steps = _list_steps(body) or _prose_steps(body, title)
    if not title or not steps:
        return None
    return Plan(title=title[:200], steps=tuple(steps[:MAX_STEPS]))


def _step_text(item: object) -> str:
    if isinstance(item, dict):
        item = next((item[k] for k in ("step", "description", "action") if k in item), "")
    return _clean(item) if isinstance(item, str) else ""


def _plan_from_json(text: str) -> Plan | None:
    """A ``{"title": ..., "steps": [...]}`` object, bare or in a code fence."""
    for body in (*_JSON_BLOCK.findall(text), text):
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if 0 <= start < end else None
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("plan"), dict):
            data = data["plan"]
        if not isinstance(data, dict) or not isinstance(data.get("title"), str):
            continue
        raw = data.get("steps")
        steps = [s for s in map(_step_text, raw if isinstance(raw, list) else []) if s]
        if _clean(data["title"]) and steps:
            return Plan(title=_clean(data["title"])[:200], steps=tuple(steps[:MAX_STEPS]))
    return None


def parse_plan(text: str) -> Plan | None:
    """One plan from a reply: a JSON object, or a title (``TITLE:``, a heading, a bold line) and
    the numbered or bulleted steps below it. Fenced code is never a title nor a step, and lines
    above the title (analysis) are not steps. None when there is nothing usable."""
    return _plan_from_json(text) or _plan_from_lines(_prose_lines(text))


def planner_messages(given: PlannerInput) -> list[Message]:
    """The planner's system and user messages; the same input renders the same text (a replay
    key)."""
    return chat(
        "planner",
        **problem_context(given.problem, given.facts),
        kernel_source=given.kernel_source.strip(),
        profile_text=render_profile(given.profile).strip(),
        **lessons_context(given.lessons),
        tried=list(given.tried),
        drafted=[title.strip() for title in given.drafted],
        variants=list(given.variants),
    )


async def propose(client: ChatModel, given: PlannerInput, sample_index: int = 0) -> PlanResult:
    call = await client.complete("planner", planner_messages(given), sample_index)
    if not call.ok:
        return PlanResult(None, call, call.error)
    plan = parse_plan(call.reply)
    return PlanResult(plan, call, "" if plan else "the reply holds no plan (title and steps)")
