"""The one LLM client: OpenAI-compatible chat completions for every agent.

``complete`` never raises for what an endpoint does: rate limits, 5xx, timeouts, connection loss
and unreadable replies are retried (by exception type, with backoff and jitter, honouring
Retry-After) and, when retries run out, returned as an ``LLMCall`` with ``error`` set. Every call,
failed or not, goes to the recorder as soon as it returns. With replay on, a call recorded before
with the same (model, messages, parameters, sample index) is answered from the record.

The agents depend on ``llm.chat.ChatModel``, which this client satisfies. The request body, the
record's fields and the retry loop are module functions, shared with the in-process scripted
model of the tests (``testing.scripted_chat``) so that it records calls as this client does.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

from accelopt.llm.budget import Budget
from accelopt.llm.config import AGENTS, Config, Endpoint
from accelopt.llm.pricing import price_for
from accelopt.llm.recorder import HoldingRecorder, MemoryRecorder, Recorder
from accelopt.llm.records import LLMCall, Message, replay_key

if TYPE_CHECKING:  # openai is imported when the first client is made, not at start-up
    import openai
from accelopt.llm.retry import (
    MalformedReplyError,
    backoff_s,
    error_text,
    is_retryable,
    retry_after_s,
)


@dataclass
class Usage:
    """Tokens and dollars of one agent's calls in this client's lifetime (replays cost nothing)."""

    calls: int = 0
    failed: int = 0
    replayed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    unknown_cost: int = 0  # calls whose price is unknown

    def add(self, call: LLMCall) -> None:
        self.calls += 1
        self.failed += not call.ok
        self.replayed += call.replayed
        self.tokens_in += call.tokens_in
        self.tokens_out += call.tokens_out
        if call.cost_usd is None:
            self.unknown_cost += 1
        else:
            self.cost_usd += call.cost_usd


CHARS_PER_TOKEN = 3  # fewer than most tokenizers average on code and prose: a safe estimate


def estimate(endpoint: Endpoint, messages: list[Message]) -> tuple[float, int]:
    """The most a call may cost, as the budget reserves it: its prompt (about one token per
    CHARS_PER_TOKEN characters) and a reply of ``max_tokens``, at the endpoint's price ($0 when
    the price is unknown)."""
    tokens_in = sum(len(m.get("content", "")) for m in messages) // CHARS_PER_TOKEN + 1
    price = price_for(endpoint)
    usd = price.cost(tokens_in, endpoint.max_tokens) if price else 0.0
    return usd, tokens_in + endpoint.max_tokens


def request_body(endpoint: Endpoint, messages: list[Message]) -> dict[str, Any]:
    """The chat-completions request a call sends (the scripted test models read it back)."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": messages,
        "temperature": endpoint.temperature,
        "max_tokens": endpoint.max_tokens,
    }
    if endpoint.reasoning_effort:
        body["reasoning_effort"] = endpoint.reasoning_effort
    return body


@dataclass
class Completion:
    """What a call keeps of an endpoint's chat completion: each field goes into the call's
    ``LLMCall`` under its own name (``text`` as ``reply``)."""

    text: str
    reasoning: str | None
    finish_reason: str | None
    tokens_in: int
    tokens_out: int


def call_fields(
    agent: str, endpoint: Endpoint, messages: list[Message], sample_index: int
) -> dict[str, Any]:
    """The fields every ``LLMCall`` of this request has, whatever comes of it."""
    params = endpoint.params()
    return {
        "id": uuid.uuid4().hex,
        "key": replay_key(endpoint.model, messages, params, sample_index),
        "agent": agent,
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "messages": messages,
        "params": params,
        "sample_index": sample_index,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


async def with_retries(
    request: Callable[[], Awaitable[Completion]],
    retries: int,
    retry_base_s: float,
    sleep: Callable[[float], Any],
) -> tuple[Completion | None, int, str]:
    """``request`` tried until it answers, at most ``retries`` more times after the first, and
    only after a retryable failure (by type), waiting Retry-After or a jittered backoff between
    tries: (the completion or None, attempts, the last error)."""
    attempts, last_error = 0, ""
    while attempts <= retries:
        attempts += 1
        try:
            return await request(), attempts, ""
        except Exception as exc:  # decided by type below; never raised to the caller
            last_error = error_text(exc)
            if not is_retryable(exc) or attempts > retries:
                break
            told = retry_after_s(exc)
            await sleep(told if told is not None else backoff_s(attempts - 1, retry_base_s))
    return None, attempts, last_error


def finished_call(
    endpoint: Endpoint,
    fields: dict[str, Any],
    reply: Completion | None,
    attempts: int,
    error: str,
    start: float,
) -> LLMCall:
    """The record of a request that got ``reply`` (priced at the endpoint's price, None when
    unknown) or failed with ``error``."""
    done = {"attempts": attempts, "latency_s": time.perf_counter() - start}
    if reply is None:
        return LLMCall(**fields, **done, error=error)
    price = price_for(endpoint)
    cost = price.cost(reply.tokens_in, reply.tokens_out) if price else None
    answered = asdict(reply)
    answered["reply"] = answered.pop("text")
    return LLMCall(**fields, **done, **answered, cost_usd=cost)


def _reasoning(message: Any) -> str | None:
    """Reasoning text, where the endpoint returns it (vLLM/DeepSeek, OpenRouter/Ollama names)."""
    extra = getattr(message, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = extra.get(name) or getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass
class LLMClient:
    config: Config
    recorder: Recorder = field(default_factory=MemoryRecorder)
    replay: bool = False
    budget: Budget | None = None
    sleep: Callable[[float], Any] = asyncio.sleep  # tests make backoff instant
    max_retries: int | None = None  # overrides every endpoint's (e.g. 0 for a quick check)
    usage: dict[str, Usage] = field(default_factory=dict)
    _clients: dict[tuple[str, str], openai.AsyncOpenAI] = field(default_factory=dict)
    _limits: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = Budget(self.config.budget.max_usd, self.config.budget.max_tokens)
        self.endpoints = {agent: self.config.endpoint(agent) for agent in AGENTS}

    async def complete(self, agent: str, messages: list[Message], sample_index: int = 0) -> LLMCall:
        """One chat completion for ``agent``; failures come back as data (``call.error``)."""
        endpoint = self.endpoints[agent]
        base = call_fields(agent, endpoint, messages, sample_index)
        recorded = self.recorder.find(base["key"]) if self.replay else None
        hold = ""
        if recorded is not None:  # already paid for: no request, no charge
            call = recorded.model_copy(update={**base, "replayed": True, "cost_usd": 0.0})
        else:
            call, hold = await self._paid(endpoint, messages, base)
        self._account(call, hold)
        return call

    async def _paid(
        self, endpoint: Endpoint, messages: list[Message], base: dict
    ) -> tuple[LLMCall, str]:
        """A request under the budget: an estimate is reserved while it runs, and held in the
        recorder (where it holds: the store) from before it is sent until it is recorded; the
        call and its hold."""
        usd, tokens = estimate(endpoint, messages)
        if self.budget is not None:
            refusal = self.budget.reserve(usd, tokens)
            if refusal:
                return LLMCall(**base, error=refusal, cost_usd=0.0), ""  # never sent
        try:
            hold = self._hold(base["key"], usd, tokens)
            return await self._call(endpoint, messages, base), hold
        finally:
            if self.budget is not None:
                self.budget.release(usd, tokens)

    def _hold(self, key: str, usd: float, tokens: int) -> str:
        hold = getattr(self.recorder, "hold", None)
        return str(hold(key, usd, tokens)) if hold is not None else ""

    def _account(self, call: LLMCall, hold: str = "") -> None:
        if hold:
            cast(HoldingRecorder, self.recorder).record(call, hold)
        else:
            self.recorder.record(call)
        self.usage.setdefault(call.agent, Usage()).add(call)
        if self.budget is not None and not call.replayed:
            self.budget.charge(call.cost_usd, call.tokens_in + call.tokens_out)

    async def _call(self, endpoint: Endpoint, messages: list[Message], base: dict) -> LLMCall:
        start = time.perf_counter()
        retries = endpoint.max_retries if self.max_retries is None else self.max_retries
        async with self._limit(endpoint):
            reply, attempts, error = await with_retries(
                lambda: self._request(endpoint, messages),
                retries,
                endpoint.retry_base_s,
                self.sleep,
            )
        return finished_call(endpoint, base, reply, attempts, error, start)

    async def _request(self, endpoint: Endpoint, messages: list[Message]) -> Completion:
        kwargs = request_body(endpoint, messages)
        response = await self._client(endpoint).chat.completions.create(**kwargs)
        if response is None or not getattr(response, "choices", None):
            raise MalformedReplyError("the reply is not a chat completion (no choices)")
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            reasoning=_reasoning(choice.message),
            finish_reason=choice.finish_reason,
            tokens_in=usage.prompt_tokens if usage else 0,
            tokens_out=usage.completion_tokens if usage else 0,
        )

    def _client(self, endpoint: Endpoint) -> openai.AsyncOpenAI:
        import openai

        ident = (endpoint.base_url, endpoint.api_key)
        if ident not in self._clients:
            self._clients[ident] = openai.AsyncOpenAI(
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                timeout=endpoint.timeout_s,
                max_retries=0,  # retries are ours: by type, with the budget and the record
            )
        return self._clients[ident]

    def _limit(self, endpoint: Endpoint) -> asyncio.Semaphore:
        """One concurrency limit per endpoint (base URL), shared by the agents that use it."""
        if endpoint.base_url not in self._limits:
            self._limits[endpoint.base_url] = asyncio.Semaphore(endpoint.concurrency)
        return self._limits[endpoint.base_url]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
