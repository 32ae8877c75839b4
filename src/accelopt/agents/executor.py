"""The executor: carries out a plan on a kernel and returns the complete new kernel."""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.agents.code import extract_code
from accelopt.agents.context import ProblemView
from accelopt.agents.planner import Plan
from accelopt.agents.prompting import chat, problem_context
from accelopt.backends.facts import BackendFacts
from accelopt.llm.chat import ChatModel
from accelopt.llm.records import LLMCall, Message


@dataclass(frozen=True)
class ExecutorInput:
    problem: ProblemView
    kernel_source: str
    plan: Plan
    facts: BackendFacts


@dataclass(frozen=True)
class WrittenKernel:
    """A kernel written by an agent, or the reason the sample failed (recorded with the call)."""

    source: str | None
    call: LLMCall
    error: str = ""


def kernel_from(call: LLMCall, language: str) -> WrittenKernel:
    """The one parsing boundary for replies that should hold a kernel (executor and fixer)."""
    if not call.ok:
        return WrittenKernel(None, call, call.error)
    extracted = extract_code(call.reply, language, call.finish_reason)
    return WrittenKernel(extracted.source, call, extracted.reason)


def executor_messages(given: ExecutorInput) -> list[Message]:
    """The executor's system and user messages (deterministic: a replay key)."""
    return chat(
        "executor",
        **problem_context(given.problem, given.facts),
        kernel_source=given.kernel_source.strip(),
        plan=given.plan,
    )


async def execute(client: ChatModel, given: ExecutorInput, sample_index: int = 0) -> WrittenKernel:
    call = await client.complete("executor", executor_messages(given), sample_index)
    return kernel_from(call, given.facts.language)
