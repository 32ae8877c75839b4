"""The tries of one call: retried by exception type, each try and the whole call bounded in time.

``with_retries`` is shared by the real client and the in-process scripted model of the tests
(``testing.scripted_chat``), so that the two record a call alike. With ``timeout_s`` given (the
real client), each try may take ``timeout_s`` at most, and the call as a whole
``timeout_s × (retries + 1) + DEADLINE_SLACK_S``, the waits between tries included
(``deadline_s``): a wait that would end past the deadline is not begun, and a try is cut at it.
The slack keeps the deadline from cutting the last of several tries that each ran their
``timeout_s`` (connecting and a busy machine add to each); it is small beside a timeout in the
minutes.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from accelopt.llm.retry import (
    backoff_s,
    error_text,
    is_retryable,
    is_unread,
    retry_after_s,
)

T = TypeVar("T")

DEADLINE_SLACK_S = 5.0  # added to a call's deadline (tests set it to 0)


@dataclass
class Tries:
    """How a call's tries went, filled in as they happen (the waiting notice reads it)."""

    attempts: int = 0
    unread: int = 0  # tries the endpoint answered 200 with a body that could not be read
    error: str = ""  # the last try's error


def deadline_s(timeout_s: float, retries: int) -> float:
    """How long one call may take in all, its tries and the waits between them included."""
    return timeout_s * (retries + 1) + DEADLINE_SLACK_S


def timed_out() -> Exception:
    """The error of a try cut at its time limit: the one the openai client raises for it (its
    request a stand-in: only the error's kind and message are recorded)."""
    import openai

    base = openai.DefaultAsyncHttpxClient.__mro__[1].__module__.partition(".")[0]
    http = importlib.import_module(base)  # httpx, or httpx2 from openai 3.60
    return openai.APITimeoutError(request=http.Request("POST", "http://accelopt.invalid/"))


async def _try(request: Callable[[], Awaitable[T]], limit_s: float | None) -> T:
    if limit_s is None:
        return await request()
    try:
        async with asyncio.timeout(max(limit_s, 0.0)):
            return await request()
    except TimeoutError:
        raise timed_out() from None


def _limit(timeout_s: float | None, deadline: float | None) -> float | None:
    """What this try may take: ``timeout_s``, or less when the call's deadline is nearer."""
    if timeout_s is None or deadline is None:
        return timeout_s
    return min(timeout_s, deadline - time.monotonic())


async def with_retries(
    request: Callable[[], Awaitable[T]],
    retries: int,
    retry_base_s: float,
    sleep: Callable[[float], Any],
    tries: Tries | None = None,
    timeout_s: float | None = None,
) -> tuple[T | None, int, str]:
    """``request`` tried until it answers, at most ``retries`` more times after the first, and
    only after a retryable failure (by type), waiting Retry-After or a jittered backoff between
    tries: (the completion or None, attempts, the last error). ``tries`` is kept up to date as
    they go; ``timeout_s`` bounds each try and, times the tries, the whole call."""
    tries = tries if tries is not None else Tries()
    end = None if timeout_s is None else time.monotonic() + deadline_s(timeout_s, retries)
    while tries.attempts <= retries:
        tries.attempts += 1
        try:
            return await _try(request, _limit(timeout_s, end)), tries.attempts, ""
        except Exception as exc:  # decided by type below; never raised to the caller
            tries.error = error_text(exc)
            tries.unread += is_unread(exc)
            if not is_retryable(exc) or tries.attempts > retries:
                break
            told = retry_after_s(exc)
            wait = told if told is not None else backoff_s(tries.attempts - 1, retry_base_s)
            if end is not None and time.monotonic() + wait >= end:
                break  # the call's deadline comes first: the last error stands
            await sleep(wait)
    return None, tries.attempts, tries.error
