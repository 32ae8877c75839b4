"""The one LLM client: OpenAI-compatible chat completions for every agent.

``complete`` never raises for what an endpoint does: rate limits, 5xx, timeouts, connection loss
and unreadable replies are retried (by exception type, with backoff and jitter, honouring
Retry-After) and, when retries run out, returned as an ``LLMCall`` with ``error`` set. Every call,
failed or not, goes to the recorder as soon as it returns. With replay on, a call recorded before
with the same (model, messages, parameters, sample index) is answered from the record.

Bounded and visible: each try may take the endpoint's ``timeout_s``, and the call that times its
tries and a few seconds' slack (``llm.tries``); a reply body is read up to
``replies.MAX_REPLY_BYTES`` and its text kept up to ``replies.MAX_REPLY_CHARS``; a call that
waits says so on stderr every ``waiting.WAIT_NOTICE_S``. What a call costs: its completion at the
endpoint's price; $0 (known) when it got none; and each try answered 200 with a body that could
not be read at the call's reservation (what it may cost), so that the budget stays an upper bound.

The agents depend on ``llm.chat.ChatModel``, which this client satisfies. The request body, the
record's fields and the retry loop are module functions, shared with the in-process scripted
model of the tests (``testing.scripted_chat``) so that it records calls as this client does.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelopt.llm.budget import Budget
from accelopt.llm.config import AGENTS, Config, Endpoint
from accelopt.llm.pricing import price_for
from accelopt.llm.recorder import MemoryRecorder, Recorder
from accelopt.llm.records import LLMCall, Message, replay_key
from accelopt.llm.replies import Completion, cut, parse_completion, read_capped
from accelopt.llm.tries import Tries, with_retries
from accelopt.llm.waiting import tell_while_waiting, to_stderr

if TYPE_CHECKING:  # openai is imported when the first client is made, not at start-up
    import openai

__all__ = [
    "Completion",
    "LLMClient",
    "Tries",
    "Usage",
    "call_fields",
    "estimate",
    "finished_call",
    "request_body",
    "with_retries",
]


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


def prompt_tokens(messages: list[Message]) -> int:
    """The most tokens a prompt may be: about one per CHARS_PER_TOKEN characters."""
    return sum(len(m.get("content", "")) for m in messages) // CHARS_PER_TOKEN + 1


def estimate(endpoint: Endpoint, messages: list[Message]) -> tuple[float, int]:
    """The most a call may cost, as the budget reserves it: its prompt (``prompt_tokens``) and
    a reply of ``max_tokens``, at the endpoint's price ($0 when the price is unknown)."""
    tokens_in = prompt_tokens(messages)
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


def finished_call(
    endpoint: Endpoint,
    fields: dict[str, Any],
    reply: Completion | None,
    attempts: int,
    error: str,
    start: float,
    unread: int = 0,
) -> LLMCall:
    """The record of a request that got ``reply`` (priced at the endpoint's price, None when
    unknown; its text and reasoning cut to MAX_REPLY_CHARS) or failed with ``error`` ($0: no
    completion came). Each of the ``unread`` tries the endpoint answered 200 with a body that
    could not be read counts at the call's reservation: its prompt and ``max_tokens``."""
    done = {"attempts": attempts, "latency_s": time.perf_counter() - start}
    price = price_for(endpoint)
    held_in, held_out = unread * prompt_tokens(fields["messages"]), unread * endpoint.max_tokens
    held = price.cost(held_in, held_out) if price else None
    if reply is None:
        cost = 0.0 if not unread else held
        tokens = {"tokens_in": held_in, "tokens_out": held_out}
        return LLMCall(**fields, **done, **tokens, error=error, cost_usd=cost)
    tokens_in, tokens_out = reply.tokens_in + held_in, reply.tokens_out + held_out
    cost = price.cost(tokens_in, tokens_out) if price else None
    reasoning = cut(reply.reasoning) if reply.reasoning is not None else None
    return LLMCall(
        **fields,
        **done,
        reply=cut(reply.text),
        reasoning=reasoning,
        finish_reason=reply.finish_reason,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=cost,
    )


@dataclass
class LLMClient:
    config: Config
    recorder: Recorder = field(default_factory=MemoryRecorder)
    replay: bool = False
    budget: Budget | None = None
    sleep: Callable[[float], Any] = asyncio.sleep  # tests make backoff instant
    max_retries: int | None = None  # overrides every endpoint's (e.g. 0 for a quick check)
    say: Callable[[str], None] = to_stderr  # where a call that waits long says so
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
        return self.recorder.hold(key, usd, tokens)

    def _account(self, call: LLMCall, hold: str = "") -> None:
        self.recorder.record(call, hold)
        self.usage.setdefault(call.agent, Usage()).add(call)
        if self.budget is not None and not call.replayed:
            self.budget.charge(call.cost_usd, call.tokens_in + call.tokens_out)

    async def _call(self, endpoint: Endpoint, messages: list[Message], base: dict) -> LLMCall:
        start = time.perf_counter()
        retries = endpoint.max_retries if self.max_retries is None else self.max_retries
        tries = Tries()
        async with self._limit(endpoint):
            telling = asyncio.ensure_future(
                tell_while_waiting(self.say, endpoint, tries, retries + 1)
            )
            try:
                reply, attempts, error = await with_retries(
                    lambda: self._request(endpoint, messages),
                    retries,
                    endpoint.retry_base_s,
                    self.sleep,
                    tries,
                    endpoint.timeout_s,
                )
            finally:
                telling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await telling
        return finished_call(endpoint, base, reply, attempts, error, start, tries.unread)

    async def _request(self, endpoint: Endpoint, messages: list[Message]) -> Completion:
        """One try: the body read as it arrives, up to MAX_REPLY_BYTES."""
        chat = self._client(endpoint).chat.completions.with_streaming_response
        body = request_body(endpoint, messages)
        async with chat.create(**body, timeout=endpoint.timeout_s) as response:
            raw = await read_capped(response.iter_bytes())
        return parse_completion(raw)

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
