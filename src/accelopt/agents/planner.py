"""The planner: from a kernel, its profile and retrieved lessons, one optimization plan."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.agents.context import ProblemView
from accelopt.agents.prompting import chat
from accelopt.backends.facts import BackendFacts
from accelopt.llm.client import LLMClient
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
    # the retrieved memory, best first: each lesson with its kind, measured speedup and problem
    lessons: Sequence[Experience] = ()


@dataclass(frozen=True)
class Plan:
    title: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class PlanResult:
    plan: Plan | None
    call: LLMCall
    error: str = ""  # why there is no plan


_TITLE = re.compile(r"^\W*(?:title|plan)\W*:\s*(.+)$", re.IGNORECASE)
_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$")
_HEADING = re.compile(r"^\s*#+\s*(.+)$")


def _clean(text: str) -> str:
    return text.strip().strip("*_`").strip()


def parse_plan(text: str) -> Plan | None:
    """A title (``TITLE:``, else the first heading, else the first line) and the numbered or
    bulleted steps; lenient about markdown. None when there is nothing usable."""
    lines = [line for line in text.splitlines() if line.strip()]
    title, steps = "", []
    for line in lines:
        if not title and (m := _TITLE.match(line)):
            title = _clean(m.group(1))
        elif m := _STEP.match(line):
            steps.append(_clean(m.group(1)))
    if not title:
        heading = next((m.group(1) for line in lines if (m := _HEADING.match(line))), "")
        first = next((line for line in lines if not _STEP.match(line)), "")
        title = _clean(heading or first)
    if not steps:  # prose: every other line is a step
        body = [line for line in lines if not _TITLE.match(line) and not _HEADING.match(line)]
        steps = [_clean(line) for line in body if _clean(line) and _clean(line) != title]
        steps = [line for line in steps if not line.lower().startswith("steps")]
    if not title or not steps:
        return None
    return Plan(title=title[:200], steps=tuple(steps[:MAX_STEPS]))


def planner_messages(given: PlannerInput) -> list[Message]:
    """The planner's system and user messages; the same input renders the same text (a replay
    key)."""
    return chat(
        "planner",
        problem=given.problem,
        facts=given.facts,
        facts_text=given.facts.render(),
        kernel_source=given.kernel_source.strip(),
        profile_text=render_profile(given.profile),
        lessons=list(given.lessons),
    )


async def propose(client: LLMClient, given: PlannerInput, sample_index: int = 0) -> PlanResult:
    call = await client.complete("planner", planner_messages(given), sample_index)
    if not call.ok:
        return PlanResult(None, call, call.error)
    plan = parse_plan(call.reply)
    return PlanResult(plan, call, "" if plan else "the reply holds no plan (title and steps)")
