"""The summarizer: a slow→fast pair becomes a lesson for the optimization memory, or none."""

from __future__ import annotations

import re
from dataclasses import dataclass

from accelopt.agents.context import ProblemView
from accelopt.agents.planner import Plan, plan_context
from accelopt.agents.prompting import chat
from accelopt.llm.chat import ChatModel
from accelopt.llm.records import LLMCall, Message
from accelopt.memory.records import Lesson
from accelopt.profiling.profile import Profile, render_profile


@dataclass(frozen=True)
class SummarizerInput:
    problem: ProblemView
    slow_source: str
    fast_source: str
    speedup: float
    language: str = "c"
    # the plan the executor carried out between the two kernels, and what each one measured
    plan: Plan | None = None
    slow_profile: Profile | None = None
    fast_profile: Profile | None = None
    # the plan turned the fast kernel (the parent) into the slow one: an "undo" lesson
    plan_made_slower: bool = False


@dataclass(frozen=True)
class LessonResult:
    lesson: Lesson | None
    call: LLMCall
    no_lesson: bool = False  # the model said there is nothing general to learn
    error: str = ""


_NO_LESSON = re.compile(r"^\W*no\s+lesson\W*$", re.IGNORECASE | re.MULTILINE)
# "TITLE: x", "**Title:** x", "**Lesson**: x", "## Title: x", or a bare "### Before" (the value
# on the lines below)
_FIELD = re.compile(
    r"^\s*(?:#{1,6}\s*)?[*_]{0,2}\s*(title|lesson|description|before|after)\s*[*_]{0,2}\s*"
    r"(?::[*_]{0,2}\s*(.*)|[:\s]*)$",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def _sections(text: str) -> dict[str, str]:
    """Split the reply at its ``FIELD:`` lines; each section is the rest of that line and below."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if m := _FIELD.match(line):
            current = "lesson" if m.group(1).lower() == "description" else m.group(1).lower()
            sections[current] = [m.group(2) or ""]
        elif current is not None:
            sections[current].append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def _snippet(section: str) -> str:
    m = _FENCE.search(section)
    return (m.group(1) if m else section).strip()


def parse_lesson(text: str) -> Lesson | None:
    """A lesson from ``TITLE:/LESSON:/BEFORE:/AFTER:`` sections (markdown tolerated), or None."""
    parts = _sections(text)
    title, description = parts.get("title", "").strip("*_ "), parts.get("lesson", "").strip("*_ ")
    if not title or not description:
        return None
    return Lesson(
        title=title[:200],
        description=description,
        before=_snippet(parts.get("before", "")),
        after=_snippet(parts.get("after", "")),
    )


def _profile_text(profile: Profile | None) -> str:
    return render_profile(profile).strip() if profile is not None else ""


def summarizer_messages(given: SummarizerInput) -> list[Message]:
    """The summarizer's system and user messages; the same input renders the same text."""
    return chat(
        "summarizer",
        problem=given.problem,
        slow_source=given.slow_source.strip(),
        fast_source=given.fast_source.strip(),
        speedup=given.speedup,
        language=given.language,
        **plan_context(given.plan),
        slow_profile_text=_profile_text(given.slow_profile),
        fast_profile_text=_profile_text(given.fast_profile),
        plan_made_slower=given.plan_made_slower,
    )


async def summarize(
    client: ChatModel, given: SummarizerInput, sample_index: int = 0
) -> LessonResult:
    call = await client.complete("summarizer", summarizer_messages(given), sample_index)
    if not call.ok:
        return LessonResult(None, call, error=call.error)
    lesson = parse_lesson(call.reply)
    if lesson is not None:
        return LessonResult(lesson, call)
    if _NO_LESSON.search(call.reply):
        return LessonResult(None, call, no_lesson=True)
    return LessonResult(None, call, error="the reply holds neither a lesson nor NO LESSON")
