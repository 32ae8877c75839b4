"""What the agents need of an LLM: one chat completion per call, failures as data.

``LLMClient`` (the real, OpenAI-compatible client) has this shape, and so does the in-process
``testing.scripted_chat.ScriptedChat`` the tests use; the agents and the search loop take a
``ChatModel`` and never the concrete client.
"""

from __future__ import annotations

from typing import Protocol

from accelopt.llm.budget import Budget
from accelopt.llm.records import LLMCall, Message


class ChatModel(Protocol):
    # what the calls may still spend (``budget.py``); None where no budget applies
    budget: Budget | None

    async def complete(self, agent: str, messages: list[Message], sample_index: int = 0) -> LLMCall:
        """One chat completion for ``agent`` (planner, executor, fixer or summarizer). Never
        raises for what an endpoint does: a failed call comes back with ``call.error`` set."""
        ...
