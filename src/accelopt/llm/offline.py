"""The client of a run that makes no LLM call (``--strategy autotune``): it has no endpoint, no
budget and no usage, and a call to it is a bug in the caller, never a request sent anywhere."""

from __future__ import annotations

from accelopt.llm.budget import Budget
from accelopt.llm.client import Usage
from accelopt.llm.records import LLMCall, Message


class NoLLM:
    """A ``ChatModel`` for runs without agents: ``complete`` raises."""

    budget: Budget | None = None

    def __init__(self) -> None:
        self.usage: dict[str, Usage] = {}

    async def complete(self, agent: str, messages: list[Message], sample_index: int = 0) -> LLMCall:
        raise RuntimeError(f"this run makes no LLM call, but the {agent} was asked for one")

    async def aclose(self) -> None:
        return None
