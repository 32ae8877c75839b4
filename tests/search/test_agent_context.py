"""What the loop shows the agents, seen from the scripted server: planner calls for one kernel see
the titles already drafted, later iterations see what was tried on the lineage, and an executor
reply without code is asked again (paid, and counted in the iteration's record)."""

from __future__ import annotations

import itertools
import re
import threading

import pytest
from agents_pool import variant, write_config

from accelopt.llm.config import load_config
from accelopt.search.config import SearchConfig
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.store.store import Store
from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer
from conftest import FAST_EVAL

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SEARCH = SearchConfig(beam=1, plans=2, samples=1, iterations=2, fixer=0, references=False)


class Team:
    """Plans numbered in the order asked; the first executor reply has no code."""

    def __init__(self) -> None:
        self.plans = itertools.count(1)
        self.kernels = itertools.count(0)
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self.lock:
            if request.model == "planner":
                n = next(self.plans)
                return Reply(f"TITLE: plan number {n}\nSTEPS:\n1. Rewrite as variant good.\n")
            if request.model == "executor":
                if next(self.kernels) == 0:
                    return Reply("I would reorder the loops to i-k-j; that is all.")
                n = re.search(r"plan number (\d+)", request.messages[-1]["content"]).group(1)  # type: ignore[union-attr]
                tagged = variant("good").replace("{", f"{{ volatile int tag = {n}; (void)tag;", 1)
                return Reply(f"```c\n{tagged}```\n")
        return Reply("NO LESSON")


def test_what_the_agents_are_shown_and_asked_again(tmp_path, hw, accelopt_cache, fake_evaluations):
    with ScriptedServer(default=Team()) as server:
        cfg = load_config(write_config(tmp_path / "accelopt.yaml", server.base_url))
        with Store.open(tmp_path / "ws") as store:
            run = new_run(
                store, RunTarget("matmul", "small", "cpu", hw), SEARCH, cfg, variant("slow")
            )
            execute_run(store, run, RunInputs(cfg, hw, FAST_EVAL, check_llm=False), resume=False)
            records = store.iterations(run.id)
            calls = store.llm_calls(run.id)
        planner = [r.messages[-1]["content"] for r in server.requests if r.model == "planner"]
    first, second = planner[0], planner[1]
    assert "plan number 1" not in first and "plan number 1" in second  # drafted: differ
    later = planner[2:]
    assert later and all("plan number 1" in p and "plan number 2" in p for p in later)
    executor = [c for c in calls if c.agent == "executor"]
    assert len(executor) == 2 * 2 + 1  # one per plan, and one asked again
    assert all(c.cost_usd and c.cost_usd > 0 for c in executor)  # the re-ask is paid
    assert records[1].wasted.get("executor asked again") == 1
    assert sum(r.wasted.get("summarizer no lesson", 0) for r in records) >= 1
