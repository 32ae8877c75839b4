"""Each agent end to end: typed input → prompt → a scripted chat model → typed output. Failures
come back as data with a reason, never as exceptions.

The agents run against the in-process ``ScriptedChat`` (no HTTP); ``test_every_agent_over_http``
runs all four through the real ``LLMClient`` and the scripted HTTP server, which answer from the
same script (tests/testing/test_scripted_chat.py checks that the two record the same calls)."""

from __future__ import annotations

import asyncio

import pytest

from accelopt.agents.context import problem_view
from accelopt.agents.executor import ExecutorInput, execute
from accelopt.agents.fixer import Failure, FixerInput, fix
from accelopt.agents.planner import Plan, PlannerInput, planner_messages, propose
from accelopt.agents.summarizer import SummarizerInput, summarize
from accelopt.backends.cpu.backend import CpuBackend
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.llm.client import LLMClient
from accelopt.memory.records import Experience, Lesson
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profile import build_profile
from accelopt.testing.scripted import Reply, ScriptedServer
from accelopt.testing.scripted_chat import ScriptedChat, scripted_config

pytestmark = pytest.mark.timeout(60)

PROBLEM = load_problem("matmul")
BASELINE = shipped_kernel(PROBLEM, "baseline").read_text()
NEW_KERNEL = "void kernel(const float *lhs, const float *rhs, float *out) { /* v2 */ }"
LESSON = Lesson(
    "Pack the B panel", "Copy B into a contiguous panel so the micro-kernel streams it."
)


def experience(lesson: Lesson = LESSON, **fields) -> Experience:
    values = {"kind": "positive", "speedup": 1.42, "problem": "matmul", "backend": "cpu",
              "hardware": "test-cpu", "model": "m", "run_id": "r", "slow_hash": "s",
              "fast_hash": "f", **fields}  # fmt: skip
    return Experience(lesson=lesson, **values)


EXPERIENCE = experience()


@pytest.fixture()
def chat() -> ScriptedChat:
    """Each agent's model is named after it: ``chat.script("planner", ...)``; one retry."""
    return ScriptedChat(config=scripted_config(max_retries=1))


run = asyncio.run


def evaluation(hw) -> Evaluation:
    return Evaluation(
        problem="matmul", workload="cpu", backend="cpu", kernel="baseline", kernel_hash="h",
        hardware=hw.key(), status=Status.PASSED, latency_s=0.0104, noise=0.02, calls=20,
        peak_s=0.00185, pct_of_peak=0.178, bound="matmul", max_rel_err=4e-7, tolerance=2e-5,
    )  # fmt: skip


def planner_input(hw, lessons=(EXPERIENCE,)) -> PlannerInput:
    cost = PROBLEM.cost.at(PROBLEM.workload("cpu").sizes)
    remarks = ["kernel.c:13:31: optimized: loop vectorized using 64 byte vectors"]
    return PlannerInput(
        problem=problem_view(PROBLEM, "cpu"),
        kernel_source=BASELINE,
        profile=build_profile(evaluation(hw), cost, hw, remarks),
        facts=CpuBackend().facts(hw),
        lessons=lessons,
    )


def test_planner_sees_profile_lessons_facts_and_kernel(chat, hw):
    chat.script("planner", Reply("TITLE: Register-block the micro-kernel\n1. Use 6x32 tiles.\n"))
    result = run(propose(chat, planner_input(hw)))
    assert result.plan == Plan("Register-block the micro-kernel", ("Use 6x32 tiles.",))
    assert result.error == "" and result.call.ok
    (request,) = chat.requests_for("planner")
    prompt = request.messages[1]["content"]
    assert (
        request.messages[0]["role"] == "system"
        and "performance engineer" in (request.messages[0]["content"])
    )
    for text in (
        "Pack the B panel",  # the retrieved lesson
        "Copy B into a contiguous panel",
        "17.8 % of peak",  # the profile
        "loop vectorized using 64 byte vectors",  # compiler remarks
        "void kernel(const float *restrict lhs",  # the kernel
        "M=512, N=1536, K=640",  # sizes
        "return (lhs @ rhs,)",  # the reference source
        "<immintrin.h>",  # backend facts
        "GFLOP/s",  # ceilings
    ):
        assert text in prompt, text


def test_planner_is_told_each_lessons_speedup_kind_and_problem(hw):
    undo = experience(
        Lesson("Split the K loop", "Splitting K broke the streaming.", "for (k0 ...)", "for (k"),
        kind="negative", speedup=2.5, problem="silu",
    )  # fmt: skip
    prompt = planner_messages(planner_input(hw, lessons=(EXPERIENCE, undo)))[1]["content"]
    do_part, undo_part = prompt.split("## 1. Pack the B panel")[1].split("## 2. Split the K loop")
    assert "do: measured 1.42x faster, from problem matmul: a child kernel that beat" in do_part
    assert "undo: measured 2.50x slower, from problem silu: a child kernel slower" in undo_part
    assert "undo this change" in undo_part
    assert "undo" not in do_part.lower()
    assert "Before:\n```c\nfor (k0 ...)\n```" in undo_part  # the backend's language fence


def test_planner_prompt_renders_byte_identical(hw):
    lessons = (EXPERIENCE, experience(kind="negative", speedup=1.2, problem="silu"))
    first = planner_messages(planner_input(hw, lessons=lessons))
    again = planner_messages(planner_input(hw, lessons=list(lessons)))
    assert first == again
    assert [m["content"].encode() for m in first] == [m["content"].encode() for m in again]


def test_planner_without_lessons_has_no_lessons_section(chat, hw):
    chat.script("planner", Reply("TITLE: t\n1. s"))
    run(propose(chat, planner_input(hw, lessons=())))
    assert "Lessons" not in chat.requests[0].messages[1]["content"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply.empty(), "no plan"),
        (Reply("TITLE: only a title"), "no plan"),
    ],
)
def test_planner_failures_are_data(chat, hw, reply, reason):
    chat.script("planner", reply)
    result = run(propose(chat, planner_input(hw)))
    assert result.plan is None and reason in result.error


def test_planner_endpoint_failure_is_data(chat, hw):
    chat.script("planner", Reply.server_error(), Reply.server_error())
    result = run(propose(chat, planner_input(hw)))
    assert result.plan is None and "InternalServerError" in result.error


def executor_input(hw) -> ExecutorInput:
    return ExecutorInput(
        problem=problem_view(PROBLEM, "cpu"),
        kernel_source=BASELINE,
        plan=Plan("Tile K", ("Block K by 256.", "Unroll by 4.")),
        facts=CpuBackend().facts(hw),
    )


def fixer_input(hw) -> FixerInput:
    """A kernel that failed to compile, for the fixer."""
    return FixerInput(
        problem=problem_view(PROBLEM, "cpu"),
        facts=CpuBackend().facts(hw),
        kernel_source="void kernel(const float *lhs, const float *rhs, float *out) { oops }",
        failure=Failure("COMPILE_ERROR", "kernel.c:1:62: error: 'oops' undeclared"),
    )


def test_executor_returns_the_kernel_from_the_code_block(chat, hw):
    chat.script("executor", Reply(f"Here it is:\n```c\n{NEW_KERNEL}\n```\n"))
    result = run(execute(chat, executor_input(hw), sample_index=1))
    assert result.source == NEW_KERNEL + "\n" and result.error == ""
    prompt = chat.requests[0].messages[1]["content"]
    assert "Tile K" in prompt and "1. Block K by 256." in prompt and "2. Unroll by 4." in prompt
    assert result.call.sample_index == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply.no_code(), "no code block"),
        (Reply.truncated(f"```c\n{NEW_KERNEL}"), "cut off"),
        (Reply.empty(), "empty"),
    ],
)
def test_executor_reply_without_usable_code_is_a_failed_sample(chat, hw, reply, reason):
    chat.script("executor", reply)
    result = run(execute(chat, executor_input(hw)))
    assert result.source is None and reason in result.error
    assert result.call.ok  # the call itself succeeded and is recorded with its reply


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        ((Reply.malformed(), Reply.malformed()), "JSONDecodeError"),
        ((Reply(raw_body='{"id": "x"}'),) * 2, "MalformedReplyError"),
        ((Reply.rate_limited(0), Reply.server_error(503)), "InternalServerError: Error code: 503"),
        ((Reply.unauthorized(),), "AuthenticationError: Error code: 401"),
        ((Reply.slow("too late", 0.2),) * 2, "APITimeoutError"),
    ],
    ids=["malformed", "not-a-completion", "429-then-503", "401", "timeout"],
)
def test_executor_endpoint_faults_are_a_failed_sample_with_the_reason(hw, replies, reason):
    chat = ScriptedChat(config=scripted_config(max_retries=1, timeout_s=0.05))
    chat.script("executor", *replies)
    result = run(execute(chat, executor_input(hw)))
    assert result.source is None and not result.call.ok
    assert result.error == result.call.error and result.error.startswith(reason)
    assert result.call.attempts == len(replies) and chat.pending() == 0


def test_executor_handles_a_huge_reply(chat, hw):
    chat.script("executor", Reply("x " * 1_000_000 + f"\n```c\n{NEW_KERNEL}\n```"))
    result = run(execute(chat, executor_input(hw)))
    assert result.source is not None


def test_fixer_sees_the_failure_and_returns_a_repair(chat, hw):
    chat.script("fixer", Reply(f"```c\n{NEW_KERNEL}\n```"))
    given = fixer_input(hw)
    result = run(fix(chat, given))
    assert result.source == NEW_KERNEL + "\n"
    prompt = chat.requests[0].messages[1]["content"]
    assert "COMPILE_ERROR" in prompt and "'oops' undeclared" in prompt and "{ oops }" in prompt


def summarizer_input() -> SummarizerInput:
    return SummarizerInput(
        problem=problem_view(PROBLEM, "cpu"),
        slow_source=BASELINE,
        fast_source=NEW_KERNEL,
        speedup=2.5,
    )


def test_summarizer_writes_a_lesson(chat):
    chat.script(
        "summarizer",
        Reply(
            "TITLE: Pack B\nLESSON: Packing B helps.\nBEFORE:\n```c\na\n```\nAFTER:\n```c\nb\n```"
        ),
    )
    result = run(summarize(chat, summarizer_input()))
    assert result.lesson == Lesson("Pack B", "Packing B helps.", "a", "b")
    assert "2.50x faster" in chat.requests[0].messages[1]["content"]


def test_summarizer_no_lesson_and_garbage(chat):
    chat.script("summarizer", Reply("NO LESSON"), Reply("hmm"))
    first = run(summarize(chat, summarizer_input()))
    assert first.lesson is None and first.no_lesson and first.error == ""
    second = run(summarize(chat, summarizer_input(), sample_index=1))
    assert second.lesson is None and not second.no_lesson and "neither" in second.error


def test_executor_writes_triton_kernels_from_the_triton_backends_facts(chat):
    """A second backend needs no change in the agents: its facts set the language and contract."""
    from accelopt.backends.triton.backend import TritonBackend
    from accelopt.hardware.datasheet import H200

    baseline = shipped_kernel(PROBLEM, "baseline", "triton").read_text()
    triton_kernel = "import triton\n\n\ndef kernel(lhs, rhs, out):\n    pass\n"
    chat.script("executor", Reply(f"```python\n{triton_kernel}```\n"))
    given = ExecutorInput(
        problem=problem_view(PROBLEM, "paper"),
        kernel_source=baseline,
        plan=Plan("Bigger tiles", ("Use 128x128 tiles.",)),
        facts=TritonBackend().facts(H200),
    )
    result = run(execute(chat, given))
    assert result.source == triton_kernel and result.error == ""
    system, user = (m["content"] for m in chat.requests[0].messages[:2])
    assert "triton" in system and "```python" in user and "@triton.jit" in user
    assert 'input_precision="ieee"' in user and "4,800.0 GB/s" in user


def test_planner_and_executor_are_told_the_vector_isa_and_the_caches(chat, hw):
    avx2 = hw.model_copy(
        update={
            "arch": "x86_64", "isa": ("sse4_2", "avx", "avx2", "fma"), "vector_bits": 256,
            "l1d_bytes": 32 << 10, "l2_bytes": 512 << 10,
            "provenance": {"l2_bytes": "sysfs: level-2 unified cache, one per core",
                           "llc_bytes": "sysfs: level-3 unified cache, shared by 2 CPUs"},
        }
    )  # fmt: skip
    chat.script("planner", Reply("TITLE: Use AVX2\n1. 8-wide FMAs.\n"))
    chat.script("executor", Reply(f"```c\n{NEW_KERNEL}\n```\n"))
    run(propose(chat, planner_input(avx2)))
    run(execute(chat, executor_input(avx2), sample_index=0))
    for agent in ("planner", "executor"):
        (request,) = chat.requests_for(agent)
        prompt = request.messages[1]["content"]
        assert "vector ISA: AVX2 + FMA, 256-bit (8 floats); no AVX-512" in prompt, agent
        assert "L1d 32 KiB" in prompt and "L2 512 KiB (one per core)" in prompt, agent
        assert "last-level 32 MiB (shared by 2 CPUs)" in prompt, agent
        assert "inputs are cold" in prompt, agent


def test_every_agent_over_http(hw):
    """The real path: LLMClient → openai → the scripted server. The agents get the same results,
    and the server the same requests, as the in-process model from the same script."""
    fixer_given = fixer_input(hw)
    script = {
        "planner": (Reply("TITLE: Tile K\n1. Block K by 256.\n"),),
        "executor": (Reply.rate_limited(0), Reply(f"```c\n{NEW_KERNEL}\n```\n")),
        "fixer": (Reply.truncated(f"```c\n{NEW_KERNEL}\n```"),),
        "summarizer": (Reply.malformed(), Reply.malformed()),
    }

    async def team(model) -> list:
        try:
            return [
                await propose(model, planner_input(hw)),
                await execute(model, executor_input(hw), sample_index=2),
                await fix(model, fixer_given),
                await summarize(model, summarizer_input()),
            ]
        finally:
            if isinstance(model, LLMClient):
                await model.aclose()

    with ScriptedServer() as server:
        for agent, replies in script.items():
            server.script(agent, *replies)
        client = LLMClient(scripted_config(base_url=server.base_url, max_retries=1))
        plan, kernel, repair, lesson = run(team(client))
        http_requests, base_url = server.requests, server.base_url
    assert plan.plan == Plan("Tile K", ("Block K by 256.",)) and plan.call.ok
    assert kernel.source == NEW_KERNEL + "\n" and kernel.call.attempts == 2
    assert kernel.call.sample_index == 2 and kernel.call.base_url == base_url
    assert repair.source is None and "cut off" in repair.error and repair.call.ok
    assert lesson.lesson is None and lesson.error.startswith("JSONDecodeError")

    chat = ScriptedChat(config=scripted_config(max_retries=1))
    for agent, replies in script.items():
        chat.script(agent, *replies)
    in_process = run(team(chat))
    kept = ("plan", "source", "lesson", "no_lesson", "error")
    for http, local in zip((plan, kernel, repair, lesson), in_process, strict=True):
        assert {k: getattr(http, k) for k in kept if hasattr(http, k)} == {
            k: getattr(local, k) for k in kept if hasattr(local, k)
        }
        same = ("key", "reply", "finish_reason", "tokens_in", "tokens_out", "attempts", "error")
        assert [getattr(http.call, f) for f in same] == [getattr(local.call, f) for f in same]
    assert [r.body for r in http_requests] == [r.body for r in chat.requests]
