"""An in-process scripted ``ChatModel`` for tests: the agents' LLM without HTTP.

:class:`ScriptedChat` answers from the same :class:`~accelopt.testing.scripting.Script` as the HTTP
``ScriptedServer`` (replies per model, FIFO, then ``default``; ``chat.script("planner", ...)``,
``chat.requests_for("planner")``), and turns each reply into the ``LLMCall`` the real
``LLMClient`` records for it, through the client's own helpers: the same request body, the same
retry loop (by exception type, with Retry-After), the same price and record fields. Faults are
raised as the exceptions the ``openai`` client raises for them, so they are classified and worded
alike: an error status (``RateLimitError: Error code: 429 - ...``), a reply slower than the
endpoint's timeout (``APITimeoutError``), a body that is not JSON (``JSONDecodeError``) or not a
chat completion (``MalformedReplyError``). No budget, no recorder, no replay: those are the
client's (tests/llm covers them over HTTP).

Example::

    chat = ScriptedChat()
    chat.script("planner", Reply("TITLE: Tile\\n1. Tile K."), Reply.server_error())
    result = asyncio.run(propose(chat, given))
    assert chat.requests_for("planner")[0].messages[1]["content"].startswith("...")
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import openai

from accelopt.llm.budget import Budget
from accelopt.llm.client import (
    Completion,
    Tries,
    call_fields,
    finished_call,
    request_body,
    with_retries,
)
from accelopt.llm.config import AGENTS, Config, Endpoint
from accelopt.llm.records import LLMCall, Message
from accelopt.llm.retry import MalformedReplyError
from accelopt.testing.scripting import (
    DEFAULT_MODEL,
    Reply,
    ReplySource,
    Script,
    completion_body,
    error_body,
)

__all__ = ["IN_PROCESS_URL", "ScriptedChat", "scripted_config"]

IN_PROCESS_URL = "scripted://in-process/v1"
"""The base URL of the in-process model's endpoints (it is only recorded, never dialled)."""

# The exception the openai client raises for an error status (others: APIStatusError; 5xx:
# InternalServerError).
_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


def scripted_config(**default: Any) -> Config:
    """A config for a scripted LLM: each agent's model is named after the agent (script the
    planner's replies with ``script("planner", ...)``), $0 a token, no retries, no backoff.
    ``default`` sets fields of the default endpoint, e.g. ``max_retries=1``, or
    ``base_url=server.base_url`` to reach a ``ScriptedServer`` through the real client."""
    fields = {
        "base_url": IN_PROCESS_URL,
        "model": DEFAULT_MODEL,
        "max_retries": 0,
        "retry_base_s": 0.0,
        "price_in": 0.0,
        "price_out": 0.0,
        **default,
    }
    agents = {agent: {"model": agent} for agent in AGENTS}
    return Config.model_validate({"llm": {"default": fields, **agents}})


def _http() -> Any:
    """The HTTP library the installed ``openai`` is built on (``httpx``; ``httpx2`` from openai
    3.60): its status errors read a real response of that library, history and request included."""
    base = openai.DefaultAsyncHttpxClient.__mro__[1]
    return importlib.import_module(base.__module__.partition(".")[0])


def _response(status: int, headers: dict[str, str]) -> Any:
    """The response the openai client would have received: ``status`` and ``headers``."""
    http = _http()
    request = http.Request("POST", "http://scripted.invalid/v1/chat/completions")
    return http.Response(status, headers=headers, request=request)


def _status_error(reply: Reply) -> openai.APIStatusError:
    """The exception the openai client raises for ``reply``'s error status, worded as it does:
    "Error code: <status>", and " - <message>" when the body is JSON with an error message."""
    raw = reply.raw_body
    text = (json.dumps(error_body(reply.status, reply.content)) if raw is None else raw).strip()
    message, body = f"Error code: {reply.status}", None
    try:
        body = json.loads(text)
    except ValueError:
        body = text
    error = body.get("error", body) if isinstance(body, dict) else None
    detail = error.get("message") if isinstance(error, dict) else None
    if isinstance(detail, str) and detail:
        message += f" - {detail}"
    data = error if isinstance(body, dict) else body
    kind = _STATUS_ERRORS.get(reply.status)
    if kind is None:
        kind = openai.InternalServerError if reply.status >= 500 else openai.APIStatusError
    headers = {name.lower(): value for name, value in reply.headers.items()}
    return kind(message, response=_response(reply.status, headers), body=data)


def _completion(payload: Any) -> Completion:
    """What the client keeps of a chat-completion body (an unreadable one raises as there)."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not choices:
        raise MalformedReplyError("the reply is not a chat completion (no choices)")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    found = (message.get(name) for name in ("reasoning_content", "reasoning"))
    reasoning = next((text for text in found if isinstance(text, str) and text), None)
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    return Completion(
        text=message.get("content") or "",
        reasoning=reasoning,
        finish_reason=choice.get("finish_reason"),
        tokens_in=usage.get("prompt_tokens") or 0,
        tokens_out=usage.get("completion_tokens") or 0,
    )


class ScriptedChat(Script):
    """A ``ChatModel`` that answers from a script, in-process; see the module's docstring.

    ``default``: the reply (or function of the request) for a model with nothing scripted.
    ``config``: the agents' endpoints (model names, retries, prices, timeout), by default
    :func:`scripted_config`. ``sleep``: the wait between retries (tests make it instant).
    ``calls``: every ``LLMCall`` returned, in order.
    """

    def __init__(
        self,
        default: ReplySource | None = None,
        config: Config | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        super().__init__(default)
        self.config = config if config is not None else scripted_config()
        self.endpoints = {agent: self.config.endpoint(agent) for agent in AGENTS}
        self.sleep = sleep
        self.calls: list[LLMCall] = []
        self.budget: Budget | None = None  # no budget: see the module's docstring

    async def complete(self, agent: str, messages: list[Message], sample_index: int = 0) -> LLMCall:
        """One scripted chat completion for ``agent``; failures come back as data."""
        endpoint = self.endpoints[agent]
        fields = call_fields(agent, endpoint, messages, sample_index)
        start = time.perf_counter()
        tries = Tries()
        reply, attempts, error = await with_retries(
            lambda: self._request(endpoint, messages),
            endpoint.max_retries,
            endpoint.retry_base_s,
            self.sleep,
            tries,
        )
        call = finished_call(endpoint, fields, reply, attempts, error, start, tries.unread)
        self.calls.append(call)
        return call

    async def _request(self, endpoint: Endpoint, messages: list[Message]) -> Completion:
        """One try: the request logged as the server logs it, the scripted reply, and the
        completion or the exception the openai client would have made of it."""
        body = json.loads(json.dumps(request_body(endpoint, messages)))  # as sent on the wire
        headers = {"authorization": f"Bearer {endpoint.api_key}"}
        path = urlsplit(endpoint.base_url).path.rstrip("/") + "/chat/completions"
        request = self.receive(body, headers, path)
        reply = self.next_reply(request)
        if reply.delay_s > 0:
            await asyncio.sleep(min(reply.delay_s, endpoint.timeout_s))
            if reply.delay_s > endpoint.timeout_s:
                raise openai.APITimeoutError(request=_response(408, {}).request)
        if reply.status != 200:
            raise _status_error(reply)
        if reply.raw_body is not None:
            return _completion(json.loads(reply.raw_body))
        return _completion(completion_body(self.next_id(), request, reply))
