"""A paid call is held in the store from before its request is sent until it is recorded: a call
a kill cut off (the server may have answered and charged it) still counts against the run's
budget, so a budget holds across any number of kills."""

from __future__ import annotations

import asyncio

import pytest

from accelopt.llm.client import LLMClient, estimate
from accelopt.llm.config import Config
from accelopt.search.run import run_budget
from accelopt.store.records import RunRecord
from accelopt.store.store import Store
from accelopt.testing.scripted import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "x" * 400}]


def config(base_url: str, max_usd: float) -> Config:
    return Config.model_validate({
        "llm": {"default": {"base_url": base_url, "model": "m", "max_retries": 0,
                            "price_in": 1.0, "price_out": 2.0, "max_tokens": 100}},
        "budget": {"max_usd": max_usd},
    })  # fmt: skip


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "ws") as s:
        s.create_run(RunRecord("r1", "matmul", "small", "cpu", "hw", "beam", {}))
        yield s


def test_a_recorded_call_leaves_no_hold(store):
    with ScriptedServer(default=lambda r: Reply("fine")) as server:
        cfg = config(server.base_url, 1.0)
        client = LLMClient(
            cfg, recorder=store.recorder("r1"), budget=run_budget(store, store.get_run("r1"))
        )

        async def go():
            try:
                return await client.complete("planner", MESSAGES)
            finally:
                await client.aclose()

        call = asyncio.run(go())
    spent = store.spent(["r1"])
    assert call.ok and spent.held_calls == 0
    assert spent.usd == pytest.approx(call.cost_usd)


def test_a_call_cut_off_in_flight_counts_against_the_budget_of_the_next_session(store):
    with ScriptedServer(default=lambda r: Reply.slow("late", 30.0)) as server:
        cfg = config(server.base_url, 1.0)
        client = LLMClient(cfg, recorder=store.recorder("r1"))

        async def cut_off():  # the session dies while its request is out (as a SIGKILL would)
            task = asyncio.ensure_future(client.complete("planner", MESSAGES))
            await asyncio.sleep(0.3)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.aclose()

        asyncio.run(cut_off())
        held_usd, _ = estimate(cfg.endpoint("planner"), MESSAGES)
        spent = store.spent(["r1"])
        assert spent.held_calls == 1 and spent.usd == pytest.approx(held_usd)
        # the resumed session's budget starts from it: with the limit at what was held, no call
        budget = run_budget(store, store.get_run("r1"), max_usd=held_usd)
        assert "budget reached" in budget.exhausted()
        assert "budget reached" in budget.reserve(0.0, 0)
