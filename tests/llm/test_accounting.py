"""Prices, budget, retry decisions and the JSONL recorder: pure pieces of the client."""

from __future__ import annotations

import random

import openai
import pytest

from accelopt.llm.budget import Budget
from accelopt.llm.config import Config
from accelopt.llm.pricing import Price, price_for
from accelopt.llm.recorder import JsonlRecorder
from accelopt.llm.records import LLMCall, replay_key
from accelopt.llm.retry import backoff_s, is_retryable, retry_after_s

try:  # the HTTP library the installed openai client is built on
    import httpx2 as httpx
except ImportError:  # openai < 3
    import httpx


def endpoint(**fields):
    default = {"base_url": "http://x/v1", "model": "m", **fields}
    return Config.model_validate({"llm": {"default": default}}).endpoint("planner")


def test_prices_from_config_table_or_unknown():
    assert price_for(endpoint(price_in=1.0, price_out=2.0)) == Price(1.0, 2.0)
    assert price_for(endpoint(model="gpt-4o-mini")) == Price(0.15, 0.60)
    assert price_for(endpoint(model="openrouter/openai/gpt-oss-120b")) == Price(0.10, 0.50)
    assert price_for(endpoint(model="openai/gpt-oss-120b")) == Price(0.10, 0.50)
    assert price_for(endpoint(model="gpt-4o-mini", price_out=1.0)) == Price(0.15, 1.0)
    assert price_for(endpoint(model="my-local-model")) is None  # unknown, never 0
    assert Price(1.0, 2.0).cost(1_000_000, 500_000) == pytest.approx(2.0)


def test_budget_refuses_once_reached():
    budget = Budget(max_usd=1.0, max_tokens=1000)
    assert budget.exhausted() == ""
    budget.charge(0.6, 100)
    budget.charge(None, 100)
    assert budget.unknown_cost_calls == 1 and budget.exhausted() == ""
    budget.charge(0.5, 100)
    assert "budget reached" in budget.exhausted()
    tokens = Budget(max_tokens=10)
    tokens.charge(None, 10)
    assert "tokens" in tokens.exhausted()


def _status_error(cls, status, headers=None):
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return cls("error", response=response, body=None)


def test_retry_is_decided_by_exception_type():
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    assert is_retryable(_status_error(openai.RateLimitError, 429))
    assert is_retryable(_status_error(openai.InternalServerError, 500))
    assert is_retryable(_status_error(openai.APIStatusError, 503))
    assert is_retryable(openai.APIConnectionError(request=request))
    assert is_retryable(openai.APITimeoutError(request=request))
    assert not is_retryable(_status_error(openai.AuthenticationError, 401))
    assert not is_retryable(_status_error(openai.BadRequestError, 400))
    assert not is_retryable(_status_error(openai.NotFoundError, 404))
    assert not is_retryable(ValueError("bug"))


def test_retry_after_and_backoff():
    assert retry_after_s(_status_error(openai.RateLimitError, 429, {"retry-after": "2"})) == 2.0
    limited = _status_error(openai.RateLimitError, 429, {"retry-after-ms": "250"})
    assert retry_after_s(limited) == 0.25
    assert retry_after_s(_status_error(openai.RateLimitError, 429)) is None
    dated = _status_error(openai.RateLimitError, 429, {"retry-after": "Wed, 21 Oct 2015"})
    assert retry_after_s(dated) is None
    rng = random.Random(0)
    delays = [backoff_s(a, 1.0, rng) for a in range(10)]
    assert all(0 <= d <= min(60.0, 2**a) for a, d in enumerate(delays))


def call(key: str, error: str = "", reply: str = "hi", replayed: bool = False) -> LLMCall:
    return LLMCall(
        id=key + error, key=key, agent="planner", model="m", base_url="u", messages=[],
        params={}, reply=reply, error=error, replayed=replayed,
    )  # fmt: skip


def test_jsonl_recorder_appends_and_indexes_successes(tmp_path):
    path = tmp_path / "calls.jsonl"
    recorder = JsonlRecorder(path)
    recorder.record(call("a"))
    recorder.record(call("b", error="RateLimitError: slow down"))
    recorder.record(call("a", reply="second", replayed=True))
    assert recorder.find("a").reply == "hi"
    assert recorder.find("b") is None
    with open(path, "a") as f:
        f.write('{"id": "cut sho')  # a line cut short by a crash
    reopened = JsonlRecorder(path)
    assert reopened.find("a").reply == "hi" and reopened.find("b") is None
    assert len(path.read_text().splitlines()) == 4


def test_replay_key_covers_model_messages_params_and_sample():
    messages = [{"role": "user", "content": "x"}]
    key = replay_key("m", messages, {"temperature": 0.7}, 0)
    assert key == replay_key("m", [dict(messages[0])], {"temperature": 0.7}, 0)
    assert key != replay_key("m2", messages, {"temperature": 0.7}, 0)
    assert key != replay_key("m", messages, {"temperature": 0.2}, 0)
    assert key != replay_key("m", messages, {"temperature": 0.7}, 1)
    assert key != replay_key("m", [{"role": "user", "content": "y"}], {"temperature": 0.7}, 0)
