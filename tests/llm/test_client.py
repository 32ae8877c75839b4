"""The LLM client end to end: the real openai client against the scripted server."""

from __future__ import annotations

import asyncio

import pytest

from accelopt.llm.budget import Budget
from accelopt.llm.client import LLMClient
from accelopt.llm.config import Config
from accelopt.llm.recorder import JsonlRecorder, MemoryRecorder
from accelopt.testing.scripted import Reply, ScriptedServer

pytestmark = pytest.mark.timeout(60)

MESSAGES = [{"role": "user", "content": "make it fast"}]


def config(server: ScriptedServer, **default) -> Config:
    base = {"base_url": server.base_url, "model": "m", "max_retries": 3, "retry_base_s": 0.0,
            "price_in": 1.0, "price_out": 2.0, **default}  # fmt: skip
    per_agent = {
        agent: {"model": agent} for agent in ("planner", "executor", "fixer", "summarizer")
    }
    return Config.model_validate({"llm": {"default": base, **per_agent}})


def run(coro):
    return asyncio.run(coro)


async def complete(client: LLMClient, agent: str = "planner", sample: int = 0):
    try:
        return await client.complete(agent, MESSAGES, sample)
    finally:
        await client.aclose()


def test_a_reply_with_usage_cost_and_reasoning(server):
    server.script("planner", Reply("TITLE: x", reasoning="think think", prompt_tokens=1000,
                                   completion_tokens=500))  # fmt: skip
    recorder = MemoryRecorder()
    client = LLMClient(config(server), recorder=recorder)
    call = run(complete(client))
    assert call.ok and call.reply == "TITLE: x" and call.reasoning == "think think"
    assert (call.tokens_in, call.tokens_out, call.attempts) == (1000, 500, 1)
    assert call.cost_usd == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)
    assert recorder.calls == [call]
    usage = client.usage["planner"]
    assert (usage.calls, usage.tokens_in, usage.cost_usd) == (1, 1000, call.cost_usd)
    (request,) = server.requests
    assert request.body["temperature"] == 0.7 and request.body["max_tokens"] == 8192
    assert request.messages == MESSAGES


def test_reasoning_effort_is_sent_when_configured(server):
    server.script("planner", Reply("ok"))
    run(complete(LLMClient(config(server, reasoning_effort="high"))))
    assert server.requests[0].body["reasoning_effort"] == "high"


@pytest.mark.parametrize(
    "fault",
    [Reply.rate_limited(0.01), Reply.server_error(500), Reply.server_error(503), Reply.malformed()],
    ids=["429", "500", "503", "malformed"],
)
def test_retryable_faults_are_retried(server, fault):
    server.script("planner", fault, fault, Reply("fine"))
    call = run(complete(LLMClient(config(server))))
    assert call.ok and call.reply == "fine" and call.attempts == 3
    assert len(server.requests) == 3


def test_retry_after_is_honoured(server):
    server.script("planner", Reply.rate_limited(0.2), Reply("fine"))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    call = run(complete(LLMClient(config(server), sleep=sleep)))
    assert call.ok and waits == [pytest.approx(0.2)]


def test_retries_run_out_into_a_recorded_failure(server):
    server.script("planner", *[Reply.server_error()] * 4)
    recorder = MemoryRecorder()
    call = run(complete(LLMClient(config(server), recorder=recorder)))
    assert not call.ok and "InternalServerError" in call.error and call.attempts == 4
    assert recorder.calls == [call] and call.cost_usd == 0.0  # no completion: $0, known


@pytest.mark.parametrize(
    ("fault", "kind"),
    [(Reply.unauthorized(), "AuthenticationError"), (Reply(status=400), "BadRequestError")],
)
def test_non_retryable_faults_fail_at_once(server, fault, kind):
    server.script("planner", fault, Reply("never"))
    call = run(complete(LLMClient(config(server))))
    assert not call.ok and call.error.startswith(kind) and call.attempts == 1


def test_a_slow_reply_times_out_and_is_retried(server):
    server.script("planner", Reply.slow("late", 2.0), Reply("on time"))
    call = run(complete(LLMClient(config(server, timeout_s=0.3))))
    assert call.ok and call.reply == "on time" and call.attempts == 2


def test_an_unreachable_endpoint_is_a_failure_not_an_exception():
    cfg = Config.model_validate(
        {
            "llm": {
                "default": {
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "max_retries": 1,
                    "retry_base_s": 0.0,
                }
            }
        }
    )
    call = run(complete(LLMClient(cfg)))
    assert not call.ok and "APIConnectionError" in call.error and call.attempts == 2


@pytest.mark.parametrize(
    "reply", [Reply.empty(), Reply.truncated("```c\nvoid kernel("), Reply.huge(2_000_000)]
)
def test_odd_replies_are_returned_for_the_agent_to_judge(server, reply):
    server.script("planner", reply)
    call = run(complete(LLMClient(config(server))))
    assert call.ok and call.reply == reply.content and call.finish_reason == reply.finish_reason


def test_unknown_price_is_unknown_not_zero(server):
    server.script("planner", Reply("x"))
    client = LLMClient(config(server, price_in=None, price_out=None))
    call = run(complete(client))
    assert call.ok and call.cost_usd is None and client.usage["planner"].unknown_cost == 1


def test_budget_stops_new_calls_cleanly(server):
    server.script("planner", *[Reply("x", prompt_tokens=400_000, completion_tokens=0)] * 5)
    budget = Budget(max_usd=1.0)
    client = LLMClient(config(server), budget=budget)

    async def three():
        try:
            return [await client.complete("planner", MESSAGES, i) for i in range(4)]
        finally:
            await client.aclose()

    calls = run(three())
    assert [c.ok for c in calls] == [True, True, True, False]
    assert "budget reached" in calls[3].error and len(server.requests) == 3
    assert budget.spent_usd == pytest.approx(1.2)


def test_concurrent_calls_overshoot_the_budget_by_one_call_at_most():
    """Every call reserves what it may cost before it starts: eight calls at once against a
    budget of three do not all pass the check before any is charged."""

    def responder(request):
        return Reply("x", prompt_tokens=10, completion_tokens=8000, delay_s=0.2)

    with ScriptedServer(default=responder) as s:
        budget = Budget(max_usd=0.05)
        client = LLMClient(config(s, concurrency=8), budget=budget)

        async def eight():
            try:
                return await asyncio.gather(
                    *(client.complete("planner", MESSAGES, i) for i in range(8))
                )
            finally:
                await client.aclose()

        calls = run(eight())
        one_call = 8192 * 2.0 / 1e6 + 0.001  # max_tokens at $2/M out, and the prompt
        assert budget.spent_usd <= 0.05 + one_call
        assert len(s.requests) < 8 and sum(not c.ok for c in calls) == 8 - len(s.requests)
        assert budget.reserved_usd == 0.0


def test_budget_from_the_config(server):
    cfg = Config.model_validate({**config(server).model_dump(), "budget": {"max_tokens": 10}})
    client = LLMClient(cfg)
    assert client.budget is not None and client.budget.max_tokens == 10


def test_replay_returns_recorded_replies_without_any_request(server, tmp_path):
    path = tmp_path / "calls.jsonl"
    server.script("planner", Reply("plan A"), Reply("plan B"))
    server.script("executor", Reply("kernel A"))

    async def session(client: LLMClient):
        try:
            return [
                await client.complete("planner", MESSAGES, 0),
                await client.complete("planner", MESSAGES, 1),
                await client.complete("executor", MESSAGES, 0),
            ]
        finally:
            await client.aclose()

    first = run(session(LLMClient(config(server), recorder=JsonlRecorder(path))))
    assert len(server.requests) == 3
    replayer = LLMClient(config(server), recorder=JsonlRecorder(path), replay=True)
    second = run(session(replayer))
    assert len(server.requests) == 3  # zero new HTTP requests
    assert [c.reply for c in second] == [c.reply for c in first] == ["plan A", "plan B", "kernel A"]
    assert all(c.replayed and c.cost_usd == 0.0 for c in second)
    assert replayer.usage["planner"].replayed == 2


def test_replay_misses_go_to_the_network(server, tmp_path):
    server.script("planner", Reply("fresh"))
    client = LLMClient(config(server), recorder=JsonlRecorder(tmp_path / "c.jsonl"), replay=True)
    call = run(complete(client))
    assert call.ok and not call.replayed and len(server.requests) == 1


def test_concurrency_limit_per_endpoint(server):
    in_flight, peak = 0, 0

    def responder(request):
        return Reply("ok", delay_s=0.05)

    server_default = ScriptedServer(default=responder)
    with server_default as s:
        client = LLMClient(config(s, concurrency=2))
        original = client._request

        async def counted(endpoint, messages):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                return await original(endpoint, messages)
            finally:
                in_flight -= 1

        client._request = counted  # type: ignore[method-assign]

        async def many():
            try:
                agents = ["planner", "executor", "fixer", "summarizer"] * 3
                return await asyncio.gather(*(client.complete(a, MESSAGES) for a in agents))
            finally:
                await client.aclose()

        calls = run(many())
    assert all(c.ok for c in calls) and peak == 2
