"""The in-process ``ScriptedChat``: the agents' chat model without HTTP. From the same script it
must record the same calls as the real ``LLMClient`` talking to the ``ScriptedServer``."""

from __future__ import annotations

import asyncio
import inspect
import time

import pytest

from accelopt.llm.chat import ChatModel
from accelopt.llm.client import LLMClient
from accelopt.testing.scripted import Reply, ScriptedServer
from accelopt.testing.scripted_chat import IN_PROCESS_URL, ScriptedChat, scripted_config
from accelopt.testing.scripting import RecordedRequest

pytestmark = pytest.mark.timeout(60)

MESSAGES = [
    {"role": "system", "content": "You optimise kernels."},
    {"role": "user", "content": "make it fast please"},
]
# Everything a call records but its id, start time and latency.
SAME = ("agent", "model", "messages", "params", "sample_index", "key", "reply", "reasoning",
        "finish_reason", "tokens_in", "tokens_out", "cost_usd", "error", "attempts",
        "replayed")  # fmt: skip
REPLIES = {
    "plain": Reply("TITLE: Tile K\n1. Block K.", reasoning="think first"),
    "usage": Reply("ok", prompt_tokens=1000, completion_tokens=500),
    "empty": Reply.empty(),
    "no-code": Reply.no_code(),
    "truncated": Reply.truncated("```c\nvoid kernel(float *x) { x[0] = 1; }\n```"),
    "huge": Reply.huge(),
    "malformed": Reply.malformed(),
    "not-a-completion": Reply(raw_body='{"id": "x", "object": "chat.completion"}'),
    "null": Reply(raw_body="null"),
    "429": Reply.rate_limited(0),
    "500": Reply.server_error(),
    "503": Reply.server_error(503),
    "502-text": Reply(status=502, raw_body="Bad gateway"),
    "401": Reply.unauthorized(),
    "400": Reply(status=400, content="context too long"),
    "418": Reply(status=418),
    "422-raw": Reply(status=422, raw_body='{"error": {"message": "bad field"}}'),
    "timeout": Reply.slow("too late", 2.0),
}


def run(coro):
    return asyncio.run(coro)


def instant(_seconds: float) -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


@pytest.mark.parametrize("reply", REPLIES.values(), ids=REPLIES.keys())
def test_in_process_and_http_record_the_same_call(reply: Reply):
    """Each reply twice (a retryable fault is retried once); the calls agree field by field, and
    the requests the two scripts saw are the same."""
    # A short timeout only where the reply is to run past it (a 2 MB reply over HTTP on a busy
    # machine may take longer than that), and long enough that each try reaches the server on
    # a busy machine: at 0.1 s the client gave up on a retry before sending it.
    timeout_s = 0.5 if reply.delay_s else 10.0
    endpoint = {"max_retries": 1, "timeout_s": timeout_s, "price_in": 1.0, "price_out": 2.0}
    chat = ScriptedChat(config=scripted_config(**endpoint), sleep=instant)
    chat.script("executor", reply, reply)

    async def over_http(server: ScriptedServer):
        client = LLMClient(scripted_config(base_url=server.base_url, **endpoint), sleep=instant)
        try:
            return await client.complete("executor", MESSAGES, 3)
        finally:
            await client.aclose()

    with ScriptedServer() as server:
        server.script("executor", reply, reply)
        http = run(over_http(server))
        # a try the client gave up on may reach the server after it did (a busy machine)
        deadline = time.monotonic() + 5.0
        while len(server.requests) < http.attempts and time.monotonic() < deadline:
            time.sleep(0.01)
        http_requests, base_url = server.requests, server.base_url
    local = run(chat.complete("executor", MESSAGES, 3))

    assert {f: getattr(local, f) for f in SAME} == {f: getattr(http, f) for f in SAME}
    assert (http.base_url, local.base_url) == (base_url, IN_PROCESS_URL)
    assert chat.calls == [local]
    assert len(chat.requests) == len(http_requests) == local.attempts
    for mine, theirs in zip(chat.requests, http_requests, strict=True):
        assert (mine.model, mine.messages) == (theirs.model, theirs.messages)
        assert mine.body == theirs.body
        assert mine.path == "/v1/chat/completions" == theirs.path
        assert mine.headers["authorization"] == theirs.headers["authorization"]


def test_both_have_the_one_method_the_agents_use():
    models: list[ChatModel] = [ScriptedChat(), LLMClient(scripted_config())]
    protocol = inspect.signature(ChatModel.complete)
    for model in models:
        assert inspect.signature(type(model).complete) == protocol
        assert inspect.iscoroutinefunction(model.complete)


def test_retries_wait_as_the_server_says_and_cost_nothing_by_default():
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    chat = ScriptedChat(config=scripted_config(max_retries=2), sleep=sleep)
    chat.script("planner", Reply.rate_limited(0.05), Reply.server_error(), Reply("done"))
    call = run(chat.complete("planner", MESSAGES))
    assert call.ok and call.reply == "done" and call.attempts == 3
    assert waits == [0.05, 0.0]  # Retry-After, then the (zero-based) backoff
    assert call.cost_usd == 0.0 and call.base_url == IN_PROCESS_URL and call.model == "planner"
    assert (call.tokens_in, call.tokens_out) == (4 + 3 + 2, 1)  # words + one per message


def test_an_unscripted_model_is_an_error_as_data():
    call = run(ScriptedChat().complete("summarizer", MESSAGES))
    assert not call.ok and call.attempts == 1
    assert call.error == "InternalServerError: Error code: 500 - no scripted reply for model "\
        "'summarizer'"  # fmt: skip


def test_a_default_callable_sees_each_request():
    def answer(request: RecordedRequest) -> Reply:
        return Reply(f"{request.model}: {request.messages[-1]['content']}")

    chat = ScriptedChat(default=answer, config=scripted_config(reasoning_effort="high"))
    chat.script("fixer", Reply("scripted first"))

    async def both():
        return await chat.complete("fixer", MESSAGES), await chat.complete("fixer", MESSAGES, 1)

    first, second = run(both())
    assert (first.reply, second.reply) == ("scripted first", "fixer: make it fast please")
    assert first.key != second.key  # the sample index is part of the replay key
    (request, _) = chat.requests_for("fixer")
    assert request.body["reasoning_effort"] == "high" and request.body["temperature"] == 0.7
    assert chat.pending() == 0
