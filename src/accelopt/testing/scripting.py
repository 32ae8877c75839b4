"""The scripting rules shared by the scripted LLMs of the tests: what a reply is, which reply a
request gets, and the chat-completion body a reply becomes.

Two scripted LLMs answer from the same :class:`Script`, so they answer alike: the HTTP server
(``testing.scripted.ScriptedServer``, reached through the real ``LLMClient`` and ``openai`` client)
and the in-process model (``testing.scripted_chat.ScriptedChat``, an agent's ``ChatModel`` with no
HTTP). Replies are scripted per model (FIFO), else answered by ``default`` (a reply, or a
function of the request), else by a 500 "no scripted reply for model '<m>'".

Stdlib only.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MODEL",
    "RecordedRequest",
    "Reply",
    "ReplySource",
    "Script",
    "completion_body",
    "error_body",
    "usage",
]

DEFAULT_MODEL = "scripted-default"
"""Listed by ``GET /v1/models`` next to the scripted models."""

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    # status: (error type, error code, default message)
    400: ("invalid_request_error", None, "Bad request (scripted)."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided (scripted)."),
    403: ("permission_error", None, "Permission denied (scripted)."),
    404: ("invalid_request_error", "not_found", "Not found (scripted)."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (scripted)."),
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat-completions request.

    ``status != 200`` answers with an OpenAI-style error body whose message is ``content``
    (or a default for the status); ``raw_body`` is sent as-is, bypassing everything else
    except ``status``, ``headers`` and ``delay_s``.
    """

    content: str = ""
    reasoning: str | None = None
    """Returned as ``message["reasoning_content"]`` (vLLM/DeepSeek style) when set."""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    """Usage override; by default one per whitespace-separated word, plus one per message."""
    completion_tokens: int | None = None
    """Usage override; by default the words in content and reasoning (at least 1)."""

    @classmethod
    def rate_limited(cls, retry_after_s: float = 0.05) -> Reply:
        """429 with a ``retry-after`` header (seconds)."""
        return cls(status=429, headers={"retry-after": f"{retry_after_s:g}"})

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        """A 5xx error body."""
        return cls(status=status)

    @classmethod
    def unauthorized(cls) -> Reply:
        """401 with code ``invalid_api_key``."""
        return cls(status=401)

    @classmethod
    def slow(cls, content: str, delay_s: float) -> Reply:
        """A normal reply sent after ``delay_s`` seconds."""
        return cls(content=content, delay_s=delay_s)

    @classmethod
    def empty(cls) -> Reply:
        """A well-formed completion with empty content."""
        return cls(content="")

    @classmethod
    def malformed(cls) -> Reply:
        """200 with ``application/json`` but a body that is not valid JSON."""
        return cls(raw_body='{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [')

    @classmethod
    def truncated(cls, content: str) -> Reply:
        """The first half of ``content`` with finish_reason ``length``."""
        return cls(content=content[: len(content) // 2], finish_reason="length")

    @classmethod
    def huge(cls, n_bytes: int = 2_000_000) -> Reply:
        """Content of exactly ``n_bytes`` ASCII characters (words of filler)."""
        filler = "lorem ipsum dolor sit amet "
        return cls(content=(filler * (n_bytes // len(filler) + 1))[:n_bytes])

    @classmethod
    def no_code(cls, text: str = "I would restructure the loops, but here is no code.") -> Reply:
        """Prose without any fenced code block."""
        return cls(content=text)


@dataclass(frozen=True)
class RecordedRequest:
    """A chat-completions request as the server received it."""

    model: str
    messages: list[dict]
    body: dict
    """The whole JSON body (temperature, max_tokens, reasoning_effort, stream, ...)."""
    headers: dict[str, str]
    """Header names lower-cased."""
    path: str
    at: float
    """``time.monotonic()`` at arrival."""


ReplySource = Reply | Callable[[RecordedRequest], Reply]
"""A reply, or a function of the request that makes one."""


class Script:
    """Scripted replies per model (FIFO) and a default, and the log of the requests answered.

    Thread-safe: the HTTP server answers from several threads.
    """

    def __init__(self, default: ReplySource | None = None) -> None:
        self.default = default
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[ReplySource]] = {}
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)

    def script(self, model: str, *replies: ReplySource) -> None:
        """Append replies to ``model``'s FIFO."""
        with self._lock:
            self._scripts.setdefault(model, deque()).extend(replies)

    def pending(self, model: str | None = None) -> int:
        """Scripted replies not consumed yet, for ``model`` or over all models."""
        with self._lock:
            queues = self._scripts.values() if model is None else [self._scripts.get(model, ())]
            return sum(len(q) for q in queues)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the chat-completions requests received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, model: str) -> list[RecordedRequest]:
        """The recorded requests for ``model``, in arrival order."""
        return [r for r in self.requests if r.model == model]

    def models(self) -> list[str]:
        """Every model ever scripted, then ``DEFAULT_MODEL``."""
        with self._lock:
            return [*self._scripts, DEFAULT_MODEL]

    def receive(self, body: dict, headers: dict[str, str], path: str) -> RecordedRequest:
        """Log a chat-completions request arriving now (before it is answered) and return it: its
        model and messages as the JSON ``body`` gives them (no model: ``""``; messages that are
        not a list: none)."""
        messages = body.get("messages")
        request = RecordedRequest(
            model=str(body.get("model", "")),
            messages=messages if isinstance(messages, list) else [],
            body=body,
            headers=headers,
            path=path,
            at=time.monotonic(),
        )
        with self._lock:
            self._requests.append(request)
        return request

    def next_reply(self, request: RecordedRequest) -> Reply:
        """The reply to ``request``: the next one scripted for its model, else ``default``, else
        a 500 naming the model. A callable that raises answers a 500 naming the exception."""
        with self._lock:
            queue = self._scripts.get(request.model)
            source = queue.popleft() if queue else self.default
        if source is None:
            return Reply(status=500, content=f"no scripted reply for model '{request.model}'")
        if isinstance(source, Reply):
            return source
        try:
            return source(request)
        except Exception as exc:  # a test bug: answer loudly rather than hang up
            return Reply(status=500, content=f"scripted reply callable raised {exc!r}")

    def next_id(self) -> str:
        """A fresh completion id."""
        with self._lock:
            return f"chatcmpl-scripted-{next(self._ids)}"


# -- payloads ---------------------------------------------------------------------------


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _message_text(message: Any) -> str:
    """The text of a message: plain ``content``, or the text parts of a content list."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def usage(request: RecordedRequest, reply: Reply) -> dict[str, int]:
    """The ``usage`` object of a reply: scripted, else counted in words."""
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = sum(_words(_message_text(m)) + 1 for m in request.messages)
    completion = reply.completion_tokens
    if completion is None:
        completion = max(1, _words(reply.content) + _words(reply.reasoning))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def error_body(status: int, message: str = "") -> dict[str, Any]:
    """An OpenAI-style error body for ``status``; ``message`` or the status's default."""
    fallback = ("invalid_request_error", None, f"Error {status} (scripted).")
    if status >= 500:
        fallback = ("server_error", None, f"The server had an error: {status} (scripted).")
    kind, code, default_message = _ERRORS.get(status, fallback)
    error = {"message": message or default_message, "type": kind, "param": None, "code": code}
    return {"error": error}


def completion_body(cid: str, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    """The ``chat.completion`` object of a successful (status 200, not raw) reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": usage(request, reply),
    }
