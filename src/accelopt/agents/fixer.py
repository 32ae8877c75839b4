"""The fixer: repairs a kernel that failed (build, checks, crash, timeout, wrong results, a time
beyond the roofline) or writes the kernel an executor's reply lacked (``NO_CODE``).

It sees what a person would look at: the mismatch description of wrong outputs
(``profiling/worker/correctness.py``), the compiler's first errors (their line numbers are the
kernel's own), the phase a crash or timeout happened in and what that phase means, and the kernel
it descends from with the plan it was carrying out, so that it repairs the intent instead of
rewriting from scratch. Rendering is deterministic: the same input gives the same messages."""

from __future__ import annotations

import re
from dataclasses import dataclass

from accelopt.agents.context import ProblemView
from accelopt.agents.executor import WrittenKernel, kernel_from
from accelopt.agents.planner import Plan, plan_context
from accelopt.agents.prompting import chat, problem_context
from accelopt.backends.facts import BackendFacts
from accelopt.llm.chat import ChatModel
from accelopt.llm.records import Message

MAX_LOG_CHARS = 2000
MAX_COMPILE_ERRORS = 5  # compiler errors shown, each with the lines that quote its source
NO_CODE = "NO_CODE"  # not an evaluation status: the executor's reply held no usable kernel

# What the worker was doing when it died or ran out of time (the pool names the phase in the
# error, e.g. "the kernel call (seed 1 of 5) ran past its 2 s deadline"), most specific first.
PHASES: tuple[tuple[str, str], ...] = (
    (
        "compilation (first launch)",
        "the first launch, which compiles the kernel (JIT) and runs it "
        "once on zeros of the workload's sizes",
    ),
    ("compilation", "the compiler building the kernel, before any call"),
    ("loading the kernel", "loading the built kernel, before any call"),
    (
        "the reference computation",
        "the harness computing the reference before the kernel ran (not the kernel's doing)",
    ),
    (
        "the kernel call (timing)",
        "the timed calls, after the kernel passed its correctness calls, "
        "when it is called over and over on other buffers of the same sizes",
    ),
    (
        "the kernel call (seed",
        "one of the correctness calls, the kernel's first runs on the "
        "workload's sizes with random inputs",
    ),
    ("the kernel call", "a call of the kernel on the workload's sizes"),
    ("checking the timed outputs", "the harness checking the timed calls' outputs afterwards"),
    ("waiting for the device", "the harness waiting for the device (not the kernel's doing)"),
    ("starting the evaluation", "the worker starting, before the kernel was built"),
)
_ERROR_LINE = re.compile(r"\berror\b|undefined reference")
_PHASE_DETAIL = r"(?: \([^)]*\))?"


@dataclass(frozen=True)
class Failure:
    """What went wrong: ``status``, an evaluation status (COMPILE_ERROR, REJECTED, CRASH,
    TIMEOUT, INCORRECT, SUSPICIOUS) or NO_CODE; ``error``, the evaluation's error (for NO_CODE,
    the reason the reply had no kernel); ``log``, what the worker logged."""

    status: str
    error: str
    log: str = ""


@dataclass(frozen=True)
class FixerInput:
    """``kernel_source``: the failed kernel ('' for NO_CODE); ``plan``: the plan it was carrying
    out; ``parent_source``: the last correct kernel it descends from."""

    problem: ProblemView
    facts: BackendFacts
    kernel_source: str
    failure: Failure
    plan: Plan | None = None
    parent_source: str = ""


def first_errors(error: str, limit: int = MAX_COMPILE_ERRORS) -> str:
    """The first ``limit`` error lines of a compiler's message, each with the lines after it
    (the source it quotes); the whole message when it has no error line."""
    groups: list[list[str]] = []
    for line in error.strip().splitlines():
        if _ERROR_LINE.search(line):
            groups.append([line])
        elif groups:
            groups[-1].append(line)
    if not groups:
        return error.strip()
    shown = [line for group in groups[:limit] for line in group]
    more = len(groups) - limit
    return "\n".join(shown + ([f"... ({more} more errors)"] if more > 0 else []))


def failure_phase(error: str) -> tuple[str, str]:
    """The phase named in a crash's or timeout's error (with its detail, e.g. "the kernel call
    (seed 1 of 5)") and what it means; ('', '') when none is named."""
    for phrase, meaning in PHASES:
        base = phrase.split(" (")[0]
        if phrase in error:
            found = re.search(re.escape(base) + _PHASE_DETAIL, error)
            return (found.group(0) if found else phrase), meaning
    return "", ""


def fixer_context(given: FixerInput) -> dict[str, object]:
    """The template's variables."""
    status, error = given.failure.status, given.failure.error
    where, meaning = failure_phase(error)
    return {
        **problem_context(given.problem, given.facts),
        "kernel_source": given.kernel_source.rstrip(),  # leading lines kept: line numbers hold
        "parent_source": given.parent_source.rstrip(),
        **plan_context(given.plan),
        "status": status,
        "error": error.strip() or "(no message)",
        "compile_errors": first_errors(error) if status == "COMPILE_ERROR" else "",
        "phase": where,
        "phase_meaning": meaning,
        "judged": "elements wrong" in error or "no element is off" in error,
        "log": given.failure.log.strip()[:MAX_LOG_CHARS],
    }


def fixer_messages(given: FixerInput) -> list[Message]:
    return chat("fixer", **fixer_context(given))


async def fix(client: ChatModel, given: FixerInput, sample_index: int = 0) -> WrittenKernel:
    messages = fixer_messages(given)
    call = await client.complete("fixer", messages, sample_index)
    return kernel_from(call, given.facts.language)
