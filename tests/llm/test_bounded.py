"""The LLM side is bounded and visible: a huge reply is refused unread and the store keeps no more
than the cap; a call that waits says so; ACCELOPT_LLM_TIMEOUT_S bounds each try and a deadline
the whole call; a call that got no completion costs $0 (known), a 200 that could not be read
its reservation."""

from __future__ import annotations

import asyncio
import time

import pytest

from accelopt.errors import UserError
from accelopt.llm import tries, waiting
from accelopt.llm.budget import Budget
from accelopt.llm.client import LLMClient, estimate
from accelopt.llm.config import Config
from accelopt.llm.recorder import MemoryRecorder
from accelopt.llm.replies import MAX_REPLY_BYTES, MAX_REPLY_CHARS
from accelopt.store.records import RunRecord
from accelopt.store.store import Store
from accelopt.testing.scripted import Reply, ScriptedServer

pytestmark = pytest.mark.timeout(60)

MESSAGES = [{"role": "user", "content": "make it fast"}]


def config(server: ScriptedServer, **default) -> Config:
    base = {"base_url": server.base_url, "model": "m", "max_retries": 1, "retry_base_s": 0.0,
            "price_in": 1.0, "price_out": 2.0, **default}  # fmt: skip
    return Config.model_validate({"llm": {"default": base, "planner": {"model": "planner"}}})


def complete(client: LLMClient):
    async def go():
        try:
            return await client.complete("planner", MESSAGES)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _db_bytes(store: Store) -> int:
    folder = store.path.parent
    return sum(p.stat().st_size for p in folder.glob(f"{store.path.name}*"))


def test_a_60_mb_reply_is_refused_unread_and_the_store_grows_by_less_than_the_cap(tmp_path):
    with Store.open(tmp_path / "ws") as store, ScriptedServer() as server:
        store.create_run(RunRecord("r1", "matmul", "small", "cpu", "hw", "beam", {}))
        before = _db_bytes(store)
        server.script("planner", Reply.huge(60_000_000), Reply("never asked"))
        client = LLMClient(config(server), recorder=store.recorder("r1"))
        call = complete(client)
        grown = _db_bytes(store) - before
        (stored,) = store.llm_calls("r1")
    assert not call.ok and call.error.startswith("ReplyTooLargeError") and call.attempts == 1
    assert str(MAX_REPLY_BYTES) in call.error and server.pending("planner") == 1  # not retried
    assert stored.reply == "" and grown < MAX_REPLY_CHARS
    usd, tokens = estimate(client.endpoints["planner"], MESSAGES)
    assert call.cost_usd == pytest.approx(usd)  # answered 200, unread: counted as reserved
    assert call.tokens_in + call.tokens_out == tokens


def test_a_long_reply_is_kept_cut_to_the_cap_with_a_marker(server):
    server.script("planner", Reply.huge(MAX_REPLY_CHARS + 1000))
    call = complete(LLMClient(config(server)))
    assert call.ok and len(call.reply) < MAX_REPLY_CHARS + 100
    assert call.reply.endswith("[cut by accelopt: 1000 more characters]")


def test_a_silent_endpoint_says_it_waits_and_the_env_timeout_cuts_it(server, monkeypatch):
    monkeypatch.setattr(waiting, "WAIT_NOTICE_S", 0.1)
    monkeypatch.setenv("ACCELOPT_LLM_TIMEOUT_S", "0.5")
    server.script("planner", Reply.slow("late", 30), Reply.slow("late", 30))
    lines: list[str] = []
    client = LLMClient(config(server), say=lines.append)
    assert client.endpoints["planner"].timeout_s == 0.5  # the variable, not the default 600
    start = time.monotonic()
    call = complete(client)
    assert time.monotonic() - start < 5
    assert not call.ok and call.error == "APITimeoutError: Request timed out."
    assert call.attempts == 2 and call.cost_usd == 0.0
    assert lines and lines[0] == "planner: waiting 0 s for planner, attempt 1 of 2, timeout 0.5 s"
    assert any("attempt 2 of 2" in line for line in lines)


def test_the_waiting_line_goes_to_stderr(server, monkeypatch, capfd):
    monkeypatch.setattr(waiting, "WAIT_NOTICE_S", 0.05)
    server.script("planner", Reply.slow("fine", 0.3))
    call = complete(LLMClient(config(server)))
    assert call.ok
    err = capfd.readouterr().err
    assert "planner: waiting 0 s for planner, attempt 1 of 2, timeout 600 s" in err


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan", "inf"])
def test_a_bad_timeout_variable_is_one_sentence(server, monkeypatch, value):
    monkeypatch.setenv("ACCELOPT_LLM_TIMEOUT_S", value)
    with pytest.raises(UserError, match=r"ACCELOPT_LLM_TIMEOUT_S=.* is not a number of seconds"):
        LLMClient(config(server))


def test_an_agents_own_timeout_beats_the_variable(server, monkeypatch):
    monkeypatch.setenv("ACCELOPT_LLM_TIMEOUT_S", "7")
    base = config(server).model_dump()
    base["llm"]["planner"]["timeout_s"] = 99
    client = LLMClient(Config.model_validate(base))
    assert client.endpoints["planner"].timeout_s == 99
    assert client.endpoints["executor"].timeout_s == 7


def test_a_call_gives_up_at_its_deadline_across_retries(server, monkeypatch):
    """timeout 0.5 s × 3 tries = a deadline of 1.5 s (no slack): the second wait of 1 s would
    pass it, so the third try is never sent."""
    monkeypatch.setattr(tries, "DEADLINE_SLACK_S", 0.0)
    server.script("planner", *[Reply.rate_limited(1.0)] * 3)
    start = time.monotonic()
    call = complete(LLMClient(config(server, timeout_s=0.5, max_retries=2)))
    assert not call.ok and call.error.startswith("RateLimitError") and call.attempts == 2
    assert server.pending("planner") == 1 and time.monotonic() - start < 1.5


def test_a_failed_call_costs_nothing_known_and_the_endpoints_text_is_kept(server):
    server.script(
        "planner", *[Reply(status=502, raw_body="<h1>Bad gateway: upstream down</h1>")] * 2
    )
    budget = Budget()
    client = LLMClient(config(server), budget=budget)
    call = complete(client)
    assert (
        call.error == "InternalServerError: Error code: 502 - <h1>Bad gateway: upstream down</h1>"
    )
    assert call.cost_usd == 0.0 and client.usage["planner"].unknown_cost == 0
    assert budget.unknown_cost_calls == 0 and budget.spent_usd == 0.0


def test_an_unread_200_counts_at_its_reservation(server):
    server.script(
        "planner", Reply.malformed(), Reply("fine", prompt_tokens=10, completion_tokens=5)
    )
    budget = Budget()
    recorder = MemoryRecorder()
    client = LLMClient(config(server), budget=budget, recorder=recorder)
    call = complete(client)
    usd, tokens = estimate(client.endpoints["planner"], MESSAGES)
    assert call.ok and call.attempts == 2
    assert call.cost_usd == pytest.approx(usd + (10 * 1.0 + 5 * 2.0) / 1e6)
    assert budget.spent_usd == pytest.approx(call.cost_usd)
    assert budget.spent_tokens == tokens + 15


def test_an_unread_200_of_an_unpriced_model_is_unknown(server):
    server.script("planner", Reply.malformed(), Reply.malformed())
    call = complete(LLMClient(config(server, price_in=None, price_out=None)))
    assert not call.ok and call.cost_usd is None
