"""Prompt templates (package data under prompts/), rendered strictly: a missing variable fails."""

from __future__ import annotations

from typing import Any

from accelopt import templating
from accelopt.agents.context import ProblemView
from accelopt.backends.facts import BackendFacts
from accelopt.llm.records import Message

_ENV = templating.environment("accelopt.agents", "prompts", kind="text")


def render(template: str, **context: Any) -> str:
    """Render ``prompts/<template>.jinja``; jinja2.UndefinedError when a variable is missing."""
    return _ENV.get_template(f"{template}.jinja").render(**context).strip() + "\n"


def problem_context(problem: ProblemView, facts: BackendFacts) -> dict[str, Any]:
    """What the planner, the executor and the fixer are all shown: the problem, and the backend's
    facts (the templates branch on them) with their text."""
    return {"problem": problem, "facts": facts, "facts_text": facts.render()}


def chat(agent: str, **context: Any) -> list[Message]:
    """The system and user messages of an agent: ``<agent>_system`` and ``<agent>_user``."""
    return [
        {"role": "system", "content": render(f"{agent}_system", **context)},
        {"role": "user", "content": render(f"{agent}_user", **context)},
    ]
