"""The request-body limit of `accelopt serve`, at the ASGI level: what it reads of a refused body
before it answers 413, and what it never reads."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("fastapi")

from accelopt.serve.api import BodyLimit

LIMIT, DRAIN = 1000, 10_000


def refused(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[int, list[Any]]:
    """Pass a request through the limit in front of an app that reads its whole body; return how
    many body messages were read and what was sent."""
    pending = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    read, sent = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return pending.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        raise AssertionError("the app got the whole of a body over the limit")

    limit = BodyLimit(app, LIMIT, drain=DRAIN)  # type: ignore[arg-type]
    asyncio.run(limit({"type": "http", "headers": headers}, receive, send))  # type: ignore[arg-type]
    return read, sent


def test_a_refused_body_within_the_drain_is_read_to_its_end_before_the_answer():
    read, sent = refused([(b"content-length", b"3000")], [b"x" * 1000] * 3)
    assert read == 3 and sent[0]["status"] == 413


def test_a_body_longer_than_the_drain_is_answered_without_reading_it():
    read, sent = refused([(b"content-length", b"%d" % (DRAIN + 1))], [b"x"])
    assert read == 0 and sent[0]["status"] == 413


def test_a_body_without_a_length_is_cut_off_and_the_rest_discarded():
    read, sent = refused([], [b"x" * 600] * 5)
    assert read == 5 and sent[0]["status"] == 413 and b"larger than" in sent[1]["body"]
