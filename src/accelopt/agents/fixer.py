"""The fixer: repairs a kernel that failed (build, checks, crash, timeout, wrong results)."""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.agents.context import ProblemView
from accelopt.agents.executor import KernelResult, kernel_from
from accelopt.agents.prompting import chat
from accelopt.backends.facts import BackendFacts
from accelopt.llm.client import LLMClient

MAX_LOG_CHARS = 2000


@dataclass(frozen=True)
class FixerInput:
    problem: ProblemView
    kernel_source: str
    status: str
    error: str
    log: str
    facts: BackendFacts


async def fix(client: LLMClient, given: FixerInput, sample_index: int = 0) -> KernelResult:
    messages = chat(
        "fixer",
        problem=given.problem,
        facts=given.facts,
        facts_text=given.facts.render(),
        kernel_source=given.kernel_source.strip(),
        status=given.status,
        error=given.error.strip() or "(no message)",
        log=given.log.strip()[:MAX_LOG_CHARS],
    )
    call = await client.complete("fixer", messages, sample_index)
    return kernel_from(call, given.facts.language)
