"""Which failures are worth another try, and how long to wait: decided by exception type."""

from __future__ import annotations

import json
import random
from functools import cache


class MalformedReplyError(Exception):
    """The endpoint answered 200 with something that is not a chat completion."""


class ReplyTooLargeError(MalformedReplyError):
    """The endpoint answered 200 with a body longer than accelopt reads (``replies``): refused,
    and not asked again (the same question would bring the same answer, paid again)."""


MAX_DELAY_S = 60.0


@cache
def retryable() -> tuple[type[BaseException], ...]:
    """Transient by nature: rate limits, server errors, connection drops and timeouts, and a
    reply body the client could not read (a proxy cut it short: the openai client then raises a
    plain JSONDecodeError, or returns no choices). openai is imported here, on the first failure,
    not when the command line starts (a quarter of a second)."""
    import openai

    return (
        openai.RateLimitError,
        openai.InternalServerError,
        openai.APIConnectionError,  # includes APITimeoutError
        openai.APIResponseValidationError,
        json.JSONDecodeError,
        MalformedReplyError,
    )


def is_retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, ReplyTooLargeError):
        return False
    if isinstance(exc, retryable()):
        return True
    # Other 5xx answers (502, 503, 504 from proxies) have no class of their own.
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def retry_after_s(exc: BaseException) -> float | None:
    """The server's Retry-After in seconds, when it sent one (numbers only; dates are ignored)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name in ("retry-after-ms", "retry-after"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / (1000 if name.endswith("-ms") else 1)
        except ValueError:
            continue
        return max(0.0, min(seconds, MAX_DELAY_S))
    return None


def backoff_s(attempt: int, base_s: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform in [0, base · 2^attempt], capped."""
    draw = (rng or random).random()
    return min(MAX_DELAY_S, base_s * (2**attempt)) * draw


def is_unread(exc: BaseException) -> bool:
    """Whether a try failed after the endpoint answered 200: a body that could not be read (not
    JSON, not a chat completion, too long). The endpoint may have charged for it, so the call
    counts it at its reservation (``client.finished_call``)."""
    import openai

    unread = (MalformedReplyError, json.JSONDecodeError, openai.APIResponseValidationError)
    return isinstance(exc, unread)


ERROR_CHARS = 500  # the most of an error's text a call records


def error_text(exc: BaseException) -> str:
    """One line for the record: the exception's kind and its message, and the body an error
    status came with when it is plain text (a proxy's page: the message has only its code),
    whitespace collapsed, trimmed to ERROR_CHARS."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    body = getattr(exc, "body", None)
    if isinstance(body, str) and body.strip() and " - " not in message:
        message += " - " + " ".join(body.split())
    return f"{type(exc).__name__}: {message}"[:ERROR_CHARS]
