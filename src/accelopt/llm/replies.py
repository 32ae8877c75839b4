"""What a call keeps of an endpoint's reply, bounded.

A reply body is read as it arrives, and refused (``ReplyTooLargeError``, not retried) once it is
longer than ``MAX_REPLY_BYTES``: a reply that size is no kernel, and reading it whole would hold
it in memory and in the store. What a call keeps of a reply it read (its text, its reasoning) is
cut to ``MAX_REPLY_CHARS`` each, with a marker saying how much was cut: the agents see, and the
store keeps, no more than that.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from accelopt.llm.retry import MalformedReplyError, ReplyTooLargeError

MAX_REPLY_BYTES = 8 << 20  # the longest reply body read (JSON escapes make a body longer)
MAX_REPLY_CHARS = 2 << 20  # the most of a reply's text, and of its reasoning, a call keeps


@dataclass
class Completion:
    """What a call keeps of an endpoint's chat completion: each field goes into the call's
    ``LLMCall`` under its own name (``text`` as ``reply``)."""

    text: str
    reasoning: str | None
    finish_reason: str | None
    tokens_in: int
    tokens_out: int


def cut(text: str, limit: int = MAX_REPLY_CHARS) -> str:
    """``text``, or its first ``limit`` characters and a marker of how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut by accelopt: {len(text) - limit} more characters]"


async def read_capped(chunks: AsyncIterator[bytes], limit: int = MAX_REPLY_BYTES) -> bytes:
    """The body ``chunks`` make, read until it passes ``limit`` bytes: then refused."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise ReplyTooLargeError(
                f"the reply is over {limit} bytes: refused unread (MAX_REPLY_BYTES)"
            )
    return bytes(body)


def _reasoning(message: dict[str, Any]) -> str | None:
    """Reasoning text, where the endpoint returns it (vLLM/DeepSeek, OpenRouter/Ollama names)."""
    for name in ("reasoning_content", "reasoning"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def parse_completion(body: bytes) -> Completion:
    """The completion a chat-completion body holds; JSONDecodeError when it is not JSON,
    MalformedReplyError when it is not a chat completion (both retried)."""
    payload = json.loads(body)
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not choices or not isinstance(choices, list):
        raise MalformedReplyError("the reply is not a chat completion (no choices)")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    content, finish = message.get("content"), choice.get("finish_reason")
    return Completion(
        text=content if isinstance(content, str) else "",
        reasoning=_reasoning(message),
        finish_reason=finish if isinstance(finish, str) else None,
        tokens_in=_count(usage.get("prompt_tokens")),
        tokens_out=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0
