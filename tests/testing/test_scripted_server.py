"""The scripted chat-completions server, exercised through the real ``openai`` clients."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import openai
import pytest

from accelopt.testing.scripted import DEFAULT_MODEL, RecordedRequest, Reply, ScriptedServer

pytestmark = pytest.mark.timeout(60)

API_KEY = "sk-scripted-test"
MESSAGES = [
    {"role": "system", "content": "You optimise kernels."},
    {"role": "user", "content": "make it fast please"},
]


@pytest.fixture
def client(server: ScriptedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as c:
        yield c


def ask(client: openai.OpenAI, model: str = "m", **kwargs: object) -> object:
    return client.chat.completions.create(model=model, messages=MESSAGES, **kwargs)


def port_is_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_plain_reply_with_usage_reasoning_and_recorded_body(server, client):
    server.script("m", Reply("```c\nint x;\n```", reasoning="unroll the inner loop"))
    out = ask(client, temperature=0.2, max_tokens=64, reasoning_effort="high")

    assert out.object == "chat.completion"
    assert out.model == "m"
    choice = out.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "```c\nint x;\n```"
    assert choice.message.reasoning_content == "unroll the inner loop"  # an extra field
    assert choice.finish_reason == "stop"
    # 3 + 4 words over two messages, plus one per message; 4 content + 4 reasoning words
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (9, 8)
    assert out.usage.total_tokens == 17

    (request,) = server.requests
    assert isinstance(request, RecordedRequest)
    assert request.model == "m"
    assert request.path == "/v1/chat/completions"
    assert request.messages == MESSAGES
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 64
    assert request.body["reasoning_effort"] == "high"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


def test_usage_override_and_no_reasoning_field(server, client):
    server.script("m", Reply("hi", prompt_tokens=1000, completion_tokens=7))
    out = ask(client)
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (1000, 7)
    assert "reasoning_content" not in out.choices[0].message.model_dump()


def test_per_model_fifo_then_default():
    with ScriptedServer(default=Reply("fallback")) as server:
        c = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
        server.script("a", Reply("a1"), Reply("a2"))
        server.script("b", Reply("b1"))
        server.script("a", Reply("a3"))
        assert server.pending() == 4
        got = [ask(c, model).choices[0].message.content for model in ["a", "b", "a", "b", "a", "a"]]
        assert got == ["a1", "b1", "a2", "fallback", "a3", "fallback"]
        assert server.pending() == 0
        assert [r.model for r in server.requests] == ["a", "b", "a", "b", "a", "a"]
        assert len(server.requests_for("b")) == 2
        c.close()


def test_callable_replies_see_the_request():
    def echo(request: RecordedRequest) -> Reply:
        return Reply(f"{request.model}:{request.messages[-1]['content']}")

    with ScriptedServer(default=echo) as server:
        c = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
        server.script("x", lambda r: Reply(f"scripted {r.body['temperature']}"))
        assert ask(c, "x", temperature=0.5).choices[0].message.content == "scripted 0.5"
        assert ask(c, "y").choices[0].message.content == "y:make it fast please"
        c.close()


def test_unscripted_model_without_default_is_a_loud_500(client):
    with pytest.raises(openai.InternalServerError) as err:
        ask(client, "nobody")
    assert "no scripted reply for model 'nobody'" in str(err.value)
    assert err.value.status_code == 500


def test_a_failing_reply_callable_is_a_loud_500(server, client):
    server.script("m", lambda request: Reply(request.body["no-such-key"]))
    with pytest.raises(openai.InternalServerError, match="no-such-key"):
        ask(client)


def test_rate_limit_surfaces_retry_after(server, client):
    server.script("m", Reply.rate_limited(retry_after_s=0.05))
    with pytest.raises(openai.RateLimitError) as err:
        ask(client)
    assert err.value.status_code == 429
    assert err.value.response.headers["retry-after"] == "0.05"
    assert err.value.code == "rate_limit_exceeded"


def test_client_retries_honour_retry_after(server):
    server.script("m", Reply.rate_limited(0.01), Reply.rate_limited(0.01), Reply("third time"))
    with openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=2) as c:
        assert ask(c).choices[0].message.content == "third time"
    assert len(server.requests_for("m")) == 3


@pytest.mark.parametrize("status", [500, 503])
def test_server_error(server, client, status):
    server.script("m", Reply.server_error(status))
    with pytest.raises(openai.InternalServerError) as err:
        ask(client)
    assert err.value.status_code == status
    assert err.value.body["type"] == "server_error"


def test_malformed_body_raises_a_bare_json_decode_error(server, client):
    # Not an openai.APIError: the client calls response.json() and lets the error through.
    server.script("m", Reply.malformed())
    with pytest.raises(json.JSONDecodeError) as err:
        ask(client)
    assert not isinstance(err.value, openai.OpenAIError)


def test_slow_reply_times_out_and_the_server_keeps_serving(server, client):
    server.script("m", Reply.slow("late", delay_s=5.0), Reply("next"))
    start = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(client, timeout=0.2)
    assert time.monotonic() - start < 4.0
    assert ask(client).choices[0].message.content == "next"


def test_slow_reply_within_the_timeout_arrives(server, client):
    server.script("m", Reply.slow("worth the wait", delay_s=0.1))
    assert ask(client, timeout=5).choices[0].message.content == "worth the wait"


def test_truncated_reply(server, client):
    full = "```c\nfor (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n```"
    server.script("m", Reply.truncated(full))
    choice = ask(client).choices[0]
    assert choice.finish_reason == "length"
    assert full.startswith(choice.message.content)
    assert 0 < len(choice.message.content) < len(full)


def test_huge_reply(server, client):
    server.script("m", Reply.huge(), Reply.huge(n_bytes=12_345))
    assert len(ask(client).choices[0].message.content) == 2_000_000
    assert len(ask(client).choices[0].message.content) == 12_345


def test_empty_and_no_code_replies(server, client):
    server.script("m", Reply.empty(), Reply.no_code("Tiling would help here."))
    empty = ask(client)
    assert empty.choices[0].message.content == ""
    assert empty.usage.completion_tokens == 1
    assert ask(client).choices[0].message.content == "Tiling would help here."
    assert "```" not in Reply.no_code().content


def test_api_key_is_checked():
    with ScriptedServer(default=Reply("welcome"), api_key=API_KEY) as server:
        with openai.OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError) as err:
                ask(bad)
            assert err.value.code == "invalid_api_key"
            assert err.value.body["type"] == "invalid_request_error"
        with openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as good:
            assert ask(good).choices[0].message.content == "welcome"
        assert len(server.requests) == 2


def test_scripted_unauthorized(server, client):
    server.script("m", Reply.unauthorized())
    with pytest.raises(openai.AuthenticationError):
        ask(client)


def test_streaming_reassembles_content_reasoning_and_usage(server, client):
    content = "```c\nvoid f(float *x) { x[0] = 1.0f; }\n```"
    server.script("m", Reply(content, reasoning="first think, then write"))
    stream = ask(client, stream=True, stream_options={"include_usage": True})
    text, thought, finish, usage, roles = [], [], None, None, []
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            roles += [choice.delta.role] if choice.delta.role else []
            text.append(choice.delta.content or "")
            thought.append(getattr(choice.delta, "reasoning_content", None) or "")
            finish = choice.finish_reason or finish
    assert roles == ["assistant"]
    assert "".join(text) == content
    assert "".join(thought) == "first think, then write"
    assert finish == "stop"
    assert usage.completion_tokens == len(content.split()) + 4
    assert usage.prompt_tokens == 9
    assert server.requests[0].body["stream"] is True


def test_streaming_without_usage_and_truncated(server, client):
    server.script("m", Reply.truncated("one two three four five six"))
    chunks = list(ask(client, stream=True))
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "one two three"  # the first 13 of 27 characters


def test_fifty_concurrent_async_requests(server):
    server.script("m", *[Reply(f"answer {i}") for i in range(50)])

    async def main() -> list[str]:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=30
        ) as client:
            calls = [
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"q{i}"}], seed=i
                )
                for i in range(50)
            ]
            return [r.choices[0].message.content for r in await asyncio.gather(*calls)]

    answers = asyncio.run(main())
    assert sorted(answers) == sorted(f"answer {i}" for i in range(50))
    requests = server.requests
    assert len(requests) == 50
    assert sorted(r.body["seed"] for r in requests) == list(range(50))
    assert {r.messages[0]["content"] for r in requests} == {f"q{i}" for i in range(50)}
    assert [r.at for r in requests] == sorted(r.at for r in requests)


def test_models_endpoint_and_unknown_paths(server, client):
    server.script("kernel-writer", Reply("x"))
    assert [m.id for m in client.models.list()] == ["kernel-writer", DEFAULT_MODEL]
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="e", input="text")
    assert server.requests == []


def test_stop_closes_the_port_even_with_a_reply_pending():
    server = ScriptedServer(default=Reply.slow("never", delay_s=30))
    with pytest.raises(RuntimeError):
        _ = server.base_url
    server.start()
    port = server.port
    assert port_is_open(port)
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=10)
    with pytest.raises(openai.APITimeoutError):
        ask(client, timeout=0.1)
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 2.0
    assert not port_is_open(port)
    server.stop()  # idempotent
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=MESSAGES)
    client.close()
